"""Preemption is on unless the spec opts out (README: lenders take their quota back)."""

from __future__ import annotations

from typing import Any

from tests.helpers import small_spec_doc
from trainmaster.objects import build_all
from trainmaster.scheduler import SchedulerConfig
from trainmaster.spec import ClusterSpec, validate_data


def _spec(scheduler: dict[str, Any]) -> ClusterSpec:
    doc = small_spec_doc("pre")
    doc["scheduler"] = {"queues": [{"name": "default"}, {"name": "lab", "preemption": False}],
                        **scheduler}
    return validate_data(doc, "test")


def _policies(spec: ClusterSpec) -> dict[str, str]:
    return {o["metadata"]["name"]: o["preemptionPolicy"] for o in build_all(spec)["scheduler"]
            if o["kind"] == "PriorityClass"}


def _config(spec: ClusterSpec) -> SchedulerConfig:
    import yaml

    cm = next(o for o in build_all(spec)["scheduler"] if o["kind"] == "ConfigMap")
    return SchedulerConfig.from_mapping(yaml.safe_load(next(iter(cm["data"].values()))))


def test_preemption_is_on_by_default() -> None:
    spec = _spec({})
    assert spec.scheduler.preemption is True
    assert _config(spec).preemption is True
    # A queue's own opt-out still holds.
    assert _policies(spec) == {"pre-default": "PreemptLowerPriority", "pre-lab": "Never"}


def test_false_opts_out() -> None:
    spec = _spec({"preemption": False})
    assert _config(spec).preemption is False
    assert set(_policies(spec).values()) == {"Never"}
