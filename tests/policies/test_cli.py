"""`trainmaster policy check|list`: exit codes, advisories that do not fail, --json."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from policies import RULES
from tests.helpers import STACKS, stack_doc, write_spec
from trainmaster.cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trainmaster", *args], capture_output=True, text=True, timeout=120
    )


def test_example_stacks_pass(capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(STACKS / s / "cluster.yaml") for s in ("dev", "prod-example")]
    assert main(["policy", "check", *files]) == 0
    out = capsys.readouterr().out
    assert f"{files[0]}: passes all policies" in out


def test_mandatory_finding_exits_1_with_path_and_fix(tmp_path: Path) -> None:
    doc = stack_doc()
    doc["jobs"][0]["image"] = "nvcr.io/nvidia/pytorch:latest"
    doc["jobs"][1].pop("checkpoint")
    proc = run_cli("policy", "check", str(write_spec(tmp_path / "bad.yaml", doc)))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "2 mandatory, 0 advisory" in proc.stdout
    assert "image-pinned" in proc.stdout and "jobs[0].image: " in proc.stdout
    assert "pin a version tag" in proc.stdout
    assert "jobs[1].checkpoint: " in proc.stdout
    assert "Traceback" not in proc.stderr


def test_advisory_is_printed_but_does_not_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = stack_doc()
    doc["scheduler"]["queues"][1]["gpuQuota"] = 16
    doc["jobs"][1]["queue"] = "research"  # 16 + 4 GPUs asked of a quota of 16: they wait
    assert main(["policy", "check", str(write_spec(tmp_path / "tight.yaml", doc))]) == 0
    out = capsys.readouterr().out
    assert "0 mandatory, 1 advisory" in out
    assert "advisory   queue-quota" in out


def test_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = stack_doc()
    doc["jobs"][0]["restartPolicy"]["maxRestarts"] = 1000
    path = write_spec(tmp_path / "bad.yaml", doc)
    assert main(["policy", "check", "--json", str(path), str(STACKS / "dev" / "cluster.yaml")]) == 1
    bad, good = json.loads(capsys.readouterr().out)
    assert bad["mandatory"] == 1 and bad["advisory"] == 0
    [finding] = bad["findings"]
    assert finding == {
        "rule": "job-max-restarts",
        "severity": "mandatory",
        "path": "jobs[0].restartPolicy.maxRestarts",
        "resource": None,
        "job": "gpt-small",
        "message": finding["message"],
    }
    assert good == {
        "file": str(STACKS / "dev" / "cluster.yaml"),
        "valid": True,
        "findings": [],
        "mandatory": 0,
        "advisory": 0,
    }


def test_invalid_spec_exits_1_and_unreadable_exits_2(tmp_path: Path) -> None:
    doc = stack_doc()
    doc["jobs"][0]["queue"] = "nope"
    proc = run_cli("policy", "check", str(write_spec(tmp_path / "invalid.yaml", doc)))
    assert proc.returncode == 1
    assert "jobs[0].queue" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("policy", "check", str(tmp_path / "missing.yaml"))
    assert proc.returncode == 2
    assert "cannot read the file" in proc.stderr and "Traceback" not in proc.stderr


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in listed] == [r.id for r in RULES]
    assert {r["severity"] for r in listed} == {"mandatory", "advisory"}


def test_rights_prints_every_identity(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "rights", str(STACKS / "dev" / "cluster.yaml")]) == 0
    out = capsys.readouterr().out
    assert "| `trainmaster/gpt-small-trainer` | trainmaster | trainmaster.io | " in out
    assert "trainingjobs/status | get, patch | gpt-small |" in out
    assert "| trainmaster-system | restricted | restricted |" in out


def test_rights_json_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "rights", "--json", str(STACKS / "dev" / "cluster.yaml")]) == 0
    data = json.loads(capsys.readouterr().out)
    trainer = [g for g in data["grants"] if g["account"] == "trainmaster/gpt-small-trainer"]
    assert [(g["resource"], g["names"]) for g in trainer] == [
        ("trainingjobs/status", ["gpt-small"])
    ]
    proc = run_cli("policy", "rights", str(tmp_path / "missing.yaml"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    doc = stack_doc()
    doc["jobs"][0]["nodes"] = "many"
    proc = run_cli("policy", "rights", str(write_spec(tmp_path / "bad.yaml", doc)))
    assert proc.returncode == 1 and "jobs[0].nodes" in proc.stderr
