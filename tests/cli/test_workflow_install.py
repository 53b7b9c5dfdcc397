"""Every GitHub workflow installs trainmaster from uv.lock exactly as `make` does.

A floating `pip install -e .` in CI (and a `pulumi up` run on what it picked) is the drift
the lock file was made to end: no workflow step may install Python packages any other way.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yaml"))
SETUP = ROOT / ".github" / "actions" / "setup" / "action.yaml"
# A step that installs Python packages by any means but the Makefile's locked install.
FLOATING = re.compile(r"\bpip3?\s+install\b|\bpython3?\s+-m\s+pip\s+install\b|\buv\s+pip\b"
                      r"|\buv\s+sync\b(?![^\n]*--frozen)|\bpoetry\s+install\b")
LOCKED = "make .venv/.installed"


def _steps(path: Path) -> list[dict[str, Any]]:
    doc = yaml.safe_load(path.read_text())
    if "runs" in doc:  # a composite action
        return list(doc["runs"]["steps"])
    return [step for job in doc["jobs"].values() for step in job.get("steps", [])]


def _run(step: dict[str, Any]) -> str:
    return str(step.get("run", ""))


def test_the_setup_action_installs_with_the_makefiles_locked_rule() -> None:
    runs = [_run(s) for s in _steps(SETUP)]
    assert [r for r in runs if FLOATING.search(r)] == []
    assert any(LOCKED in r for r in runs), f"{SETUP}: no step runs `{LOCKED}`"
    # ... and that rule is the frozen uv sync from uv.lock.
    makefile = (ROOT / "Makefile").read_text()
    rule = makefile.split("$(STAMP): pyproject.toml uv.lock", 1)[1].split("\n\n", 1)[0]
    assert "sync --quiet --frozen" in rule
    assert re.search(r"uv==\$\(UV_VERSION\)", rule)


def test_every_workflow_installs_through_the_setup_action_only() -> None:
    assert WORKFLOWS, "no workflows found"
    for path in WORKFLOWS:
        for step in _steps(path):
            assert not FLOATING.search(_run(step)), f"{path.name}: {step.get('name')}"
        # Every job that runs trainmaster got it from the setup action (or builds a container).
        doc = yaml.safe_load(path.read_text())
        for name, job in doc["jobs"].items():
            steps = job.get("steps", [])
            uses_trainmaster = any("trainmaster" in _run(s) for s in steps)
            if uses_trainmaster and not any("docker build" in _run(s) for s in steps):
                assert any(s.get("uses") == "./.github/actions/setup" for s in steps), (
                    f"{path.name} job {name} runs trainmaster without the locked install")


def test_the_deploy_workflow_runs_pulumi_up_on_the_locked_install() -> None:
    deploy = yaml.safe_load((ROOT / ".github" / "workflows" / "deploy.yaml").read_text())
    steps = deploy["jobs"]["up"]["steps"]
    setup = next(i for i, s in enumerate(steps) if s.get("uses") == "./.github/actions/setup")
    up = next(i for i, s in enumerate(steps) if "pulumi up" in _run(s))
    assert setup < up
    # The policy pack runs with the project's virtualenv, the one uv.lock installed.
    pack = yaml.safe_load((ROOT / "policies" / "PulumiPolicy.yaml").read_text())
    assert pack["runtime"]["options"]["virtualenv"] == "../.venv"
