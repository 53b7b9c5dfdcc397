"""The dataset cache page: each dataset's nodes per cache state (warming, ready, failed
with the reason, evicted), from the nodes' dataset.trainmaster.io labels and annotations
that the operator writes (the same model `trainmaster status` prints)."""

from __future__ import annotations

from trainmaster.status import DatasetCache, dataset_caches
from trainmaster.ui._world import World


def dataset_infos(world: World) -> list[DatasetCache]:
    return dataset_caches(world.nodes)
