"""Score plugin: prefer nodes whose cache already holds the gang's datasets.

A gang pod names its datasets in the ``trainmaster.io/datasets`` annotation (comma
separated; ``PodRequest.datasets``); the operator labels a node
``dataset.trainmaster.io/<dataset>=true`` once a warm-up filled its cache. Among the
nodes a placement weighs, each dataset a node holds is worth more than any best-fit
difference, and best fit orders the rest. A score orders nodes *inside* the domain the
placement already chose, so it never overrides the gang's topology constraint, and a
cold node is still used when warm ones are too few: it is a preference, not a filter.

The score contract passes no node, so ``bind`` (called once per gang by the placement)
returns a scorer that knows the gang's datasets and the snapshot's columns: it finds the
node by its allocatable mapping, which the placement passes from those very columns.
A gang without datasets gets plain ``BestFit``, with its fast path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from ._model import Gang, NodeInfo
from ._score import BestFit, best_fit_score

DATASETS_ANNOTATION = "trainmaster.io/datasets"
DATASET_LABEL_PREFIX = "dataset.trainmaster.io/"
HELD_BONUS = 1 << 40
"""Per dataset held: larger than any best-fit score (GPU counts or CPU millicores)."""


def pod_datasets(annotations: Mapping[str, str]) -> tuple[str, ...]:
    raw = annotations.get(DATASETS_ANNOTATION) or ""
    return tuple(sorted({d.strip() for d in raw.split(",") if d.strip()}))


def held(node: NodeInfo, datasets: tuple[str, ...]) -> int:
    return sum(1 for d in datasets if node.labels.get(DATASET_LABEL_PREFIX + d) == "true")


class _Bound:
    NAME: ClassVar[str] = "DatasetLocality"

    def __init__(self, datasets: tuple[str, ...], nodes: Sequence[NodeInfo],
                 allocatable: Sequence[Mapping[str, int]]) -> None:
        self._datasets = datasets
        self._by_alloc = {id(a): n for a, n in zip(allocatable, nodes, strict=True)}

    def score(self, requests: Mapping[str, int], free: Mapping[str, int],
              allocatable: Mapping[str, int]) -> int:
        node = self._by_alloc.get(id(allocatable))
        bonus = HELD_BONUS * held(node, self._datasets) if node is not None else 0
        return bonus + best_fit_score(requests, free)


class DatasetLocality:
    """The default score plugin: ``BestFit``, plus dataset locality for gangs that name
    datasets."""

    NAME: ClassVar[str] = "DatasetLocality"

    def __init__(self) -> None:
        self._best_fit = BestFit()

    def score(self, requests: Mapping[str, int], free: Mapping[str, int],
              allocatable: Mapping[str, int]) -> int:
        return best_fit_score(requests, free)  # unbound: no gang, no datasets

    def bind(self, gang: Gang, nodes: Sequence[NodeInfo],
             allocatable: Sequence[Mapping[str, int]]) -> BestFit | _Bound:
        datasets = tuple(sorted({d for p in gang.members for d in p.datasets}))
        if not datasets:
            return self._best_fit
        return _Bound(datasets, nodes, allocatable)
