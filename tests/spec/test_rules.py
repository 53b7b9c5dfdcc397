"""One failing example per validation rule: the path and the message are what a person reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers import stack_doc
from trainmaster.spec import SpecInvalidError, load_spec_text, validate_data

Mutation = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Mutation:
    def apply(doc: dict[str, Any]) -> None:
        target: Any = doc
        parts = path.split(".")
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        last = parts[-1]
        if value is _DELETE:
            del target[int(last) if last.isdigit() else last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return apply


_DELETE = object()

CASES: list[tuple[str, Mutation, str, str]] = [
    # (id, mutation of the dev stack, expected path, expected text in the message)
    ("missing-field", _set("jobs.0.image", _DELETE), "jobs[0].image", "is required: add `image`"),
    (
        "unknown-field",
        _set("jobs.0.gpuPerPod", 8),
        "jobs[0].gpuPerPod",
        "did you mean `gpusPerPod`",
    ),
    ("wrong-type", _set("jobs.0.nodes", "two"), "jobs[0].nodes",
     'must be a whole number (pods in the gang, one per node), not the text "two"'),
    ("below-minimum", _set("jobs.0.nodes", 0), "jobs[0].nodes", "less than the minimum 1"),
    ("bad-enum", _set("jobs.0.launcher", "mpirun"), "jobs[0].launcher", "is not one of"),
    ("bad-name", _set("jobs.0.name", "GPT_Small"), "jobs[0].name", "DNS label"),
    (
        "bad-quantity",
        _set("topology.node.memory", "lots"),
        "topology.node.memory",
        "is not a quantity: use a number with an optional suffix",
    ),
    ("wrong-api-version", _set("apiVersion", "v1"), "apiVersion", "must be"),
    (
        "gpus-per-pod-too-big",
        _set("jobs.1.gpusPerPod", 16),
        "jobs[1].gpusPerPod",
        "16 is more than the 8 GPUs per node",
    ),
    (
        "job-larger-than-cluster",
        _set("jobs.1.nodes", 9),
        "jobs[1].nodes",
        "9 is more than the 8 nodes with at least 4 GPUs",
    ),
    (
        "job-larger-than-required-domain",
        _set("jobs.0.nodes", 5),
        "jobs[0].nodes",
        "5 nodes do not fit in one leaf (the largest holds 4",
    ),
    (
        "unknown-domain",
        _set("jobs.0.topology", {"domain": "rack", "mode": "required"}),
        "jobs[0].topology.domain",
        "'rack' is not a topology domain",
    ),
    ("unknown-queue", _set("jobs.0.queue", "nope"), "jobs[0].queue", "'nope' is not a queue"),
    (
        "unknown-dataset",
        _set("jobs.0.datasets", ["c4"]),
        "jobs[0].datasets[0]",
        "'c4' is not a dataset",
    ),
    (
        "duplicate-job",
        _set("jobs.1.name", "gpt-small"),
        "jobs[1].name",
        "'gpt-small' is used more than once (first by jobs[0])",
    ),
    (
        "duplicate-queue",
        _set("scheduler.queues.1.name", "default"),
        "scheduler.queues",
        "'default' is used more than once",
    ),
    (
        "overlapping-rails",
        _set("networks.compute.rails.1.subnet", "10.100.0.0/16"),
        "networks.compute.rails[1].subnet",
        "overlaps 10.100.0.0/20",
    ),
    (
        "storage-overlaps-rail",
        _set("networks.storage.subnet", "10.100.32.0/24"),
        "networks.storage.subnet",
        "overlaps",
    ),
    (
        "host-bits-set",
        _set("networks.storage.subnet", "10.200.0.1/20"),
        "networks.storage.subnet",
        "is not a valid subnet",
    ),
    (
        "roce-without-lossless",
        _set("networks.compute.fabric", "roce"),
        "networks.compute.lossless",
        "a RoCE fabric needs lossless settings",
    ),
    (
        "too-few-nics",
        _set("topology.node.nics", 2),
        "topology.node.nics",
        "cannot join 4 compute rails",
    ),
    (
        "cache-larger-than-disk",
        _set("cache.capacity", "8Ti"),
        "cache.capacity",
        "is more than the 7Ti local disk",
    ),
    (
        "unknown-storage-attach",
        _set("networks.storage.attach", ["leaf-9"]),
        "networks.storage.attach[0]",
        "'leaf-9' is not a switch or node",
    ),
    (
        "leaf-with-switches",
        _set("topology.switches.0.switches.0.switches", [{"name": "x", "nodes": 1}]),
        "topology.switches[0].switches[0]",
        "is a leaf",
    ),
    (
        "duplicate-switch",
        _set("topology.switches.0.switches.1.name", "leaf-0"),
        "topology.switches",
        "'leaf-0' is used more than once",
    ),
    (
        "tree-and-generate",
        _set("topology.generate", {"switchesPerLevel": [1, 1], "nodesPerLeaf": 1}),
        "topology",
        "exactly one of",
    ),
    (
        "reserved-env",
        _set("jobs.0.env", {"TRAINMASTER_RESUME_FROM": "x"}),
        "jobs[0].env.TRAINMASTER_RESUME_FROM",
        "set by trainmaster",
    ),
    (
        "bad-policy-domain",
        _set("scheduler.topologyPolicy", [{"domain": "rack"}]),
        "scheduler.topologyPolicy[0].domain",
        "'rack' is not a topology domain",
    ),
    (
        "elastic-min-above-max",
        _set("jobs.0.elastic", {"minNodes": 3, "maxNodes": 2}),
        "jobs[0].elastic.minNodes",
        "minNodes 3 is more than maxNodes 2",
    ),
    (
        "elastic-nodes-outside",
        _set("jobs.0.elastic", {"minNodes": 3, "maxNodes": 4}),
        "jobs[0].nodes",
        "outside elastic [3, 4]: set nodes between minNodes and maxNodes",
    ),
    (
        "elastic-min-zero",
        _set("jobs.0.elastic", {"minNodes": 0, "maxNodes": 2}),
        "jobs[0].elastic.minNodes",
        "less than the minimum 1",
    ),
    ("cpu-too-big", _set("jobs.1.cpuPerPod", 500), "jobs[1].cpuPerPod", "more than the 96 cores"),
]


@pytest.mark.parametrize(
    ("mutate", "path", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_rule_reports_path_and_fix(mutate: Mutation, path: str, message: str) -> None:
    doc = stack_doc("dev")
    mutate(doc)
    with pytest.raises(SpecInvalidError) as info:
        validate_data(doc, "dev.yaml")
    found = [(i.path, i.message) for i in info.value.issues]
    assert any(p == path and message in m for p, m in found), found


def test_every_error_is_reported_at_once() -> None:
    doc = stack_doc("dev")
    doc["jobs"][0]["queue"] = "nope"
    doc["jobs"][1]["gpusPerPod"] = 16
    doc["networks"]["compute"]["fabric"] = "roce"
    with pytest.raises(SpecInvalidError) as info:
        validate_data(doc, "dev.yaml")
    assert {i.path for i in info.value.issues} >= {
        "jobs[0].queue",
        "jobs[1].gpusPerPod",
        "networks.compute.lossless",
    }


def test_errors_carry_yaml_line_numbers() -> None:
    text = (
        "apiVersion: trainmaster.io/v1alpha1\n"
        "kind: TrainingCluster\n"
        "metadata: {name: x}\n"
        "topology:\n"
        "  generate: {switchesPerLevel: [1, 1], nodesPerLeaf: 2}\n"
        "networks:\n"
        "  compute:\n"
        "    fabric: infiniband\n"
        "    rails: [{subnet: 10.0.0.0/16}]\n"
        "jobs:\n"
        "  - name: a\n"
        "    image: img:1\n"
        "    launcher: torchrun\n"
        "    nodes: -3\n"
    )
    with pytest.raises(SpecInvalidError) as info:
        load_spec_text(text, "x.yaml")
    (issue,) = info.value.issues
    assert (issue.path, issue.line) == ("jobs[0].nodes", 14)
    assert "x.yaml:14: jobs[0].nodes" in str(info.value)


def test_example_stacks_are_valid() -> None:
    for name in ("dev", "bench", "prod-example"):
        validate_data(stack_doc(name), f"{name}.yaml")


def test_defaults_are_filled_from_the_model() -> None:
    doc = stack_doc("dev")
    spec = validate_data(doc, "dev.yaml")
    assert spec.scheduler.name == "trainmaster-scheduler"
    assert spec.monitoring.alerts.no_progress_minutes == 30
    assert spec.jobs[0].restart_policy.hang_timeout_seconds == 1800
