"""Golden files of `trainmaster render` for the example stacks: a change to what
trainmaster applies shows up as a reviewed diff under tests/objects/golden/.

Regenerate after an intended change: TRAINMASTER_UPDATE_GOLDEN=1 pytest tests/objects
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, STACKS

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize("stack", ["dev", "prod-example", "bench"])
def test_render_matches_golden(stack: str, tmp_path: Path) -> None:
    out = tmp_path / stack
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainmaster",
            "render",
            str(STACKS / stack / "cluster.yaml"),
            "--output-dir",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    golden = GOLDEN / stack
    if os.environ.get("TRAINMASTER_UPDATE_GOLDEN"):
        golden.mkdir(parents=True, exist_ok=True)
        for old in golden.glob("*.yaml"):
            old.unlink()
        for new in out.glob("*.yaml"):
            (golden / new.name).write_text(new.read_text())
    rendered = {p.name: p.read_text() for p in out.glob("*.yaml")}
    expected = {p.name: p.read_text() for p in golden.glob("*.yaml")}
    assert sorted(rendered) == sorted(expected)
    for name, text in expected.items():
        assert rendered[name] == text, f"{stack}/{name} differs from the golden file"


def test_render_to_stdout_is_every_object() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "trainmaster", "render", str(STACKS / "dev" / "cluster.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n---\n") + 1 == sum(
        (GOLDEN / "dev" / name).read_text().count("\n---\n") + 1
        for name in os.listdir(GOLDEN / "dev")
        if name != "kustomization.yaml"
    )


def test_invalid_spec_renders_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        (STACKS / "dev" / "cluster.yaml").read_text().replace("fabric: infiniband", "fabric: roce")
    )
    proc = subprocess.run(
        [sys.executable, "-m", "trainmaster", "render", str(bad), "--output-dir",
         str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "networks.compute.lossless" in proc.stderr
    assert not (tmp_path / "out").exists()
