"""Where a node's topology labels come from (judge_topology), without a cluster."""

from __future__ import annotations

from typing import Any

from tests.helpers import small_spec_doc
from trainmaster.operator._topology import TopologyBook, has_gpus, judge_topology
from trainmaster.spec import ClusterSpec, validate_data


def _spec(node_labels: dict[str, str] | None = None, named: bool = False) -> ClusterSpec:
    doc = small_spec_doc("topo")
    if named:
        doc["topology"].pop("generate", None)
        doc["topology"]["switches"] = [{"name": "sp-a", "switches": [
            {"name": "lf-a", "nodes": [{"name": "gpu-a1"}, {"name": "gpu-a2"}]},
            {"name": "lf-b", "nodes": 2},
        ]}]
        doc["jobs"] = []
    if node_labels:
        doc["topology"]["nodeLabels"] = node_labels
    return validate_data(doc, "test")


def _node(name: str, labels: dict[str, str] | None = None, gpus: int = 8) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus)}}}


def test_a_node_the_tree_names_gets_its_switches() -> None:
    spec = _spec(named=True)
    tree = TopologyBook().tree("v1", spec)
    assert tree == {"gpu-a1": ("sp-a", "lf-a"), "gpu-a2": ("sp-a", "lf-a")}
    verdict = judge_topology(_node("gpu-a2"), spec, tree)
    assert verdict.source == "tree" and verdict.unknown == ()
    assert verdict.patch == {"topology.trainmaster.io/spine": "sp-a",
                             "topology.trainmaster.io/leaf": "lf-a"}
    # Already labelled: nothing to patch.
    again = judge_topology(_node("gpu-a2", verdict.patch), spec, tree)
    assert again.patch == {} and again.unknown == ()


def test_generated_node_names_are_never_matched() -> None:
    """`nodes: 2` or `generate:` names nodes for the simulator (node-000, ...): a real node
    that happens to share such a name is not labelled from them."""
    spec = _spec(named=True)
    generated = [n.name for n in spec.nodes if n.switches[-1] == "lf-b"]
    assert len(generated) == 2
    tree = TopologyBook().tree("v1", spec)
    verdict = judge_topology(_node(generated[0]), spec, tree)
    assert verdict.source == "none" and verdict.patch == {}
    plain = _spec()
    assert TopologyBook().tree("v1", plain) == {}


def test_levels_map_onto_labels_the_cluster_has() -> None:
    spec = _spec({"spine": "example.com/pod", "leaf": "network.topology.kubernetes.io/block"})
    node = _node("gpu-real-1", {"example.com/pod": "p2",
                                "network.topology.kubernetes.io/block": "b7"})
    verdict = judge_topology(node, spec, TopologyBook().tree("v1", spec))
    assert verdict.source == "nodeLabels" and verdict.unknown == ()
    assert verdict.patch == {"topology.trainmaster.io/spine": "p2",
                             "topology.trainmaster.io/leaf": "b7"}


def test_a_missing_mapped_label_leaves_that_level_unknown() -> None:
    spec = _spec({"spine": "example.com/pod", "leaf": "example.com/block"})
    node = _node("gpu-real-2", {"example.com/pod": "p2"})
    verdict = judge_topology(node, spec, TopologyBook().tree("v1", spec))
    assert verdict.unknown == ("leaf",)
    assert verdict.patch == {"topology.trainmaster.io/spine": "p2"}


def test_an_unknown_unlabelled_node_is_unknown_at_every_level() -> None:
    spec = _spec()
    verdict = judge_topology(_node("stranger"), spec, TopologyBook().tree("v1", spec))
    assert (verdict.unknown, verdict.patch, verdict.source) == (("spine", "leaf"), {}, "none")


def test_labels_set_by_hand_are_kept() -> None:
    spec = _spec()
    labels = {"topology.trainmaster.io/spine": "s", "topology.trainmaster.io/leaf": "l"}
    verdict = judge_topology(_node("by-hand", labels), spec, TopologyBook().tree("v1", spec))
    assert (verdict.unknown, verdict.patch, verdict.source) == ((), {}, "labels")


def test_only_gpu_nodes_count() -> None:
    assert has_gpus(_node("g"))
    assert not has_gpus(_node("cpu", gpus=0))
    assert not has_gpus({"metadata": {"name": "x"}})


def test_node_labels_must_name_levels() -> None:
    import pytest

    from trainmaster.spec import SpecInvalidError

    doc = small_spec_doc("topo")
    doc["topology"]["nodeLabels"] = {"rack": "example.com/rack"}
    with pytest.raises(SpecInvalidError, match=r"topology\.nodeLabels\.rack"):
        validate_data(doc, "test")
