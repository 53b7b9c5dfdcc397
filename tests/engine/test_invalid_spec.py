"""An invalid spec stops the engine with the validation errors before any resource is
registered: `preview` and `up` exit 1 with the errors, nothing reaches state or the cluster.
The broken stack is a temporary stack of the module's project copy, with its own config file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml

from tests.engine.conftest import Project
from tests.engine.kit import output
from tests.helpers import stack_doc, write_spec
from trainmaster.objects import all_objects
from trainmaster.spec import SpecError, load_spec

pytestmark = pytest.mark.integration

STACK = "broken"


@pytest.fixture(scope="module")
def broken(project: Project) -> Iterator[list[str]]:
    """The broken stack's config file and spec; yields the spec's validation error lines."""
    stacks = project.engine.project / "stacks"
    doc = stack_doc("dev")
    doc["topology"]["node"]["gpus"] = -3
    doc["jobs"][0]["nodes"] = 0
    spec = write_spec(stacks / f"{STACK}.yaml", doc)
    config = stacks / f"Pulumi.{STACK}.yaml"
    config.write_text(yaml.safe_dump({"config": {"trainmaster:spec": f"stacks/{spec.name}"}}))
    with pytest.raises(SpecError) as error:
        load_spec(spec)
    try:
        yield [line for line in str(error.value).splitlines() if line.strip()]
    finally:
        project.engine.run("stack", "rm", "--yes", "--force", "--stack", STACK)
        config.unlink(missing_ok=True)
        spec.unlink()


def _registered(stdout: str) -> list[str]:
    """Resource lines of the engine's progress output other than the stack itself."""
    return [
        line
        for line in stdout.splitlines()
        if ("kubernetes:" in line or "trainmaster:k8s:" in line) and "warning:" not in line
    ]


def test_preview_stops_with_the_validation_errors(project: Project, broken: list[str]) -> None:
    proc = project.engine.run("preview", "--stack", STACK)
    assert proc.returncode == 1, output(proc)
    # The first line names the cluster it talks to; the error comes next.
    target, error = proc.stderr.splitlines()[:2]
    assert target.startswith("trainmaster pulumi preview: context "), output(proc)
    assert error.startswith("error: "), output(proc)
    for line in broken:
        assert line in proc.stderr, f"{line!r} missing:\n{output(proc)}"
    assert "Traceback" not in proc.stdout + proc.stderr
    assert _registered(proc.stdout) == [], output(proc)


def test_up_registers_nothing(project: Project, broken: list[str]) -> None:
    proc = project.engine.run("up", "--stack", STACK, "--yes")
    assert proc.returncode == 1, output(proc)
    assert broken[-1] in proc.stderr, output(proc)
    assert _registered(proc.stdout) == [], output(proc)
    exported = json.loads(project.engine.ok("stack", "export", "--stack", STACK).stdout)
    types = {r["type"] for r in exported["deployment"].get("resources") or []}
    assert types <= {"pulumi:pulumi:Stack"}, types
    # Nor on the cluster: not one of the objects the valid dev spec would create.
    for obj in all_objects(project.spec):
        assert project.cluster.read(obj) is None, obj["metadata"]
