"""A spec change that reaches an immutable Kubernetes field, on a real control plane, both
ways a platform team deploys: `trainmaster pulumi up` (the real engine) and `trainmaster
apply`. Flipping `scheduler.preemption` changes every queue PriorityClass's
`preemptionPolicy`, which the API server never updates in place ("field is immutable");
both paths replace those PriorityClasses (delete, then create) instead of failing part-way.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.engine.conftest import Project
from tests.engine.kit import output
from trainmaster.objects import all_objects
from trainmaster.spec import load_spec

pytestmark = pytest.mark.integration


def _write_spec(project: Project, preemption: bool, name: str = "dev") -> Path:
    path = project.engine.project / "stacks" / name / "cluster.yaml"
    doc = yaml.safe_load((project.engine.project / "stacks" / "dev" / "cluster.yaml").read_text())
    doc["scheduler"]["preemption"] = preemption
    if name != "dev":
        doc["metadata"] = {"name": name, "namespace": name}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _policies(project: Project, path: Path) -> dict[str, tuple[str, str]]:
    """Each queue PriorityClass on the cluster: (preemptionPolicy, uid)."""
    out = {}
    for obj in all_objects(load_spec(path)):
        if obj["kind"] == "PriorityClass":
            live = project.cluster.read(obj)
            assert live is not None, obj["metadata"]["name"]
            out[obj["metadata"]["name"]] = (live.preemptionPolicy, live.metadata.uid)
    return out


def _history(project: Project) -> dict[str, Any]:
    proc = project.engine.ok("stack", "history", "--stack", "dev", "--json")
    latest: dict[str, Any] = json.loads(proc.stdout)[0]
    return latest


def test_pulumi_up_replaces_priority_classes_when_preemption_flips(project: Project) -> None:
    spec = _write_spec(project, preemption=False)
    project.engine.ok("up", "--stack", "dev", "--yes")
    before = _policies(project, spec)
    assert {policy for policy, _ in before.values()} == {"Never"}

    _write_spec(project, preemption=True)
    preview = project.engine.ok("preview", "--stack", "dev")
    # The preview says so: each PriorityClass is replaced, for its preemptionPolicy.
    for name in before:
        assert re.search(rf"\+- kubernetes:scheduling.k8s.io/v1:PriorityClass "
                         rf"priorityclass-{name} replace \[diff: ~preemptionPolicy\]",
                         preview.stdout), output(preview)
    project.engine.ok("up", "--stack", "dev", "--yes")
    after = _policies(project, spec)
    assert {policy for policy, _ in after.values()} == {"PreemptLowerPriority"}
    assert all(after[name][1] != uid for name, (_, uid) in before.items()), "not replaced"
    # (The provider also replaces the two ConfigMaps whose data changed: its own rule.)
    changes = _history(project)["resourceChanges"]
    assert changes.get("replace", 0) >= len(before), changes
    project.engine.ok("destroy", "--stack", "dev", "--yes")


def _apply(project: Project, spec: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainmaster", "apply", str(spec),
         "--kubeconfig", str(project.kubeconfig)],
        env=project.engine.env, capture_output=True, text=True, timeout=600, check=False)


def test_apply_replaces_priority_classes_when_preemption_flips(project: Project) -> None:
    spec = _write_spec(project, preemption=False, name="flip")
    first = _apply(project, spec)
    assert first.returncode == 0, output(first)
    before = _policies(project, spec)
    assert {policy for policy, _ in before.values()} == {"Never"}

    _write_spec(project, preemption=True, name="flip")
    second = _apply(project, spec)
    assert second.returncode == 0, output(second)
    after = _policies(project, spec)
    assert {policy for policy, _ in after.values()} == {"PreemptLowerPriority"}
    for name, (_, uid) in before.items():
        assert after[name][1] != uid
        assert (f"replacing PriorityClass/{name} (delete, then create): preemptionPolicy "
                "cannot be changed in place") in second.stderr
    # Nothing else was replaced, and an unchanged spec replaces nothing.
    assert second.stderr.count("replacing ") == len(before)
    third = _apply(project, spec)
    assert third.returncode == 0 and "replacing" not in third.stderr, output(third)
