"""A profile's score stage: several weighted score plugins and the domain choice.

``Scoring`` is itself a ``ScorePlugin`` (the weighted sum), so a placer takes either one
plugin or a whole profile's stage. ``for_gang`` runs every ``pre_score`` once per gang
attempt and returns a ``GangScore``: the per-node function over the plugins that did
not SKIP, and whether the placement may use the state's free-GPU index instead of
scoring every node (only when the one active plugin declares ``INDEX =
LEAST_FREE_GPUS``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, cast

from .interface import (
    CycleState,
    DomainChoicePlugin,
    PreScorePlugin,
    ScorePlugin,
)
from .model import Gang, NodeInfo
from .status import Code

NodeScore = Callable[[NodeInfo, Mapping[str, int], Mapping[str, int]], int]
"""(node, requests, free) -> score, higher first."""


def _zero(node: NodeInfo, requests: Mapping[str, int], free: Mapping[str, int]) -> int:
    return 0


@dataclass(frozen=True, slots=True)
class GangScore:
    """One gang attempt's scoring (see the module doc)."""

    score: NodeScore
    index: str | None
    """The state index whose order equals ``score``'s, if any (``LEAST_FREE_GPUS``)."""


class Scoring:
    """Weighted score plugins plus the domain choice: a ``ScorePlugin`` itself."""

    NAME: ClassVar[str] = "Scoring"

    def __init__(
        self,
        scorers: Sequence[tuple[ScorePlugin, int]],
        domain_choice: DomainChoicePlugin | None = None,
    ) -> None:
        for plugin, weight in scorers:
            if weight <= 0:
                raise ValueError(f"score plugin {plugin.NAME!r}: weight must be > 0, got {weight}")
        self.scorers = tuple(scorers)
        # Asked once: a runtime-checkable protocol's isinstance costs tens of
        # microseconds, and for_gang runs for every placement attempt.
        self._pre_scores = tuple(isinstance(p, PreScorePlugin) for p, _ in self.scorers)
        self.domain_choice = domain_choice
        """None: the placement's default (``plugins/topology.py``, the tightest first)."""

    @classmethod
    def of(cls, scorer: ScorePlugin) -> Scoring:
        """``scorer`` itself if it is a ``Scoring``, else a stage of that one plugin."""
        return scorer if isinstance(scorer, Scoring) else cls(((scorer, 1),))

    def for_gang(self, gang: Gang) -> GangScore:
        state = CycleState()
        active: list[tuple[ScorePlugin, int]] = []
        for (plugin, weight), pre in zip(self.scorers, self._pre_scores, strict=True):
            if pre and cast(PreScorePlugin, plugin).pre_score(state, gang).code is Code.SKIP:
                continue
            active.append((plugin, weight))
        if not active:
            return GangScore(_zero, None)
        if len(active) == 1 and active[0][1] == 1:
            plugin = active[0][0]
            # One plugin: call it directly (no per-node sum); the hot loops call this.
            return GangScore(functools.partial(plugin.score, state, gang),
                             getattr(plugin, "INDEX", None))
        parts = [(functools.partial(p.score, state, gang), w) for p, w in active]

        def weighted(node: NodeInfo, requests: Mapping[str, int],
                     free: Mapping[str, int]) -> int:
            return sum(w * f(node, requests, free) for f, w in parts)

        return GangScore(weighted, None)

    def score(self, state: CycleState, gang: Gang, node: NodeInfo,
              requests: Mapping[str, int], free: Mapping[str, int]) -> int:
        """The weighted sum for one node (``for_gang`` is the fast way for many)."""
        return self.for_gang(gang).score(node, requests, free)
