"""What a newcomer meets in the first hour without a cluster (issue 40), through the
installed entry point: schema errors in the spec's words, a job without a queue, a job
with a namespace, promises the nodes cannot keep, a plan that explains an entitlement
above quota, and help that keeps every word at 80 columns."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.entry import run
from tests.helpers import stack_doc, write_spec


def _errors(tmp_path: Path, doc: dict[str, Any]) -> str:
    proc = run("validate", str(write_spec(tmp_path / "spec.yaml", doc)))
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc.stderr


def _team_doc() -> dict[str, Any]:
    """The dev stack with three team queues in a cohort and no queue named `default`."""
    doc = stack_doc()
    doc["scheduler"]["queues"] = [
        {"name": "vision", "nominalQuota": 16, "cohort": "lab"},
        {"name": "speech", "nominalQuota": 16, "cohort": "lab"},
        {"name": "research", "nominalQuota": 32, "cohort": "lab"},
    ]
    for job in doc["jobs"]:
        job["queue"] = "research"
    return doc


# --- schema errors in the spec's words --------------------------------------------------

def _put(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    target: Any = doc
    for part in parents:
        target = target[int(part)] if part.isdigit() else target.setdefault(part, {})
    if value is _DROP:
        del target[last]
    else:
        target[int(last) if last.isdigit() else last] = value


_DROP = object()

SCHEMA_CASES = [
    # (id, field set, value, the line validate prints for it)
    ("exclusiveMinimum", "scheduler.queues.1.fairSharing", {"weight": 0},
     "scheduler.queues[1].fairSharing.weight: 0 is too small: `weight` (its share of what "
     "its cohort lends, relative to its siblings' weights) must be more than 0; leaving it "
     "out gives 1"),
    ("type-array", "networks.compute.rails", 8,
     "networks.compute.rails: must be a list (one entry per rail; nodes need at least this "
     "many NICs), not the number 8: write `rails: [{subnet: ...}, ...]` (one mapping per "
     "entry)"),
    ("type-quoted-number", "jobs.0.nodes", "2",
     'jobs[0].nodes: must be a whole number (pods in the gang, one per node), not the text '
     '"2": write it without quotes, `nodes: 2`'),
    ("type-boolean", "scheduler.preemption", "yes",
     'scheduler.preemption: must be true or false, not the text "yes": write '
     "`preemption: true` or `preemption: false`"),  # (its description is too long to quote)
    ("type-object", "jobs.0.checkpoint", "/ckpt",
     'jobs[0].checkpoint: must be a mapping (`key: value` lines or `{key: value}`) (where '
     'and how often a job checkpoints), not the text "/ckpt": write '
     "`checkpoint: {...}` with the fields docs/spec.md lists"),
    ("minimum", "jobs.0.nodes", 0,
     "jobs[0].nodes: 0 is less than the minimum 1: use 1 or more"),
    ("maximum", "scheduler.replicas", 9,
     "scheduler.replicas: 9 is more than the maximum 5: use 5 or less; leaving it out gives 2"),
    ("minItems", "networks.compute.rails", [],
     "networks.compute.rails: needs at least 1 item(s) (one entry per rail; nodes need at "
     "least this many NICs): add one"),
    ("enum", "networks.compute.fabric", "roce2",
     'networks.compute.fabric: "roce2" is not one of infiniband, roce: did you mean `roce`?'),
    ("required", "jobs.0.image", _DROP, "jobs[0].image: is required: add `image`"),
    ("additionalProperties", "jobs.0.gpuPerPod", 8,
     "jobs[0].gpuPerPod: unknown field: did you mean `gpusPerPod`?"),
    ("pattern", "jobs.0.name", "GPT_Small",
     '"GPT_Small" does not match ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$: use lowercase letters'),
    ("const", "kind", "Cluster", 'kind: "Cluster" must be TrainingCluster: write '
     "`kind: TrainingCluster`"),
]


@pytest.mark.parametrize(("field", "value", "said"), [c[1:] for c in SCHEMA_CASES],
                         ids=[c[0] for c in SCHEMA_CASES])
def test_schema_errors_name_the_field_and_the_fix(tmp_path: Path, field: str, value: Any,
                                                  said: str) -> None:
    doc = stack_doc()
    _put(doc, field, value)
    err = _errors(tmp_path, doc)
    assert said in err, err
    for raw in ("less than or equal to the minimum", "is not of type", "Input should be"):
        assert raw not in err, err


# --- jobs[].namespace and the default queue ---------------------------------------------

def test_a_job_namespace_says_where_namespaced_jobs_come_from(tmp_path: Path) -> None:
    doc = stack_doc()
    doc["jobs"][0]["namespace"] = "team-a"
    err = _errors(tmp_path, doc)
    assert "jobs[0].namespace: unknown field: a spec's jobs have no namespace of their own: " \
        "they run in `metadata.namespace`" in err
    assert "scheduler.localQueues" in err and "kueue.x-k8s.io/queue-name" in err
    assert "did you mean `name`" not in err


def test_a_job_without_queue_in_a_spec_without_default_is_told_it_has_no_queue(
        tmp_path: Path) -> None:
    doc = _team_doc()
    del doc["jobs"][1]["queue"]
    err = _errors(tmp_path, doc)
    assert ("jobs[1].queue: the job names no queue, so it would go to queue 'default', "
            "which scheduler.queues does not declare: add `queue: <name>` to the job (one "
            "of research, speech, vision), or declare `{name: default, nominalQuota: N}` "
            "in scheduler.queues") in err
    assert "'default' is not a queue" not in err
    # Naming `default` yourself is the other message.
    doc["jobs"][1]["queue"] = "default"
    assert "jobs[1].queue: 'default' is not a queue" in _errors(tmp_path, doc)


def _scheduler_config(tmp_path: Path, doc: dict[str, Any]) -> dict[str, Any]:
    proc = run("render", str(write_spec(tmp_path / "spec.yaml", doc)))
    assert proc.returncode == 0, proc.stderr
    (configmap,) = [o for o in yaml.safe_load_all(proc.stdout)
                    if o and o["kind"] == "ConfigMap" and "config.yaml" in o.get("data", {})
                    and "defaultQueue" in o["data"]["config.yaml"]]
    config: dict[str, Any] = yaml.safe_load(configmap["data"]["config.yaml"])
    return config


def test_the_scheduler_config_never_names_a_queue_that_does_not_exist(
        tmp_path: Path) -> None:
    config = _scheduler_config(tmp_path, _team_doc())
    queues = {q["name"]: q for q in config["queues"]}
    assert config["defaultQueue"] in queues
    # Unlabelled pods wait at a quota of 0 instead of running unlimited.
    assert queues["default"] == {"name": "default", "nominalQuota": 0, "preemption": False}
    assert set(queues) == {"vision", "speech", "research", "default"}
    # A spec with its own `default` queue keeps it as written.
    config = _scheduler_config(tmp_path, stack_doc())
    assert config["defaultQueue"] == "default"
    assert [q["name"] for q in config["queues"]] == ["default", "research"]


# --- capacity: validate warns, policy check fails ---------------------------------------

def test_promises_the_nodes_cannot_keep_warn_in_validate_and_fail_policy_check(
        tmp_path: Path) -> None:
    doc = _team_doc()  # the dev stack: 8 nodes of 8 GPUs, a 2Ti cache
    doc["cache"]["datasets"][0]["size"] = "3Ti"
    doc["scheduler"]["queues"][2]["nominalQuota"] = 128
    spec = write_spec(tmp_path / "spec.yaml", doc)
    proc = run("validate", str(spec))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{spec}: valid (8 nodes, 64 GPUs, 3 jobs), 3 warning(s)"
    warnings = proc.stderr.splitlines()
    assert warnings == [
        f"{spec}: warning: cache.datasets[0].size: 3Ti is more than the node cache's 2Ti "
        "(cache.capacity): no node can ever hold it and its warm-up fails; raise "
        "cache.capacity (at most the nodes' localDisk) or split the dataset",
        f"{spec}: warning: scheduler.queues[2].nominalQuota: queue 'research' has a quota "
        "of 128 GPUs, but the spec's nodes have 64: it can never use its quota; lower it to "
        "at most 64, or add nodes to the topology",
        f"{spec}: warning: scheduler.queues: cohort 'lab' sums to 160 GPUs of quota (queues "
        "vision, speech, research and its cohorts' own), but the spec's nodes have 64: its "
        "queues can never all reach their quota; lower the quotas to sum to at most 64, or "
        "add nodes",
    ]
    as_json = run("validate", "--json", str(spec))
    assert as_json.returncode == 0
    assert [w["path"] for w in yaml.safe_load(as_json.stdout)[0]["warnings"]] == [
        "cache.datasets[0].size", "scheduler.queues[2].nominalQuota", "scheduler.queues"]
    policy = run("policy", "check", str(spec))
    assert policy.returncode == 1, policy.stdout
    found = [line.split()[:3] for line in policy.stdout.splitlines()[1:]]
    assert found == [["mandatory", "capacity-fits", "cache.datasets[0].size:"],
                     ["mandatory", "capacity-fits", "scheduler.queues[2].nominalQuota:"],
                     ["mandatory", "capacity-fits", "scheduler.queues:"]]


def test_a_job_larger_than_the_nodes_is_refused_by_validate_and_policy(
        tmp_path: Path) -> None:
    doc = stack_doc()
    doc["jobs"][0]["nodes"] = 9
    doc["jobs"][0].pop("topology", None)
    assert "jobs[0].nodes: 9 is more than the 8 nodes" in _errors(tmp_path, doc)
    policy = run("policy", "check", str(tmp_path / "spec.yaml"))
    assert policy.returncode == 1 and "jobs[0].nodes: 9 is more than" in policy.stderr


# --- plan: an entitlement above quota is explained --------------------------------------

def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t",
                    *args], check=True, capture_output=True)


def test_plan_explains_an_entitlement_above_quota_and_prints_no_none(tmp_path: Path) -> None:
    doc = _team_doc()
    doc["scheduler"]["fairSharing"] = {"enable": True}
    write_spec(tmp_path / "cluster.yaml", doc)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "base")
    # Research gets weight 2, speech leaves the cohort (its cohort becomes none).
    doc["scheduler"]["queues"][2]["fairSharing"] = {"weight": 2}
    del doc["scheduler"]["queues"][1]["cohort"]
    write_spec(tmp_path / "cluster.yaml", doc)
    proc = run("plan", "--base", "HEAD", "cluster.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "None" not in out, out
    assert "| `speech` | lab → - |" in out, out
    # Vision lends more: `lab` holds 64 + 32 GPUs, research's weight 2 of 3 is 64 of them.
    doc["scheduler"]["queues"][0]["nominalQuota"] = 64
    write_spec(tmp_path / "cluster.yaml", doc)
    out = run("plan", "--base", "HEAD", "cluster.yaml", cwd=tmp_path).stdout
    assert "| `research` | lab | 1 → 2 | 32 | 33.3% → 66.7% | 21.3 → 64 |" in out, out
    assert ("Entitled above quota:\n- `research`: 64 entitled GPUs against a quota of 32. "
            "The entitlement is its weight (2) over the weights of cohort `lab`, times the "
            "96 GPUs the cohort holds; the part above its quota comes only by **borrowing** "
            "what the cohort's other queues leave idle, and is taken back when they need "
            "it.") in out, out
    assert "None" not in out


# --- help at 80 columns -----------------------------------------------------------------

def test_simulate_help_at_80_columns_keeps_the_whole_trace_column_list() -> None:
    proc = run("simulate", "--help", env={"COLUMNS": "80"})
    assert proc.returncode == 0
    assert "…" not in proc.stdout, proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) <= 80
    # The column list folds over lines inside the table: join the help column back.
    help_column = " ".join(line[50:79].strip() for line in proc.stdout.splitlines()
                           if line.startswith("│"))
    for column in ("id,", "submit_s,", "duration_s,", "pods,", "gpus_per_pod", "queue,",
                   "priority,", "topology,", "min_pods,", "checkpoint_s."):
        assert column in help_column, (column, proc.stdout)


def test_no_help_cuts_a_word_at_80_columns() -> None:
    """Every command's help at 80 columns: long option names and long words fold onto
    the next line, never end in "…" (`pulumi` passes its help through from Pulumi)."""
    import typer
    from typer.testing import CliRunner

    from trainmaster.cli import app

    paths: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        paths.append(path)
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    runner = CliRunner(env={"COLUMNS": "80"})
    cut = {}
    for path in paths:
        if path[:1] == ["pulumi"]:
            continue
        out = runner.invoke(app, [*path, "-h"], prog_name="trainmaster").output
        if "…" in out or max(len(line) for line in out.splitlines()) > 80:
            cut[" ".join(path)] = [line for line in out.splitlines() if "…" in line]
    assert len(paths) > 40 and cut == {}, cut
