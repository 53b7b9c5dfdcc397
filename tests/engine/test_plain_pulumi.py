"""Plain `pulumi` in the project folder, in the shell of `eval "$(trainmaster tools env)"`, on
a real local control plane: the built CLI starts __main__.py through the built Python language
host. It creates the same stack resources and Kubernetes objects as `trainmaster pulumi up`,
both share the stack (same backend and passphrase), and the checkout stays clean.

The project copy is a git checkout, as a user's clone is. The tests run in order.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.engine.conftest import Project
from tests.engine.kit import RUN_TIMEOUT, applied, key, output, wait_for
from tests.helpers import ROOT
from trainmaster.objects import build_all

pytestmark = pytest.mark.integration

# What the README tells a user to type, as one shell script; "$@" is the pulumi command line.
_SHELL = 'eval "$("$TRAINMASTER" tools env)" || exit 97\nexec pulumi "$@"\n'

ObjectKey = tuple[str, str, str | None, str]


def _trainmaster() -> str:
    """The `trainmaster` command of this virtualenv (what is on a user's PATH after set-up)."""
    return str(Path(sys.executable).parent / "trainmaster")


def plain(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", _SHELL, "pulumi", *args],
        cwd=project.engine.project,
        env={**project.engine.env, "TRAINMASTER": _trainmaster()},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def plain_ok(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    proc = plain(project, *args)
    assert proc.returncode == 0, f"pulumi {' '.join(args)}:\n{output(proc)}"
    return proc


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=test", "-c", "user.email=test@localhost", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.fixture(scope="module")
def checkout(project: Project) -> Path:
    """The project copy committed to a fresh git repository, with the repository's ignores."""
    repo = project.engine.project
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "clone")
    return repo


def _expected(project: Project) -> set[ObjectKey]:
    return {key(obj) for obj in applied([o for objs in build_all(project.spec).values()
                                         for o in objs])}


def _on_cluster(project: Project) -> set[ObjectKey]:
    """Which of the spec's objects exist on the cluster."""
    found: set[ObjectKey] = set()
    for api_version, kind, namespace, name in _expected(project):
        meta = {"name": name, **({"namespace": namespace} if namespace else {})}
        if project.cluster.read({"apiVersion": api_version, "kind": kind, "metadata": meta}):
            found.add((api_version, kind, namespace, name))
    return found


def _resources(project: Project) -> list[dict[str, Any]]:
    proc = project.engine.ok("stack", "export", "--stack", "dev")
    resources: list[dict[str, Any]] = json.loads(proc.stdout)["deployment"].get("resources") or []
    return resources


def _urns(resources: list[dict[str, Any]]) -> set[str]:
    return {r["urn"] for r in resources}


def _objects(resources: list[dict[str, Any]]) -> set[ObjectKey]:
    """The Kubernetes objects the stack manages (not providers or components)."""
    found: set[ObjectKey] = set()
    for r in resources:
        if r.get("custom") and r["type"].startswith("kubernetes:"):
            found.add(key(r["outputs"]))
    return found


def _last_changes(project: Project) -> dict[str, int]:
    proc = project.engine.ok("stack", "history", "--stack", "dev", "--json")
    changes: dict[str, int] = json.loads(proc.stdout)[0]["resourceChanges"]
    return changes


_state: dict[str, Any] = {}


def test_plain_up_creates_every_object(project: Project, checkout: Path) -> None:
    # A fresh clone: the stack is created once (interactively `pulumi up` offers this itself).
    plain_ok(project, "stack", "select", "--create", "dev")
    proc = plain_ok(project, "up", "--stack", "dev", "--yes")
    expected = _expected(project)
    assert "skipped 4 object(s) of CRD servicemonitors.monitoring.coreos.com" in proc.stdout, \
        output(proc)
    missing = sorted(expected - _on_cluster(project), key=str)
    assert not missing, f"not on the cluster after plain up: {missing}\n{output(proc)}"
    resources = _resources(project)
    assert _objects(resources) == expected
    assert _last_changes(project)["create"] >= len(expected)
    _state["plain_urns"] = _urns(resources)


def test_trainmaster_pulumi_shares_the_stack_and_sees_no_changes(project: Project) -> None:
    proc = project.engine.run("up", "--stack", "dev", "--yes", "--expect-no-changes")
    assert proc.returncode == 0, output(proc)
    assert set(_last_changes(project)) == {"same"}


def test_same_resources_as_trainmaster_pulumi_up(project: Project) -> None:
    project.engine.ok("destroy", "--stack", "dev", "--yes")
    assert _resources(project) == []
    # Deleting the namespace finishes asynchronously; a new up must not meet it terminating.
    wait_for(lambda: not _on_cluster(project), "every object gone after destroy", timeout=300)
    project.engine.ok("up", "--stack", "dev", "--yes")
    resources = _resources(project)
    assert _urns(resources) == _state["plain_urns"]
    assert _objects(resources) == _expected(project) == _on_cluster(project)
    # And plain pulumi takes trainmaster's resources for its own program's.
    plain_ok(project, "preview", "--stack", "dev", "--expect-no-changes")


def test_plain_destroy_leaves_nothing(project: Project) -> None:
    plain_ok(project, "destroy", "--stack", "dev", "--yes")
    assert _resources(project) == []
    wait_for(lambda: not _on_cluster(project), "every object gone after plain destroy", 300)


def test_the_checkout_stays_clean(project: Project, checkout: Path) -> None:
    assert _git(checkout, "status", "--porcelain") == ""
    for stack_file in (ROOT / "stacks").glob("Pulumi.*.yaml"):
        assert (checkout / "stacks" / stack_file.name).read_text() == stack_file.read_text()
