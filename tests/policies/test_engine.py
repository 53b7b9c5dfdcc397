"""The pack in the real Pulumi engine: `pulumi preview --policy-pack policies` against the
local control plane passes a clean spec and fails a violating one with the rule's id.

Needs the Pulumi CLI, its Python language host and the Kubernetes provider built from Go
modules (`trainmaster tools build pulumi pulumi-kubernetes`); skipped, with the reason,
while any of them is missing. Everything Pulumi writes goes to a temporary folder: its home,
a file state backend and a copy of the project files pointing at the spec under test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import LocalCluster
from tests.helpers import ROOT, stack_doc, write_spec

pytestmark = pytest.mark.integration

BINARIES = ("pulumi", "pulumi-language-python", "pulumi-resource-kubernetes")


def _search_path() -> str:
    from trainmaster.toolchain import family_dir

    dirs = [str(family_dir(f)) for f in ("pulumi", "pulumi-kubernetes")]
    return os.pathsep.join([*dirs, str(ROOT / ".venv" / "bin"), os.environ.get("PATH", "")])


def _missing(path: str) -> list[str]:
    return [b for b in BINARIES if shutil.which(b, path=path) is None]


@dataclass(frozen=True)
class Engine:
    env: dict[str, str]
    project: Path

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["pulumi", *args, "--non-interactive"],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    path = _search_path()
    missing = _missing(path)
    if missing:
        pytest.skip(f"Pulumi engine not built: {', '.join(missing)} not found")
    tmp = tmp_path_factory.mktemp("pulumi")
    project = tmp / "project"
    project.mkdir()
    # The repository's program, with the virtualenv made absolute and the stack files here
    # (the repository's own stacks/ folder is left alone).
    manifest = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    manifest["runtime"]["options"]["virtualenv"] = str(ROOT / ".venv")
    manifest.pop("stackConfigDir", None)
    (project / "Pulumi.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    shutil.copy(ROOT / "__main__.py", project / "__main__.py")
    env = {
        **os.environ,
        "PATH": path,
        "PULUMI_HOME": str(tmp / "home"),
        "PULUMI_BACKEND_URL": f"file://{tmp / 'state'}",
        "PULUMI_CONFIG_PASSPHRASE": "trainmaster-test",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
    }
    (tmp / "state").mkdir()
    return Engine(env, project)


def _preview(
    engine: Engine, cluster: LocalCluster, stack: str, spec: Path
) -> subprocess.CompletedProcess[str]:
    env = {**engine.env, "KUBECONFIG": str(cluster.kubeconfig)}
    run = Engine(env, engine.project).run
    for args in (("stack", "init", stack), ("config", "set", "trainmaster:spec", str(spec))):
        proc = run(*args, "--stack", stack) if args[0] == "config" else run(*args)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return run("preview", "--stack", stack, "--policy-pack", str(ROOT / "policies"))


def _cluster(request: pytest.FixtureRequest) -> LocalCluster:
    # Asked for only once `engine` has not skipped: starting the control plane takes a while.
    cluster: LocalCluster = request.getfixturevalue("local_cluster")
    return cluster


def test_clean_spec_passes_the_pack(
    engine: Engine, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    spec = write_spec(tmp_path / "clean.yaml", stack_doc("dev"))
    proc = _preview(engine, _cluster(request), "clean", spec)
    assert proc.returncode == 0, proc.stdout + proc.stderr
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
    assert "Policy Violations" in out
    assert "image-pinned" in out and "jobs[0].image" in out
    assert "job-checkpoint" in out and "jobs[1].checkpoint" in out
