"""spread's node order over the whole cluster comes from the free-GPU buckets; it must
be the order the per-node sort gives ((most free GPUs, then index), cordoned nodes being
masked out for every pod), including nodes with no or fewer than no free GPUs."""

from __future__ import annotations

import dataclasses
import random

import pytest

from trainmaster.scheduler import GPU, ClusterState
from trainmaster.simulate._baselines import _most_free_order

from ..scheduler.builders import LEVELS, fabric_nodes


def _snapshot(seed: int) -> ClusterState:
    rnd = random.Random(seed)
    nodes = [
        dataclasses.replace(
            node,
            # 9 and 10 of 8: overcommitted (fewer than no free GPUs)
            requested={GPU: rnd.choice([0, 0, 1, 3, 4, 7, 8, 8, 8, 9, 10])},
            unschedulable=rnd.random() < 0.15,
        )
        for node in fabric_nodes(3, 3, 7)
    ]
    return ClusterState(nodes, LEVELS)


@pytest.mark.parametrize("seed", range(12))
def test_whole_cluster_order_equals_the_per_node_sort(seed: int) -> None:
    snap = _snapshot(seed)
    cols = snap.columns
    everything = tuple(range(len(cols.nodes)))
    expected = [i for i in sorted(everything, key=lambda i: (-cols.free[i].get(GPU, 0), i))
                if cols.schedulable[i]]
    assert any(cols.free[i].get(GPU, 0) < 0 for i in expected)  # the cases are there
    assert any(cols.free[i].get(GPU, 0) == 0 for i in expected)
    assert len(expected) < len(everything)
    assert list(_most_free_order(snap, everything)) == expected
    # A domain smaller than the cluster keeps the per-node sort.
    leaf = everything[:7]
    assert list(_most_free_order(snap, leaf)) == sorted(
        leaf, key=lambda i: (-cols.free[i].get(GPU, 0), i))
