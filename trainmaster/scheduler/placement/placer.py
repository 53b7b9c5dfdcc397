"""The signature of a whole-gang placement, shared by ``place_gang`` and the part placer.

Its own module so that ``place`` (which calls the part placer) and ``parts`` (which calls
back into the ordinary placement) both name it without importing each other.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

from ..framework.interface import FilterPlugin, ScorePlugin
from ..framework.model import Gang
from ..framework.results import Placement, Unschedulable
from ..state import ClusterState


class Placer(Protocol):
    """``place_gang``'s signature: the simulator plugs baseline policies in here (into
    the queue's cycles and the preemption's victim search), and the part placer calls the
    ordinary placement through it."""

    def __call__(
        self,
        snapshot: ClusterState,
        gang: Gang,
        *,
        filters: Sequence[FilterPlugin],
        scorer: ScorePlugin,
        blocked: Collection[str],
    ) -> Placement | Unschedulable: ...
