"""`trainmaster init` through the installed entry point: what it writes goes through the
README's cluster-free path (validate, render, policy check, plan against a git revision,
simulate) for several shapes; it never overwrites a file without --force; at a terminal it
asks for what the flags leave out."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from tests.cli.entry import SCRIPTS, run

SHAPES = {
    "defaults": [],
    # The newcomer of issue 40: 2 spines x 4 leaves x 8 nodes x 8 GPUs, RoCE, 8 rails,
    # storage, three teams.
    "roce-three-teams": ["--spines", "2", "--leaves-per-spine", "4", "--nodes-per-leaf", "8",
                         "--gpus", "8", "--fabric", "roce", "--rails", "8",
                         "--teams", "vision,speech,research"],
    "one-small-node": ["--spines", "1", "--leaves", "1", "--nodes-per-leaf", "1", "--gpus",
                       "1", "--rails", "1", "--no-storage", "--name", "tiny"],
    "uneven-quotas": ["--leaves", "5", "--nodes-per-leaf", "1", "--gpus", "8",
                      "--teams", "a,b,c"],
}


@pytest.mark.parametrize("flags", SHAPES.values(), ids=SHAPES.keys())
def test_the_starter_spec_validates_renders_and_passes_every_policy(
        tmp_path: Path, flags: list[str]) -> None:
    spec = tmp_path / "cluster.yaml"
    made = run("init", str(spec), *flags)
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith(f"wrote {spec}: ")
    text = spec.read_text()
    assert text.startswith("# ") and "docs/spec.md" in text  # commented for a reader
    checked = run("validate", str(spec))
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr  # no warnings
    assert checked.stdout.startswith(f"{spec}: valid (")
    policy = run("policy", "check", str(spec))
    assert policy.returncode == 0, policy.stdout + policy.stderr
    assert policy.stdout.strip() == f"{spec}: passes all policies"
    rendered = run("render", str(spec))
    assert rendered.returncode == 0, rendered.stderr
    kinds = {o["kind"] for o in yaml.safe_load_all(rendered.stdout) if o}
    assert {"TrainingJob", "PriorityClass", "Deployment"} <= kinds


def test_the_written_spec_says_what_the_flags_asked_for(tmp_path: Path) -> None:
    spec = tmp_path / "lab.yaml"
    assert run("init", str(spec), *SHAPES["roce-three-teams"]).returncode == 0
    doc = yaml.safe_load(spec.read_text())
    assert doc["topology"]["generate"] == {"switchesPerLevel": [2, 4], "nodesPerLeaf": 8}
    assert doc["topology"]["node"]["gpus"] == 8 and doc["topology"]["node"]["nics"] == 8
    compute = doc["networks"]["compute"]
    assert compute["fabric"] == "roce" and len(compute["rails"]) == 8
    assert "lossless" in compute and "storage" in doc["networks"]
    queues = doc["scheduler"]["queues"]
    assert [q["name"] for q in queues] == ["vision", "speech", "research"]
    assert sum(q["nominalQuota"] for q in queues) == 512  # the cluster, split
    assert {q["cohort"] for q in queues} == {"teams"}
    assert all(job["queue"] in {"vision", "speech", "research"} for job in doc["jobs"])


def test_plan_against_a_git_revision_and_simulate_take_the_starter_spec(
        tmp_path: Path) -> None:
    spec = tmp_path / "cluster.yaml"
    assert run("init", str(spec), "--teams", "vision,research").returncode == 0

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.email=t@t",
                        "-c", "user.name=t", *args], check=True, capture_output=True)

    git("init", "-q")
    git("add", "cluster.yaml")
    git("commit", "-qm", "init")
    spec.write_text(spec.read_text().replace("    nodes: 2\n", "    nodes: 4\n"))
    plan = run("plan", "--base", "HEAD", "cluster.yaml", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert "| changed | `example` | `vision` | 16 → 32 | `nodes`: `2` → `4` |" in plan.stdout
    assert "None" not in plan.stdout
    sim = run("simulate", "--spec", str(spec), "--synthetic", "--jobs", "30",
              "--policy", "trainmaster")
    assert sim.returncode == 0, sim.stderr
    assert "trainmaster" in sim.stdout


def test_an_existing_file_is_never_overwritten_without_force(tmp_path: Path) -> None:
    spec = tmp_path / "cluster.yaml"
    spec.write_text("# mine\n")
    refused = run("init", str(spec))
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.strip() == (f"error: {spec} exists: pass --force to overwrite it, "
                                      "or name another file (trainmaster init FILE)")
    assert spec.read_text() == "# mine\n"
    forced = run("init", str(spec), "--force")
    assert forced.returncode == 0, forced.stderr
    assert spec.read_text().startswith("# lab: a starter spec")


@pytest.mark.parametrize(("flags", "said"), [
    (["--fabric", "ethernet"], "--fabric 'ethernet': use one of infiniband, roce"),
    (["--teams", "Vision"], "--teams: 'Vision' is not a queue name"),
    (["--teams", "a,a"], "--teams names a team twice"),
    (["--rails", "0"], "--rails"),
])
def test_bad_flags_are_usage_errors_and_write_nothing(tmp_path: Path, flags: list[str],
                                                      said: str) -> None:
    spec = tmp_path / "cluster.yaml"
    proc = run("init", str(spec), *flags)
    assert proc.returncode == 2, proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr
    assert not spec.exists()


def test_at_a_terminal_it_asks_for_what_the_flags_leave_out(tmp_path: Path) -> None:
    spec = tmp_path / "cluster.yaml"
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([str(SCRIPTS / "trainmaster"), "init", str(spec), "--gpus", "4"],
                            stdin=terminal, stdout=terminal, stderr=terminal, cwd=tmp_path,
                            env={**os.environ, "COLUMNS": "100"})
    os.close(terminal)
    # name, spines, leaves per spine, nodes per leaf, (gpus given), fabric, rails, storage,
    # teams: one answer a line, read by the terminal's line discipline one at a time.
    os.write(controller, b"asked\n2\n2\n3\nroce\n4\nn\nops,ml\n")
    said = b""
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        ready, _, _ = select.select([controller], [], [], 0.5)
        if ready:
            try:
                said += os.read(controller, 4096)
            except OSError:
                break
    proc.wait(timeout=60)
    os.close(controller)
    transcript = said.decode(errors="replace")
    assert proc.returncode == 0, transcript
    for question in ("Cluster name [lab]:", "Spine switches [1]:", "Nodes per leaf [8]:",
                     "Compute fabric (infiniband or roce) [infiniband]:",
                     "Teams (comma-separated; one queue each) [research]:"):
        assert question in transcript, transcript
    assert "GPUs per node" not in transcript  # given as a flag: not asked
    doc = yaml.safe_load(spec.read_text())
    assert doc["metadata"]["name"] == "asked"
    assert doc["topology"]["generate"] == {"switchesPerLevel": [2, 2], "nodesPerLeaf": 3}
    assert doc["topology"]["node"]["gpus"] == 4
    assert doc["networks"]["compute"]["fabric"] == "roce"
    assert len(doc["networks"]["compute"]["rails"]) == 4
    assert "storage" not in doc["networks"]
    assert [q["name"] for q in doc["scheduler"]["queues"]] == ["ops", "ml"]
