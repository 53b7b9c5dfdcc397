"""The pack in the real Pulumi engine: `trainmaster pulumi preview --policy-pack policies`
against the local control plane passes a clean spec and fails a violating one with the
rule's id.

Runs through `trainmaster pulumi` (trainmaster.engine): the built Pulumi CLI and Kubernetes
provider, the program inline, and the pack started as an executable analyzer plugin, since
pulumi-language-python cannot be built here (see docs/pulumi.md). Skipped, with the reason,
while the CLI or the provider is not built (`trainmaster tools build pulumi pulumi-kubernetes`).
Everything Pulumi writes goes to a temporary folder: its home, a file state backend and a
copy of the project files with a stack config pointing at the spec under test.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import LocalCluster
from tests.engine.kit import Engine, copy_project, output
from tests.helpers import ROOT, stack_doc, write_spec
from trainmaster.engine import DEFAULT_PASSPHRASE

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    from trainmaster.toolchain import ToolchainError, tool_path

    try:
        for binary in ("pulumi", "pulumi-resource-kubernetes"):
            tool_path(binary)
    except ToolchainError as exc:
        pytest.skip(f"Pulumi engine not built: {exc}")
    tmp = tmp_path_factory.mktemp("pulumi")
    (tmp / "state").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "PULUMI_HOME")}
    env.update(
        TRAINMASTER_HOME=str(tmp / "home"),
        PULUMI_BACKEND_URL=(tmp / "state").as_uri(),
        # The passphrase of the salts committed in stacks/Pulumi.*.yaml.
        PULUMI_CONFIG_PASSPHRASE=DEFAULT_PASSPHRASE,
    )
    return Engine(copy_project(tmp / "project"), env)


def _preview(
    engine: Engine, cluster: LocalCluster, stack: str, spec: Path
) -> subprocess.CompletedProcess[str]:
    config = engine.project / "stacks" / f"Pulumi.{stack}.yaml"
    config.write_text(yaml.safe_dump({"config": {"trainmaster:spec": str(spec)}}))
    run = Engine(engine.project, {**engine.env, "KUBECONFIG": str(cluster.kubeconfig)}).run
    try:
        return run("preview", "--stack", stack, "--policy-pack", str(ROOT / "policies"))
    finally:
        run("stack", "rm", "--yes", "--force", "--stack", stack)


def _cluster(request: pytest.FixtureRequest) -> LocalCluster:
    # Asked for only once `engine` has not skipped: starting the control plane takes a while.
    cluster: LocalCluster = request.getfixturevalue("local_cluster")
    return cluster


def test_clean_spec_passes_the_pack(
    engine: Engine, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "clean.yaml", stack_doc("dev"))
    proc = _preview(engine, _cluster(request), "clean", spec)
    assert proc.returncode == 0, output(proc)
    assert "✅ trainmaster@v0.1.0" in proc.stdout, output(proc)
    assert "mandatory" not in proc.stdout


def test_violating_spec_fails_the_preview(
    engine: Engine, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    doc = stack_doc("dev")
    doc["jobs"][0]["image"] = "nvcr.io/nvidia/pytorch:latest"
    doc["jobs"][1].pop("checkpoint")
    spec = write_spec(tmp_path / "violating.yaml", doc)
    proc = _preview(engine, _cluster(request), "violating", spec)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    # Pulumi 3.274 reports violations under "Policies:", per pack, marked ❌.
    assert "❌ trainmaster@v0.1.0" in out, out
    assert "[mandatory]" in out
    assert "image-pinned" in out and "jobs[0].image" in out
    assert "job-checkpoint" in out and "jobs[1].checkpoint" in out
