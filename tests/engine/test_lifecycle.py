"""`trainmaster pulumi` on the dev stack against a real local control plane, as a user types
it: up creates every object, a second up changes nothing, up --refresh brings back objects
deleted by hand, destroy leaves nothing. The tests run in order on one module cluster.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.engine.conftest import Project
from tests.engine.kit import applied, key, output, wait_for
from trainmaster.api import FIELD_MANAGER
from trainmaster.objects import all_objects

pytestmark = pytest.mark.integration


def _objects(project: Project) -> list[dict[str, Any]]:
    return applied(all_objects(project.spec))


def _pick(project: Project, kind: str, name: str) -> dict[str, Any]:
    return next(o for o in _objects(project) if o["kind"] == kind and o["metadata"]["name"] == name)


def _last_update(project: Project) -> dict[str, Any]:
    """The newest entry of `pulumi stack history`: the engine's own record of the update."""
    proc = project.engine.ok("stack", "history", "--stack", "dev", "--json")
    history: list[dict[str, Any]] = json.loads(proc.stdout)
    return history[0]


def test_up_creates_every_object(project: Project) -> None:
    proc = project.engine.ok("up", "--stack", "dev", "--yes")
    found: dict[tuple[str, str, str | None, str], Any] = {}
    for obj in _objects(project):
        live = project.cluster.read(obj)
        if live is not None:
            meta = live.metadata
            found[key(obj)] = (live.apiVersion, live.kind, meta.namespace, meta.name)
    missing = [key(obj) for obj in _objects(project) if key(obj) not in found]
    assert not missing, f"not on the cluster after up: {missing}\n{output(proc)}"
    assert all(read_back == k for k, read_back in found.items())
    update = _last_update(project)
    assert update["result"] == "succeeded"
    # Every object, plus the stack, the TrainingCluster and its part components.
    assert update["resourceChanges"]["create"] >= len(_objects(project))


def test_objects_carry_pulumis_field_manager(project: Project) -> None:
    """What `pulumi up` applied, Pulumi's Kubernetes provider owns (server-side apply):
    every object's managedFields name its field manager, never trainmaster's own."""
    managers: dict[str, set[str]] = {}
    for obj in _objects(project):
        live = project.cluster.read(obj)
        assert live is not None, key(obj)
        entries = live.metadata.managedFields or []
        managers[f"{obj['kind']}/{obj['metadata']['name']}"] = {
            f"{e.manager}:{e.operation}" for e in entries}
    without = {k: v for k, v in managers.items()
               if not any(m.startswith("pulumi-kubernetes") for m in v)}
    assert without == {}
    assert not any(m.startswith(f"{FIELD_MANAGER}:") for v in managers.values() for m in v)


def test_second_up_reports_no_changes(project: Project) -> None:
    proc = project.engine.run("up", "--stack", "dev", "--yes", "--expect-no-changes")
    changes = _last_update(project)["resourceChanges"]
    assert set(changes) == {"same"}, f"{changes}\n{output(proc)}"
    assert proc.returncode == 0, output(proc)
    assert re.search(r"Resources:\s+\d+ unchanged\s", proc.stdout), proc.stdout


def test_up_refresh_brings_back_objects_deleted_by_hand(project: Project) -> None:
    deleted = [
        _pick(project, "ConfigMap", "dev-dashboard"),
        _pick(project, "PriorityClass", "dev-research"),
    ]
    for obj in deleted:
        project.cluster.delete(obj)
    wait_for(lambda: all(project.cluster.read(obj) is None for obj in deleted), "deleted by hand")
    project.engine.ok("up", "--stack", "dev", "--yes", "--refresh")
    for obj in deleted:
        assert project.cluster.read(obj) is not None, key(obj)
    assert _last_update(project)["resourceChanges"].get("create") == len(deleted)


def test_destroy_leaves_nothing(project: Project) -> None:
    project.engine.ok("destroy", "--stack", "dev", "--yes")
    objects = _objects(project)
    # Deleting the namespace finishes asynchronously (the namespace controller empties it).
    wait_for(
        lambda: all(project.cluster.read(obj) is None for obj in objects),
        "every object gone after destroy",
        timeout=300,
    )
    proc = project.engine.ok("stack", "export", "--stack", "dev")
    resources = json.loads(proc.stdout)["deployment"].get("resources") or []
    assert resources == []
