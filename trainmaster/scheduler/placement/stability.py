"""No ping-pong: a gang that got its place by preempting is not evicted again, for a
while, to make room for a gang of its own priority (or lower).

Without it two gangs of one priority, each required in one domain, could take turns
freeing a domain from the other whenever each looks cheaper to evict than the rest (the
reclaim and fair-sharing rules let a gang evict others of its priority). The guard keeps
every preemptor's key for ``window`` seconds from its preemption; while it holds, the
preemptor is no candidate for any gang of its priority or lower. Higher priorities are
not held back. The runtime's and the simulator's preemptors both filter their
candidates through the ``GangScheduler``'s guard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..plugins.preemption import Victim

PING_PONG_WINDOW_SECONDS = 600.0
"""How long a preemptor is shielded from gangs of its own priority (10 minutes: a few
checkpoint intervals of a typical job, so it keeps what it preempted for)."""


@dataclass(slots=True)
class PreemptionGuard:
    window: float = PING_PONG_WINDOW_SECONDS
    _shielded: dict[str, tuple[int, float]] = field(default_factory=dict)
    """gang -> (its priority, until when)."""

    def preempted(self, gang: str, priority: int, now: float) -> None:
        """``gang`` just preempted: shield it for ``window`` seconds."""
        if self.window > 0:
            self._shielded[gang] = (priority, now + self.window)

    def shielded(self, gang: str, preemptor_priority: int, now: float) -> bool:
        held = self._shielded.get(gang)
        if held is None:
            return False
        priority, until = held
        if now >= until:
            del self._shielded[gang]
            return False
        return preemptor_priority <= priority

    def allowed(self, candidates: Sequence[Victim], preemptor_priority: int,
                now: float) -> list[Victim]:
        """``candidates`` without the shielded gangs."""
        return [v for v in candidates if not self.shielded(v.gang, preemptor_priority, now)]

    def forget(self, gang: str) -> None:
        self._shielded.pop(gang, None)
