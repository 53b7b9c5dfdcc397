"""The sizing rule of local clusters (no cluster needed)."""

import itertools

import pytest

from trainmaster.cluster._sizing import cluster_sizing


def test_small_clusters_keep_kubelet_defaults() -> None:
    for nodes in (0, 1, 500, 1000):
        s = cluster_sizing(nodes)
        assert (s.lease_seconds, s.ready_timeout) == (40, 120)
        assert s.grace_seconds > s.lease_seconds


def test_5000_nodes_renew_at_most_100_leases_a_second() -> None:
    s = cluster_sizing(5000)
    assert s.lease_seconds == 200
    assert 5000 / (s.lease_seconds / 4) <= 100
    assert s.grace_seconds == 210
    assert s.ready_timeout == 400
    assert s.poll_seconds == 2.5


def test_timings_grow_with_nodes() -> None:
    sizes = [cluster_sizing(n) for n in (1000, 2000, 5000, 10000)]
    for small, big in itertools.pairwise(sizes):
        assert small.lease_seconds <= big.lease_seconds
        assert small.ready_timeout <= big.ready_timeout
        assert small.poll_seconds <= big.poll_seconds
    assert cluster_sizing(100_000).poll_seconds == 5.0


def test_negative_nodes_are_refused() -> None:
    with pytest.raises(ValueError, match="nodes must be 0 or more"):
        cluster_sizing(-1)
