"""`trainmaster plan` on a temporary git repository with two (or three) commits."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import small_spec_doc, stack_doc
from trainmaster.cli import main
from trainmaster.plan import PlanError, StackPlan, build_plan, render_markdown

GIT_ENV = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args],
        cwd=repo,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


def write(repo: Path, path: str, doc: dict[str, Any]) -> None:
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(doc, sort_keys=False))


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def base_dev() -> dict[str, Any]:
    doc = stack_doc("dev")
    # The two GPU jobs: the plan's figures below count their GPUs per queue.
    doc["jobs"] = [j for j in doc["jobs"] if j["name"] in ("gpt-small", "bert-finetune")]
    doc["jobs"][1].pop("checkpoint")  # a finding at base that the change resolves
    return doc


def head_dev() -> dict[str, Any]:
    doc = base_dev()
    gpt = doc["jobs"][0]
    gpt.update(nodes=4, image="nvcr.io/nvidia/pytorch:latest")
    gpt["restartPolicy"]["maxRestarts"] = 5  # unchanged value: not a change
    del doc["jobs"][1]
    llama = {
        "name": "llama-sft",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "launcher": "torchrun",
        "nodes": 2,
        "queue": "research",
        "checkpoint": {"volume": "checkpoints", "path": "/checkpoints/llama"},
    }
    doc["jobs"].append(llama)
    doc["scheduler"]["queues"][1]["gpuQuota"] = 64
    doc["networks"]["compute"]["mtu"] = 2048
    return doc


SMALL_JOB = {
    "name": "tiny",
    "image": "pytorch:2.3",
    "launcher": "torchrun",
    "nodes": 1,
    "checkpoint": {"volume": "c", "path": "/c"},
}


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    """Commit 1: stacks dev and small. Commit 2: dev changed, small removed, new added."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "stacks/dev/cluster.yaml", base_dev())
    write(root, "stacks/small/cluster.yaml", small_spec_doc("small", jobs=[SMALL_JOB]))
    (root / "README.md").write_text("not a spec\n")
    commit(root, "base")
    write(root, "stacks/dev/cluster.yaml", head_dev())
    (root / "stacks/small/cluster.yaml").unlink()
    write(root, "stacks/new/cluster.yaml", small_spec_doc("new", jobs=[SMALL_JOB]))
    commit(root, "head")
    yield root


def _stack(plan_stacks: tuple[StackPlan, ...], path: str) -> StackPlan:
    (match,) = [s for s in plan_stacks if s.path == path]
    return match


def test_plan_between_two_commits(repo: Path) -> None:
    plan = build_plan("HEAD~1", "HEAD", cwd=repo)
    assert plan.base.commit == git(repo, "rev-parse", "HEAD~1").strip()
    assert [s.path for s in plan.stacks] == [
        "stacks/dev/cluster.yaml",
        "stacks/new/cluster.yaml",
        "stacks/small/cluster.yaml",
    ]
    dev = _stack(plan.stacks, "stacks/dev/cluster.yaml")
    assert [j.name for j in dev.added] == ["llama-sft"]
    assert [j.name for j in dev.removed] == ["bert-finetune"]
    [gpt] = dev.changed
    assert gpt.name == "gpt-small"
    assert {c.path: (c.before, c.after) for c in gpt.changes} == {
        "image": ("nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io/nvidia/pytorch:latest"),
        "nodes": (2, 4),
    }
    assert (gpt.before.gpus, gpt.after.gpus) == (16, 32)
    queues = {q.name: (q.quota_before, q.quota_after, q.before, q.after) for q in dev.queues}
    assert queues == {"default": (None, None, 4, 0), "research": (32, 64, 16, 48)}
    assert {c.path: (c.before, c.after) for c in dev.settings} == {
        "networks.compute.mtu": (4096, 2048),
        "scheduler.queues[research].gpuQuota": (32, 64),
    }
    assert [(f.rule, f.path) for f in dev.new_findings] == [("image-pinned", "jobs[0].image")]
    assert [(f.rule, f.path) for f in dev.resolved_findings] == [
        ("job-checkpoint", "jobs[1].checkpoint")
    ]


def test_added_and_removed_spec_files(repo: Path) -> None:
    plan = build_plan("HEAD~1", "HEAD", cwd=repo)
    new = _stack(plan.stacks, "stacks/new/cluster.yaml")
    assert (new.base.status, new.head.status) == ("absent", "valid")
    assert [j.name for j in new.added] == ["tiny"] and not new.removed
    small = _stack(plan.stacks, "stacks/small/cluster.yaml")
    assert (small.base.status, small.head.status) == ("valid", "absent")
    assert [j.name for j in small.removed] == ["tiny"]
    assert [(q.name, q.before, q.after) for q in small.queues] == [("default", 8, 0)]


def test_markdown_comment(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    assert main(["plan", "--base", "HEAD~1", "--head", "HEAD"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!-- trainmaster-plan -->\n## trainmaster plan\n")
    assert "### `stacks/dev/cluster.yaml`" in out
    assert ":x: **1 new mandatory policy finding(s)**" in out
    assert "**Jobs**: 1 added, 1 removed, 1 changed." in out
    assert "| added | `llama-sft` | `research` | 16 (2 \u00d7 8) | |" in out
    assert "| removed | `bert-finetune` | `default` | 4 | |" in out
    assert (
        "| changed | `gpt-small` | `research` | 16 → 32 | `image`: "
        "`nvcr.io/nvidia/pytorch:24.05-py3` → `nvcr.io/nvidia/pytorch:latest`<br>"
        "`nodes`: `2` → `4` |"
    ) in out
    assert "| `research` | 32 → 64 | 16 | 48 | +32 |" in out
    assert "| `default` | unlimited | 4 | 0 | -4 |" in out
    assert "| `networks.compute.mtu` | `4096` | `2048` |" in out
    assert "- :x: **mandatory** `image-pinned` `jobs[0].image`: " in out
    assert "- :white_check_mark: resolved `job-checkpoint` `jobs[1].checkpoint`" in out
    assert "**New spec file.**" in out and "**Spec file removed**" in out


def test_json(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo / "stacks")
    assert main(["plan", "--base", "HEAD~1", "--head", "HEAD", "--json", "dev/cluster.yaml"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["base"]["ref"] == "HEAD~1" and len(data["base"]["commit"]) == 40
    [dev] = data["stacks"]
    assert dev["spec"] == "stacks/dev/cluster.yaml" and dev["changed"] is True
    assert [j["name"] for j in dev["jobs"]["added"]] == ["llama-sft"]
    assert dev["jobs"]["changed"][0]["changes"][1] == {"path": "nodes", "before": 2, "after": 4}
    assert {
        "name": "research",
        "before": 16,
        "after": 48,
        "quotaBefore": 32,
        "quotaAfter": 64,
        "overQuota": False,
    } in dev["queues"]
    assert [f["rule"] for f in dev["findings"]["new"]] == ["image-pinned"]
    assert dev["findings"]["head"] == {"mandatory": 1, "advisory": 0}


def test_head_defaults_to_the_working_tree(repo: Path) -> None:
    doc = head_dev()
    doc["jobs"][0]["image"] = "nvcr.io/nvidia/pytorch:24.07-py3"
    write(repo, "stacks/dev/cluster.yaml", doc)
    plan = build_plan("HEAD", specs=[Path("stacks/dev/cluster.yaml")], cwd=repo)
    assert plan.head.label == "working tree"
    [dev] = plan.stacks
    [gpt] = dev.changed
    assert [c.path for c in gpt.changes] == ["image"]
    assert [f.rule for f in dev.resolved_findings] == ["image-pinned"]


def test_reordering_jobs_is_not_a_change(repo: Path) -> None:
    doc = head_dev()
    doc["jobs"].reverse()
    write(repo, "stacks/dev/cluster.yaml", doc)
    [dev] = build_plan("HEAD", specs=[Path("stacks/dev/cluster.yaml")], cwd=repo).stacks
    # The image finding moved from jobs[0] to jobs[1]: the same finding, not a new one.
    assert not dev.has_changes and not dev.new_findings and not dev.resolved_findings
    assert "No changes." in render_markdown(build_plan("HEAD", cwd=repo))


def test_invalid_head_spec_is_shown_resolves_nothing_and_exits_1(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = head_dev()  # committed by the fixture, with findings (an image at :latest)
    doc["jobs"][0]["queue"] = "nope"
    write(repo, "stacks/dev/cluster.yaml", doc)
    commit(repo, "broken")
    monkeypatch.chdir(repo)
    assert main(["plan", "--base", "HEAD~1", "--head", "HEAD", "stacks/dev/cluster.yaml",
                 "--json"]) == 1
    captured = capsys.readouterr()
    (stack,) = json.loads(captured.out)["stacks"]
    assert stack["findings"]["resolved"] == []  # a broken file resolves nothing
    assert "the spec at the head is invalid" in captured.err
    assert main(["plan", "--base", "HEAD~1", "--head", "HEAD", "stacks/dev/cluster.yaml"]) == 1
    out = capsys.readouterr().out
    assert ":x: **The spec at head does not load**" in out
    assert "jobs[0].queue: 'nope' is not a queue" in out
    assert "resolved" not in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--base", "no-such-ref"], "'no-such-ref' is not a commit"),
        (["--base", "HEAD", "--head", "HEAD~9"], "'HEAD~9' is not a commit"),
        (["--base", "HEAD", "/etc/hostname"], "is outside the repository"),
    ],
)
def test_bad_revision_or_path_exits_2(
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    needle: str,
) -> None:
    monkeypatch.chdir(repo)
    assert main(["plan", *args]) == 2
    assert needle in capsys.readouterr().err


def test_not_a_repository_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert main(["plan", "--base", "HEAD"]) == 2
    assert "is not inside a git repository" in capsys.readouterr().err
    with pytest.raises(PlanError):
        build_plan("HEAD", cwd=tmp_path)


def test_a_change_of_an_immutable_field_is_planned_as_a_replacement(tmp_path: Path) -> None:
    """Flipping scheduler.preemption changes each queue PriorityClass's preemptionPolicy
    and a queue's priority its value: both immutable, so the plan says "replaced"."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    doc = base_dev()
    doc["scheduler"]["preemption"] = False
    write(root, "stacks/dev/cluster.yaml", doc)
    commit(root, "base")
    doc["scheduler"]["preemption"] = True
    doc["scheduler"]["queues"][1]["priority"] = 200
    write(root, "stacks/dev/cluster.yaml", doc)
    commit(root, "head")
    plan = build_plan("HEAD~1", "HEAD", cwd=root)
    (dev,) = plan.stacks
    assert {r.key: r.fields for r in dev.replaced} == {
        "PriorityClass/dev-default": ("preemptionPolicy",),
        "PriorityClass/dev-research": ("value", "preemptionPolicy"),
    }
    markdown = render_markdown(plan)
    assert "**Replaced** (deleted, then created" in markdown
    assert "| `PriorityClass/dev-research` | `value`, `preemptionPolicy` |" in markdown
    assert plan.to_json()["stacks"][0]["replaced"][0] == {
        "object": "PriorityClass/dev-default", "fields": ["preemptionPolicy"]}


def test_mutable_changes_replace_nothing(repo: Path) -> None:
    dev = _stack(build_plan("HEAD~1", "HEAD", cwd=repo).stacks, "stacks/dev/cluster.yaml")
    assert dev.settings and dev.replaced == ()


def _fair_doc(weight_a: float, quota_b: int) -> dict[str, Any]:
    doc = base_dev()
    doc["scheduler"]["cohorts"] = [
        {"name": "all", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 0}]},
        {"name": "research", "parent": "all", "fairSharing": {"weight": 1}},
        {"name": "prod", "parent": "all"}]
    doc["scheduler"]["fairSharing"] = {"enable": True}
    doc["scheduler"]["queues"] = [
        {"name": "default", "priority": 1000},
        {"name": "research", "nominalQuota": 32, "cohort": "research",
         "fairSharing": {"weight": weight_a}},
        {"name": "vision", "nominalQuota": quota_b, "cohort": "research"},
        {"name": "serving", "nominalQuota": 16, "cohort": "prod"}]
    return doc


def test_a_weight_or_quota_change_shows_the_new_entitlements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Weight 1 -> 3 for research and vision's quota 32 -> 48: the plan lists each queue
    and cohort whose entitlement moves, before -> after, from the scheduler's own
    report on the rendered config (siblings move too; serving, alone in prod, does not)."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    write(root, "stacks/dev/cluster.yaml", _fair_doc(1, 32))
    commit(root, "base")
    write(root, "stacks/dev/cluster.yaml", _fair_doc(3, 48))
    commit(root, "head")
    plan = build_plan("HEAD~1", "HEAD", cwd=root)
    dev = _stack(plan.stacks, "stacks/dev/cluster.yaml")
    moved = {(e.kind, e.name): e for e in dev.entitlements}
    assert set(moved) == {("queue", "research"), ("queue", "vision"), ("cohort", "research"),
                          ("cohort", "prod"), ("cohort", "all")}  # all: its pool grows
    research, vision = moved[("queue", "research")], moved[("queue", "vision")]
    assert research.before is not None and research.after is not None
    assert (research.before.weight, research.after.weight) == (1.0, 3.0)
    assert (research.before.entitlement, research.after.entitlement) == (0.5, 0.75)
    # The research cohort's pool: 32 + 32 lent, then 32 + 48.
    assert (research.before.entitled_gpus, research.after.entitled_gpus) == (32.0, 60.0)
    assert vision.before is not None and vision.after is not None
    assert (vision.before.entitlement, vision.after.entitlement) == (0.5, 0.25)
    assert (vision.before.nominal_gpus, vision.after.nominal_gpus) == (32, 48)
    prod = moved[("cohort", "prod")]  # its share of the root's pool: 16/2 of 80 -> 96
    assert prod.before is not None and prod.after is not None
    assert (prod.before.entitled_gpus, prod.after.entitled_gpus) == (40.0, 48.0)

    monkeypatch.chdir(root)
    assert main(["plan", "--base", "HEAD~1", "--head", "HEAD"]) == 0
    out = capsys.readouterr().out
    assert "**Fair-sharing entitlements**" in out
    assert "| `research` | research | 1 → 3 | 32 | 50% → 75% | 32 → 60 |" in out
    assert "| `vision` | research | 1 | 32 → 48 | 50% → 25% | 32 → 20 |" in out
    assert "| cohort `research` | all | 1 | 64 → 80 | 50% | 40 → 48 |" in out
    # Entitled above its quota: the plan says why (borrowing within the cohort).
    assert ("- `research`: 60 entitled GPUs against a quota of 32. The entitlement is its "
            "weight (3) over the weights of cohort `research`, times the 80 GPUs the cohort "
            "holds; the part above its quota comes only by **borrowing**") in out
    assert "None" not in out
    assert main(["plan", "--base", "HEAD~1", "--head", "HEAD", "--json"]) == 0
    (stack,) = json.loads(capsys.readouterr().out)["stacks"]
    shown = {(e["kind"], e["name"]): e for e in stack["entitlements"]}
    assert shown[("queue", "research")]["after"] == {
        "cohort": "research", "weight": 3.0, "nominalGpus": 32, "entitlement": 0.75,
        "entitledGpus": 60.0, "aboveQuota": True}


def test_declaring_default_moves_its_quota_from_the_rendered_empty_queue(
        tmp_path: Path) -> None:
    """A spec without a `default` queue is rendered with an empty one (0 GPUs): declaring
    it shows 0 -> 16, never "unlimited"; adding the first dataset to an empty list is not
    also a `datasets: [] -> unset` change."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    job = {**SMALL_JOB, "queue": "team"}
    base = small_spec_doc("q", jobs=[job])
    base["scheduler"] = {"queues": [{"name": "team", "nominalQuota": 32}]}
    base["cache"]["datasets"] = []
    write(root, "stacks/q/cluster.yaml", base)
    commit(root, "base")
    head = small_spec_doc("q", jobs=[job])
    head["scheduler"] = {"queues": [{"name": "team", "nominalQuota": 32},
                                    {"name": "default", "nominalQuota": 16}]}
    write(root, "stacks/q/cluster.yaml", head)
    commit(root, "head")
    (stack,) = build_plan("HEAD~1", "HEAD", cwd=root).stacks
    queues = {q.name: (q.quota_before, q.quota_after) for q in stack.queues}
    assert queues["default"] == (0, 16)
    assert "unlimited" not in render_markdown(build_plan("HEAD~1", "HEAD", cwd=root))
    paths = {c.path: (c.before, c.after) for c in stack.settings}
    assert "cache.datasets" not in paths
    assert paths["cache.datasets[tiny].size"] == (None, "1Gi")
