"""`trainmaster simulate` answers a platform lead (issue 40, and issue 39's fairness
figures), through the installed CLI: labelled figures, both allocations, lost GPU-hours,
per-queue fairness, per-job rows, the spec's own jobs, synthetic jobs in the spec's
queues, `--compare`, and a report without raw values."""

from __future__ import annotations

import csv
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.cli.entry import REPO, run

EXAMPLE = REPO / "examples" / "simulate"
EXAMPLE_ARGS = ["--spec", str(EXAMPLE / "cluster.yaml"), "--trace", str(EXAMPLE / "jobs.csv")]

HEAD = """apiVersion: trainmaster.io/v1alpha1
kind: TrainingCluster
metadata:
  name: {name}
topology:
  levels: [spine, leaf]
  node: {{gpus: 8, nics: 4, cpu: 96, memory: 1024Gi, localDisk: 7Ti}}
  switches:
    - name: spine-0
      switches:
        - {{name: leaf-0, nodes: {per_leaf}}}
        - {{name: leaf-1, nodes: {per_leaf}}}
networks:
  compute:
    fabric: infiniband
    rails:
      - {{subnet: 10.100.0.0/20}}
  storage: {{subnet: 10.200.0.0/20}}
"""

# One cohort: a lender that owns the whole quota and never submits, and two teams with
# no quota of their own, weights 1 and 3, fair sharing on (issue 39's commonest cohort).
LENDER_QUEUES = """scheduler:
  preemption: true
  fairSharing: {enable: true}
  queues:
    - {name: lender, nominalQuota: 64, cohort: lab}
    - {name: light, nominalQuota: 0, cohort: lab}
    - {name: heavy, nominalQuota: 0, cohort: lab, fairSharing: {weight: 3}}
"""

IMAGE = '"nvcr.io/nvidia/pytorch:24.05-py3"'
SPEC_JOBS = f"""jobs:
  - {{name: pretrain, image: {IMAGE}, launcher: torchrun, nodes: 4, queue: heavy,
     topology: {{domain: leaf}}}}
  - {{name: sweep, image: {IMAGE}, launcher: torchrun, nodes: 3, queue: light}}
  - {{name: stretch, image: {IMAGE}, launcher: torchrun, nodes: 2, queue: light,
     elastic: {{minNodes: 1, maxNodes: 3}}}}
"""


def _lender_spec(tmp: Path, jobs: str = "") -> Path:
    path = tmp / "lab.yaml"
    path.write_text(HEAD.format(name="lab", per_leaf=4) + LENDER_QUEUES + jobs)
    return path


def _busy_trace(tmp: Path) -> Path:
    """Both teams submit far more than the 64 GPUs hold (8 one-node slots: 2 and 6 is
    the split by weight), heavy three times light's work; the lender nothing."""
    rows = ["id,submit_s,duration_s,pods,gpus_per_pod,queue"]
    for queue, count in (("light", 16), ("heavy", 48)):
        rows += [f"{queue}-{i},{7 * i},{1200 + 71 * (i % 16)},1,8,{queue}"
                 for i in range(count)]
    path = tmp / "busy.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def _json(*args: str) -> dict[str, Any]:
    proc = run("simulate", *args, "--policy", "trainmaster", "--json")
    assert proc.returncode == 0, proc.stderr
    document: dict[str, Any] = json.loads(proc.stdout)
    return document


def _usage_error(*args: str) -> str:
    proc = run("simulate", *args)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    return proc.stderr


def test_an_idle_lender_does_not_dilute_entitlement_or_share(tmp_path: Path) -> None:
    (result,) = _json("--spec", str(_lender_spec(tmp_path)), "--trace",
                      str(_busy_trace(tmp_path)))["results"]
    queues = {q["queue"]: q for q in result["queues"]}
    light, heavy, lender = queues["light"], queues["heavy"], queues["lender"]
    # Entitlement over the queues with work waiting: 1/4 and 3/4, not 1/5 and 3/5.
    assert (light["entitlement"], heavy["entitlement"]) == (0.25, 0.75)
    assert light["share_busy"] == pytest.approx(0.25, abs=0.03)
    assert heavy["share_busy"] == pytest.approx(0.75, abs=0.03)
    assert light["share_busy"] + heavy["share_busy"] == pytest.approx(1.0, abs=1e-3)
    assert light["contended_s"] == heavy["contended_s"] > 3600
    assert light["jain_index"] > 0.99
    # The lender never wanted anything: no entitlement, no share, nothing owed.
    assert lender["jobs"] == 0 and lender["entitlement"] is None
    assert lender["share_busy"] is None and lender["contended_s"] == 0.0
    # The split the GPUs really got over the run matches the figures.
    got = light["gpu_allocation_run"] / (light["gpu_allocation_run"]
                                         + heavy["gpu_allocation_run"])
    assert got == pytest.approx(light["share_busy"], abs=0.03)


def test_the_table_labels_both_allocations_losses_and_fairness(tmp_path: Path) -> None:
    proc = run("simulate", "--spec", str(_lender_spec(tmp_path)), "--trace",
               str(_busy_trace(tmp_path)), "--policy", "trainmaster")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for label in ("while work", "whole run", "GPU-h lost", "to preemption", "to failures",
                  "node", "failures", "entitle-", "share", "(contended)", "owed wait",
                  "per queue", "fair sharing per queue", "work waits"):
        assert label in out, label
    assert "None" not in out
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines()
            if line.startswith("│")]
    fair = [r for r in rows if len(r) == 8 and r[1] in ("light", "heavy")]
    assert [r[:4] for r in fair] == [["trainmaster", "light", "1", "0.250"],
                                     ["trainmaster", "heavy", "3", "0.750"]]


def test_allocations_both_ways_sum_over_the_queues() -> None:
    (result,) = _json(*EXAMPLE_ARGS)["results"]
    queues = result["queues"]
    for key in ("gpu_allocation_waiting", "gpu_allocation_run"):
        assert sum(q[key] for q in queues) == pytest.approx(result[key], abs=2e-4), key
    # Work waited for 8,700 s of the 16,400 s run (docs/simulate.md walks through it).
    assert (result["span_s"], result["waiting_s"]) == (16400.0, 8700.0)
    assert result["gpu_allocation"] == result["gpu_allocation_waiting"] == 1.0


def test_lost_gpu_hours_and_preemptions_in_the_json() -> None:
    (result,) = _json(*EXAMPLE_ARGS)["results"]
    # sweep-1 lost 140 s and sweep-2 80 s, 16 GPUs each: 3,520 GPU-seconds.
    assert result["preemptions"] == 2
    assert result["lost_gpu_hours_preemption"] == round(3520 / 3600, 3)
    assert (result["lost_gpu_hours_failures"], result["node_failures"]) == (0.0, 0)
    research, prod = result["queues"]
    assert (research["preempted"], research["lost_gpu_hours_preemption"]) == (2, 0.978)
    assert (prod["preempted"], prod["lost_gpu_hours_preemption"]) == (0, 0.0)


def test_jobs_out_writes_one_row_per_job(tmp_path: Path) -> None:
    target = tmp_path / "jobs.csv"
    proc = run("simulate", *EXAMPLE_ARGS, "--policy", "trainmaster", "--jobs-out",
               str(target))
    assert proc.returncode == 0, proc.stderr
    assert f"jobs: 5 rows in {target}" in proc.stderr
    rows = {r["name"]: r for r in csv.DictReader(target.open())}
    assert list(rows) == ["pretrain", "sweep-1", "sweep-2", "prod-train", "prod-eval"]
    assert all(r["run"] == "base" and r["policy"] == "trainmaster" for r in rows.values())
    sweep1, sweep2, eval_ = rows["sweep-1"], rows["sweep-2"], rows["prod-eval"]
    assert (sweep1["queue"], sweep1["preemptions"], sweep1["lost_gpu_s_preemption"]) == (
        "research", "1", "2240.0")
    assert (sweep2["preemptions"], sweep2["lost_gpu_s_preemption"]) == ("1", "1280.0")
    assert (eval_["submit_s"], eval_["start_s"], eval_["wait_s"]) == ("2400.0", "9200.0",
                                                                     "6800.0")
    pretrain = rows["pretrain"]
    assert (pretrain["pods"], pretrain["gpus"], pretrain["nodes"]) == ("4", "32", "4")
    assert float(pretrain["end_s"]) - float(pretrain["start_s"]) == 14400.0


def test_jobs_out_into_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    err = _usage_error(*EXAMPLE_ARGS, "--jobs-out", str(tmp_path / "no" / "jobs.csv"))
    assert "--jobs-out" in err and "does not exist" in err


def test_the_spec_jobs_are_the_workload(tmp_path: Path) -> None:
    spec = _lender_spec(tmp_path, SPEC_JOBS)
    target = tmp_path / "jobs.csv"
    proc = run("simulate", "--spec", str(spec), "--policy", "trainmaster", "--job-seconds",
               "600", "--job-seconds", "pretrain=1800", "--submit-every", "60",
               "--jobs-out", str(target), "--json")
    assert proc.returncode == 0, proc.stderr
    (result,) = json.loads(proc.stdout)["results"]
    assert result["jobs_finished"] == 3
    rows = {r["name"]: r for r in csv.DictReader(target.open())}
    assert [(n, r["queue"], r["submit_s"], r["pods"], r["gpus"]) for n, r in rows.items()] == [
        ("pretrain", "heavy", "0.0", "4", "32"), ("sweep", "light", "60.0", "3", "24"),
        ("stretch", "light", "120.0", "3", "24")]
    # 64 GPUs: pretrain (32) and sweep (24) leave 8: the elastic job starts at its
    # minimum of one pod at 120 and grows when sweep ends at 660.
    assert (rows["pretrain"]["start_s"], rows["pretrain"]["end_s"]) == ("0.0", "1800.0")
    assert (rows["sweep"]["start_s"], rows["sweep"]["end_s"]) == ("60.0", "660.0")
    assert rows["stretch"]["start_s"] == "120.0" and rows["stretch"]["nodes"] == "3"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--job-seconds", "nope=5"],
         "--job-seconds: 'nope' is not a job of the spec: use one of pretrain, sweep, stretch"),
        (["--job-seconds", "0"], "--job-seconds must be a number of seconds > 0"),
    ],
)
def test_bad_spec_job_options_are_usage_errors(tmp_path: Path, args: list[str],
                                               message: str) -> None:
    assert message in _usage_error("--spec", str(_lender_spec(tmp_path, SPEC_JOBS)), *args)


def test_spec_job_options_need_the_spec_jobs() -> None:
    assert "--job-seconds and --submit-every go with" in _usage_error(
        *EXAMPLE_ARGS, "--submit-every", "5")


def test_a_spec_without_jobs_says_what_to_give(tmp_path: Path) -> None:
    proc = run("simulate", "--spec", str(_lender_spec(tmp_path)))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "the spec has no jobs: add some under `jobs:`, or give --trace" in proc.stderr


def test_synthetic_jobs_go_to_the_declared_queues(tmp_path: Path) -> None:
    spec = str(_lender_spec(tmp_path))
    (result,) = _json("--spec", spec, "--synthetic", "--jobs", "60")["results"]
    jobs = {q["queue"]: q["jobs"] for q in result["queues"]}
    # Not every queue has a positive quota, so the default mix is equal.
    assert list(jobs) == ["lender", "light", "heavy"] and sum(jobs.values()) == 60
    assert all(n >= 10 for n in jobs.values()), jobs
    (mixed,) = _json("--spec", spec, "--synthetic", "--jobs", "60", "--queue-mix",
                     "light=1,heavy=3")["results"]
    jobs = {q["queue"]: q["jobs"] for q in mixed["queues"]}
    assert jobs["lender"] == 0 and jobs["light"] + jobs["heavy"] == 60
    assert jobs["heavy"] > 2 * jobs["light"], jobs


def test_synthetic_jobs_follow_the_quotas_by_default(tmp_path: Path) -> None:
    spec = tmp_path / "quotas.yaml"
    spec.write_text(HEAD.format(name="quotas", per_leaf=4) + "scheduler:\n  queues:\n"
                    "    - {name: big, nominalQuota: 48, cohort: c}\n"
                    "    - {name: small, nominalQuota: 16, cohort: c}\n")
    (result,) = _json("--spec", str(spec), "--synthetic", "--jobs", "200", "--load",
                      "0.5")["results"]
    jobs = {q["queue"]: q["jobs"] for q in result["queues"]}
    assert list(jobs) == ["big", "small"] and sum(jobs.values()) == 200
    assert 2 * jobs["small"] < jobs["big"], jobs  # 3:1 by nominal quota


@pytest.mark.parametrize(
    ("mix", "message"),
    [
        ("nope=1", "--queue-mix: 'nope' is not a queue of"),
        ("light=x", "--queue-mix: the weight of 'light' must be a number >= 0, got 'x'"),
        ("light=0", "--queue-mix: give at least one queue a weight above 0"),
        ("light", "--queue-mix: 'light' is not name=weight"),
    ],
)
def test_bad_queue_mix_is_a_usage_error(tmp_path: Path, mix: str, message: str) -> None:
    err = _usage_error("--spec", str(_lender_spec(tmp_path)), "--synthetic", "--jobs", "5",
                       "--queue-mix", mix)
    assert message in err
    if mix == "nope=1":
        assert "use lender, light, heavy" in err


def test_queue_mix_without_queues_is_a_usage_error() -> None:
    assert "--queue-mix needs queues" in _usage_error(
        "--nodes", "2", "--synthetic", "--jobs", "5", "--queue-mix", "a=1")


def test_compare_runs_both_sides_and_prints_the_difference() -> None:
    document = _json(*EXAMPLE_ARGS, "--compare", "scheduler.preemption=false")
    compared = document["compare"]
    assert (compared["key"], compared["value"], compared["change"]) == (
        "scheduler.preemption", False, "scheduler.preemption=false")
    (base,), (changed,), (delta,) = (document["results"], compared["results"],
                                     compared["difference"])
    assert (base["preemptions"], changed["preemptions"], delta["preemptions"]) == (2, 0, -2)
    assert delta["lost_gpu_hours_preemption"] == -0.978
    assert delta["jct_mean_s"] == pytest.approx(changed["jct_mean_s"] - base["jct_mean_s"])
    research = delta["queues"][0]
    assert (research["queue"], research["preempted"]) == ("research", -2)
    proc = run("simulate", *EXAMPLE_ARGS, "--policy", "trainmaster", "--compare",
               "scheduler.preemption=false")
    assert proc.returncode == 0, proc.stderr
    assert "per policy (difference: scheduler.preemption=false minus base)" in proc.stdout
    assert "per policy (base)" in proc.stdout


def test_compare_a_queue_setting() -> None:
    document = _json(*EXAMPLE_ARGS, "--compare", "scheduler.queues.prod.nominalQuota=48")
    (changed,) = document["compare"]["results"]
    assert [q["nominal_quota"] for q in changed["queues"]] == [32, 48]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("scheduler.preemptoin=false",
         "--compare: unknown key 'scheduler.preemptoin'; the keys are scheduler.preemption, "
         "scheduler.fairSharing.enable, scheduler.queues.QUEUE.nominalQuota"),
        ("scheduler.preemption=maybe",
         "--compare scheduler.preemption: the value must be true or false, got 'maybe'"),
        ("scheduler.queues.nope.nominalQuota=4",
         "'nope' is not a queue of"),
        ("preemption", "--compare takes KEY=VALUE"),
    ],
)
def test_bad_compare_is_a_usage_error(change: str, message: str) -> None:
    assert message in _usage_error(*EXAMPLE_ARGS, "--compare", change)


class _Cells(HTMLParser):
    """The text of every table cell and caption of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self._open = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("td", "th", "caption"):
            self._open += 1
            self.cells.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th", "caption"):
            self._open -= 1

    def handle_data(self, data: str) -> None:
        if self._open:
            self.cells[-1] += data


def _report_cells(tmp: Path, *args: str) -> list[str]:
    proc = run("simulate", *args, "--report", str(tmp / "rep"))
    assert proc.returncode == 0, proc.stderr
    parser = _Cells()
    parser.feed((tmp / "rep" / "index.html").read_text())
    return parser.cells


def test_the_report_has_no_raw_values(tmp_path: Path) -> None:
    # The lender's fairness figures are null; the elastic job gives an `elastic` object.
    cells = _report_cells(tmp_path / "a", "--spec", str(_lender_spec(tmp_path)), "--trace",
                          str(_busy_trace(tmp_path)), "--policy", "trainmaster")
    elastic = tmp_path / "e.csv"
    elastic.write_text("id,submit_s,duration_s,pods,gpus_per_pod,queue,priority,topology,"
                       "min_pods\na,0,100,1,8,,,,\ne,10,200,2,8,,,,1\n")
    cells += _report_cells(tmp_path / "b", "--nodes", "2", "--trace", str(elastic),
                           "--policy", "trainmaster,spread")
    compared = _report_cells(tmp_path / "c", *EXAMPLE_ARGS, "--policy", "trainmaster",
                             "--compare", "scheduler.preemption=false")
    assert "Per policy (difference: scheduler.preemption=false minus base)" in compared
    assert "-2" in compared and "-0.98" in compared  # preemptions, GPU-h lost
    cells += compared
    assert len(cells) > 100
    for text in cells:
        assert "None" not in text and "{" not in text and "[" not in text, text
        assert "nan" not in text.lower().split(), text
    for label in ("GPU alloc. while work waits", "GPU alloc. whole run",
                  "GPU-h lost to preemption", "entitlement", "share (contended)",
                  "owed wait (h)", "elastic jobs", "rescales"):
        assert label in cells, label
    assert "-" in cells  # the lender's missing share


def test_help_at_80_columns_keeps_the_trace_columns() -> None:
    proc = run("simulate", "--help", env={"COLUMNS": "80", "TERM": "dumb"})
    assert proc.returncode == 0
    text = " ".join(line.strip("│ ") for line in proc.stdout.splitlines())
    for column in ("submit_s,", "duration_s,", "gpus_per_pod", "min_pods,", "checkpoint_s."):
        assert column in text, column


def test_synthetic_jobs_use_a_queues_file_too(tmp_path: Path) -> None:
    queues = tmp_path / "queues.yaml"
    queues.write_text("queues:\n  - {name: a, nominalQuota: 8}\n  - {name: b, nominalQuota: 24}\n")
    (result,) = _json("--nodes", "4", "--queues", str(queues), "--synthetic", "--jobs",
                      "80", "--load", "0.5")["results"]
    jobs = {q["queue"]: q["jobs"] for q in result["queues"]}
    # No job above 8 GPUs may go to a (it could never run), and b gets about 3x a's share.
    assert list(jobs) == ["a", "b"] and sum(jobs.values()) == 80 and jobs["b"] > jobs["a"]


def test_compare_the_checkpoint_interval() -> None:
    document = _json(*EXAMPLE_ARGS, "--compare", "checkpointMinutes=0")
    (delta,) = document["compare"]["difference"]
    # Without checkpoints the sweeps lose all they ran (1,940 s and 1,880 s x 16 GPUs)
    # instead of 140 s and 80 s: 61,120 GPU-seconds instead of 3,520 (pretrain, 2,000 s x
    # 32 GPUs, would cost more: the same victims).
    assert delta["lost_gpu_hours_preemption"] == round((61120 - 3520) / 3600, 3)
