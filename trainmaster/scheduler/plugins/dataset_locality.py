"""Score: prefer nodes whose cache already holds the gang's datasets.

A gang pod names its datasets in the ``trainmaster.io/datasets`` annotation (comma
separated; ``PodRequest.datasets``); the operator labels a node
``dataset.trainmaster.io/<dataset>=ready`` once a warm-up filled its cache (the other
states, warming, failed and evicted, count as cold). Each dataset
a node holds is worth ``HELD_BONUS``, more than any best-fit difference, so in the
default profile (``BestFit`` + ``DatasetLocality``, weight 1 each) warm nodes come
first and best fit orders the rest. A score orders nodes *inside* the domain the
placement already chose, so it never overrides the gang's topology constraint, and a
cold node is still used when warm ones are too few: a preference, not a filter.

``pre_score`` writes the gang's datasets into the cycle state; a gang without datasets
is skipped, so the profile's only active scorer is ``BestFit`` with its index walk.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, cast

from .._keys import CACHE_READY, DATASET_LABEL_PREFIX
from ..framework.interface import CycleState
from ..framework.model import Gang, NodeInfo
from ..framework.status import SUCCESS, Code, Status

HELD_BONUS = 1 << 40
"""Per dataset held: larger than any best-fit score (GPU counts or CPU millicores)."""
_STATE_KEY = "DatasetLocality/datasets"


def held(node: NodeInfo, datasets: tuple[str, ...]) -> int:
    return sum(1 for d in datasets if node.labels.get(DATASET_LABEL_PREFIX + d) == CACHE_READY)


class DatasetLocality:
    NAME: ClassVar[str] = "DatasetLocality"

    def pre_score(self, state: CycleState, gang: Gang) -> Status:
        datasets = tuple(sorted({d for p in gang.members for d in p.datasets}))
        if not datasets:
            return Status(Code.SKIP, (), self.NAME)
        state.write(_STATE_KEY, datasets)
        return SUCCESS

    def score(self, state: CycleState, gang: Gang, node: NodeInfo,
              requests: Mapping[str, int], free: Mapping[str, int]) -> int:
        return HELD_BONUS * held(node, cast(tuple[str, ...], state.read(_STATE_KEY)))
