"""`trainmaster simulate` end to end: JSON shape, report files, errors with exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmaster.cli import main

KEYS = ["policy", "gpu_allocation", "wait_p50_s", "wait_p95_s", "wait_p95_large_s",
        "jct_mean_s", "gangs_split_beyond_needed", "fragmentation", "preemptions", "ettr",
        "jobs_finished", "gpu_allocation_waiting", "gpu_allocation_run", "span_s", "waiting_s",
        "lost_gpu_hours_preemption", "lost_gpu_hours_failures", "node_failures", "restarts"]


def test_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--nodes", "40", "--synthetic", "--jobs", "60", "--seed", "2",
               "--node-mtbf-hours", "200", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["nodes", "gpus", "jobs", "wall_seconds", "results"]
    assert (out["nodes"], out["gpus"], out["jobs"]) == (40, 320, 60)
    assert [r["policy"] for r in out["results"]] == ["trainmaster", "first-fit", "spread",
                                                     "slurm-tree"]
    for r in out["results"]:
        assert list(r) == [*KEYS, "retries"]
        assert r["jobs_finished"] == 60 and r["preemptions"] == 0
        retries = r["retries"]  # every job arrived: each counted once as new
        assert retries["wakeups"]["new"] >= 60 and retries["tried"] >= 60


def test_trace_table_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("id,submit_s,duration_s,pods,gpus_per_pod,queue,priority,topology\n"
                     "a,0,100,1,8,,,\nb,5,50,4,8,,,required:leaf\nc,6,70,64,8,,2,\n")
    rc = main(["simulate", "--nodes", "100", "--trace", str(trace), "--policy",
               "trainmaster,spread", "--report", str(tmp_path / "rep")])
    assert rc == 0
    captured = capsys.readouterr()
    assert "trainmaster" in captured.out and "spread" in captured.out
    assert "100 nodes, 800 GPUs, 3 jobs" in captured.err
    for name in ("allocation.png", "wait_cdf.png", "fragmentation.png", "index.html"):
        assert (tmp_path / "rep" / name).stat().st_size > 1000
    page = (tmp_path / "rep" / "index.html").read_text()
    assert '<img src="wait_cdf.png"' in page and '<th scope="row">spread</th>' in page


def test_bad_trace_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("id,submit_s,duration_s,pods,gpus_per_pod\na,0,10,1,8\nb,0,ten,1,8\n")
    rc = main(["simulate", "--nodes", "4", "--trace", str(trace)])
    err = capsys.readouterr().err
    assert rc == 1
    assert f"{trace}:3: column 'duration_s'" in err and "Traceback" not in err


def test_job_that_can_never_run_exits_1(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "big.csv"
    trace.write_text("id,submit_s,duration_s,pods,gpus_per_pod,queue,priority,topology\n"
                     "a,0,10,21,8,,,required:leaf\n")
    rc = main(["simulate", "--nodes", "100", "--trace", str(trace)])
    assert rc == 1
    assert "job 'a' (line 2): needs 168 GPUs, any leaf has at most 160" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "--synthetic"],
        ["simulate", "--nodes", "4"],
        ["simulate", "--nodes", "4", "--synthetic", "--policy", "best"],
        ["simulate", "--nodes", "4", "--synthetic", "--elastic", "sometimes"],
        ["simulate", "--nodes", "4", "--synthetic", "--scaling-exponent", "2"],
        ["simulate", "--nodes", "4", "--synthetic", "--elastic-share", "1.5"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    assert main(args) == 2


def test_convert_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "cluster_log.csv"
    source.write_text("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
                      "end_time,duration,queue\n"
                      "7,u,vc1,8,8,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,"
                      "2020-06-09 18:51:01,600,0\n")
    rc = main(["simulate", "convert", "--from", "helios", str(source), str(tmp_path / "o.csv")])
    assert rc == 0
    assert "wrote 1 jobs" in capsys.readouterr().err
    assert (tmp_path / "o.csv").read_text().splitlines() == [
        "id,submit_s,duration_s,pods,gpus_per_pod,queue", "7,0,600,1,8,vc1"]
    assert main(["simulate", "convert", "--from", "alibaba", str(source), "x"]) == 2


EXAMPLE = Path(__file__).parents[2] / "examples" / "simulate"


def test_spec_queues_from_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    # examples/simulate (docs/simulate.md): prod-train takes its quota back from the two
    # research sweeps that borrow it: they lose 140 s and 80 s x 16 GPUs since their
    # checkpoints at 1800 s.
    rc = main(["simulate", "--spec", str(EXAMPLE / "cluster.yaml"), "--trace",
               str(EXAMPLE / "jobs.csv"), "--policy", "trainmaster", "--json"])
    assert rc == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert list(result) == [*KEYS, "queues", "preemption", "retries"]
    assert result["preemptions"] == 2 and result["jobs_finished"] == 5
    # (140 + 80) s x 16 GPUs; prod-train is the one highest-priority required job
    assert result["preemption"] == {"lost_gpu_hours": round(3520 / 3600, 3),
                                    "required_high_priority_jobs": 1,
                                    "required_high_priority_wait_mean_s": 0.0}
    assert [(q["queue"], q["nominal_quota"], q["jobs"], q["preempted"])
            for q in result["queues"]] == [("research", 32, 3, 2), ("prod", 32, 2, 0)]


def test_queues_file_with_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    queues = tmp_path / "queues.yaml"
    queues.write_text("preemption: true\nqueues:\n  - {name: default}\n")
    trace = tmp_path / "t.csv"
    trace.write_text("id,submit_s,duration_s,pods,gpus_per_pod,queue,priority\n"
                     "low,0,3600,2,8,,0\nhigh,1000,600,1,8,,10\n")
    rc = main(["simulate", "--nodes", "2", "--trace", str(trace), "--queues", str(queues),
               "--policy", "trainmaster", "--checkpoint-minutes", "5", "--json"])
    assert rc == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    assert result["preemptions"] == 1 and result["queues"][0]["preempted"] == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("queues:\n  - {name: a, borrowingLimit: 4}\n",
         "queues[0].borrowingLimit: borrowing needs a cohort"),
        ("queues:\n  - {name: a, nominalQuota: -1}\n",
         "queues[0].nominalQuota: Input should be greater than or equal to 0"),
        ("queues: []\npriority: 3\n", "priority: unknown key"),
        ("- a\n", "a queues file is a mapping with `queues:`"),
    ],
)
def test_bad_queues_file_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 text: str, message: str) -> None:
    queues = tmp_path / "queues.yaml"
    queues.write_text(text)
    rc = main(["simulate", "--nodes", "2", "--synthetic", "--jobs", "5", "--queues",
               str(queues)])
    err = capsys.readouterr().err
    assert rc == 1 and message in err and "Traceback" not in err


def test_unknown_queue_names_file_line_and_column(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("id,submit_s,duration_s,pods,gpus_per_pod,queue\n"
                     "a,0,10,1,8,research\nb,0,10,1,8,nope\n")
    rc = main(["simulate", "--spec", str(EXAMPLE / "cluster.yaml"), "--trace", str(trace)])
    err = capsys.readouterr().err
    assert rc == 1
    assert (f"{trace}:3: column 'queue': 'nope' is not a queue of "
            f"{EXAMPLE / 'cluster.yaml'} scheduler.queues: add it there or use one of prod, "
            "research") in err


def test_queues_with_spec_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["simulate", "--spec", str(EXAMPLE / "cluster.yaml"), "--synthetic",
                 "--queues", str(tmp_path / "q.yaml")]) == 2


def test_report_has_a_per_queue_table(tmp_path: Path) -> None:
    rc = main(["simulate", "--spec", str(EXAMPLE / "cluster.yaml"), "--trace",
               str(EXAMPLE / "jobs.csv"), "--policy", "trainmaster", "--report",
               str(tmp_path / "rep")])
    assert rc == 0
    page = (tmp_path / "rep" / "index.html").read_text()
    assert "<h2>Per queue</h2>" in page and "<th scope=\"col\">preemptions</th>" in page
    assert "<td>research</td><td>32</td><td>3</td>" in page and "[{" not in page


def test_the_report_wears_the_ui_look(tmp_path: Path) -> None:
    """The report page is rendered from the UI's templates: the same head and masthead
    as a view `trainmaster ui` serves, and the same stylesheet, copied beside it."""
    import http.client
    import re

    from trainmaster.bench import served
    from trainmaster.ui import FixedSource, World, create_app

    assert main(["simulate", "--spec", str(EXAMPLE / "cluster.yaml"), "--trace",
                 str(EXAMPLE / "jobs.csv"), "--policy", "trainmaster", "--report",
                 str(tmp_path / "rep")]) == 0
    page = (tmp_path / "rep" / "index.html").read_text()
    with served(create_app(FixedSource(World()))) as port:
        def get(path: str) -> str:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", path)
            return conn.getresponse().read().decode()

        view, css = get("/queues"), get("/static/ui.css")
    assert (tmp_path / "rep" / "ui.css").read_text() == css
    assert '<link rel="stylesheet" href="ui.css">' in page

    def masthead(html: str) -> str:
        match = re.search(r"<header>\n<nav aria-label=\"Views\">\n<strong>trainmaster</strong>"
                          r"\n.*?</nav>\n</header>", html, re.S)
        assert match, html[:1000]
        return re.sub(r"<a [^>]*>[^<]*</a>\n", "", match.group(0))

    assert masthead(page) == masthead(view)
    assert '<a href="index.html" aria-current="page">Simulation report</a>' in page
    assert re.search(r"<title>[^<]* · trainmaster</title>", page)
    assert '<table class="report" id="policies">' in page and "<caption>" in page


def test_missing_queues_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--nodes", "2", "--synthetic", "--queues", str(tmp_path / "no.yaml")])
    assert rc == 2 and "no.yaml: cannot read the file" in capsys.readouterr().err


def test_elastic_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "e.csv"
    trace.write_text("id,submit_s,duration_s,pods,gpus_per_pod,queue,priority,topology,min_pods\n"
                     "a,0,100,1,8,,,,\ne,10,200,2,8,,,,1\n")
    rc = main(["simulate", "--nodes", "2", "--trace", str(trace), "--policy", "trainmaster",
               "--elastic", "compare", "--json"])
    assert rc == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["policy"] for r in results] == ["trainmaster/elastic", "trainmaster/rigid"]
    elastic, rigid = (r["elastic"] for r in results)
    # by hand: tests/simulate/test_elastic.py (admitted at 1 pod at 10, grown at 100)
    assert (elastic["jobs"], elastic["jct_mean_s"], elastic["rescales"]) == (1, 275.0, 1)
    assert (rigid["jct_mean_s"], rigid["rescales"]) == (290.0, 0)
    assert elastic["rigid_jct_mean_s"] == rigid["rigid_jct_mean_s"] == 100.0
