"""API JSON to the core's types: quantities, effective requests, taints, affinity, groups."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.scheduler.apifake import group_obj, node_obj, pod_obj
from trainmaster.api import CHECKPOINT_ANNOTATION, epoch_seconds, parse_quantity
from trainmaster.scheduler import (
    CPU,
    GPU,
    MEMORY,
    SelectorOperator,
    TaintEffect,
    TopologyConstraint,
    TopologyMode,
)
from trainmaster.scheduler.runtime.convert import (
    base_units,
    node_info,
    pod_group_info,
    pod_info,
    pod_requests,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [("8", Decimal(8)), ("500m", Decimal("0.5")), ("2Gi", Decimal(2**31)), ("1e3", Decimal(1000)),
     ("1.5k", Decimal(1500)), ("128974848", Decimal(128974848)), ("100n", Decimal("1e-7"))],
)
def test_quantities(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


def test_base_units_round_up_and_cpu_is_millicores() -> None:
    assert base_units(CPU, "16") == 16_000
    assert base_units(CPU, "250m") == 250
    assert base_units(CPU, "1.0001") == 1001  # never under-counted
    assert base_units(MEMORY, "64Gi") == 64 * 2**30
    with pytest.raises(ValueError):
        parse_quantity("lots")


def test_effective_requests_follow_kubernetes() -> None:
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "1", GPU: "2"}}},
            {"resources": {"requests": {"cpu": "2"}}},
        ],
        "initContainers": [
            {"resources": {"requests": {"cpu": "5"}}},  # larger than the sum: wins
            {"restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    assert pod_requests(spec) == {"cpu": 5_100, GPU: 2, "memory": 2**30}


def test_node_topology_path_taints_and_cordon() -> None:
    obj = node_obj("n1", spine="spine-2", leaf="leaf-7", unschedulable=True,
                   taints=[{"key": "gpu", "value": "bad", "effect": "NoExecute"}])
    info = node_info(obj, ("spine", "leaf"))
    assert info.topology == ("spine-2", "leaf-7")
    assert info.allocatable[GPU] == 8 and info.allocatable[CPU] == 128_000
    assert info.unschedulable
    assert info.taints[0].effect is TaintEffect.NO_EXECUTE
    # A missing upper level cuts the path: the node is in no domain below it either.
    assert node_info(node_obj("n2", spine=None, leaf="leaf-1"), ("spine", "leaf")).topology == ()


def test_pod_info_reads_what_scheduling_needs() -> None:
    obj = pod_obj("p0", group="g", gpus=4, extra_spec={
        "nodeSelector": {"zone": "a"},
        "priority": 7,
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.trainmaster.io/leaf", "operator": "In", "values": ["leaf-1"]}
            ]}]}}},
    })
    info = pod_info(obj)
    req = info.request
    assert req.gang == "g" and req.gang_key == "ns/g"
    assert req.requests[GPU] == 4 and req.priority == 7
    assert req.node_selector == {"zone": "a"}
    assert req.affinity[0].operator is SelectorOperator.IN
    assert req.tolerations[0].key == "nvidia.com/gpu"
    assert req.creation_timestamp == epoch_seconds("2026-01-01T00:00:00Z")
    assert info.controlled and info.unsupported is None and not info.terminating


@pytest.mark.parametrize(
    ("terms", "why"),
    [([{"matchExpressions": []}, {"matchExpressions": []}], "several nodeSelectorTerms"),
     ([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["x"]}]}],
      "matchFields"),
     ([{"matchExpressions": [{"key": "n", "operator": "Gt", "values": ["1"]}]}], "Gt")],
)
def test_affinity_the_core_cannot_express_is_reported(terms: list[dict[str, object]],
                                                      why: str) -> None:
    obj = pod_obj("p", extra_spec={"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
    unsupported = pod_info(obj).unsupported
    assert unsupported is not None and why in unsupported


def test_pod_group_annotations() -> None:
    info = pod_group_info(group_obj("g", 4, domain="leaf", mode="required"))
    assert info.key == "ns/g" and info.min_member == 4
    assert info.topology == TopologyConstraint("leaf", TopologyMode.REQUIRED)
    assert pod_group_info(group_obj("h", 2)).topology is None


@pytest.mark.parametrize(("stamp", "seconds"), [
    ("2026-01-01T00:00:10Z", epoch_seconds("2026-01-01T00:00:10Z")),
    ("yesterday", 0.0),  # written by the job, not the API server: never fatal
    ("", 0.0),
])
def test_pod_group_checkpoint_time(stamp: str, seconds: float) -> None:
    obj = group_obj("g", 2)
    obj["metadata"]["annotations"][CHECKPOINT_ANNOTATION] = stamp
    assert seconds == pod_group_info(obj).last_checkpoint
    assert epoch_seconds("2026-01-01T00:00:10Z") > 0
