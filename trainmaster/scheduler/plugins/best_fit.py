"""Score: best-fit bin packing on the scarce resource (the tightest node first).

The tightest node that still fits wins, so partly used nodes fill up first and empty
nodes stay empty for large jobs. Its order is the cluster state's free-GPU index order,
which it declares (``INDEX``): the placement then walks that index instead of scoring
every node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..framework.interface import LEAST_FREE_GPUS, CycleState
from ..framework.model import Gang, NodeInfo
from ..framework.resources import primary_resource


def best_fit_score(requests: Mapping[str, int], free: Mapping[str, int]) -> int:
    """Higher is better: minus what is left of the primary resource after placing."""
    resource = primary_resource(requests)
    return requests.get(resource, 0) - free.get(resource, 0)


class BestFit:
    """Ties go to the node name (lowest first)."""

    NAME: ClassVar[str] = "BestFit"
    INDEX: ClassVar[str] = LEAST_FREE_GPUS

    def score(self, state: CycleState, gang: Gang, node: NodeInfo,
              requests: Mapping[str, int], free: Mapping[str, int]) -> int:
        return best_fit_score(requests, free)
