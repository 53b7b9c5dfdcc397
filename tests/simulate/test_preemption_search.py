"""The simulator's preemption: domain-freeing (least lost work) against the greedy order
of before, on a trace whose per-job checkpoint intervals (``checkpoint_s``) decide the
price; figures worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmaster.cli import main
from trainmaster.simulate import load_trace
from trainmaster.simulate._trace import TraceError

HEAD = "id,submit_s,duration_s,pods,gpus_per_pod,queue,priority,topology,min_pods,checkpoint_s\n"


def _trace(tmp_path: Path) -> tuple[Path, Path]:
    # 40 nodes: leaf-0 and leaf-1, 20 nodes of 8 GPUs each. 20 one-node batch jobs
    # (a checkpoint every 3,600 s) fill leaf-0; one 20-node research job (a checkpoint
    # every 600 s) fills leaf-1; both queues at priority 100. At 5,000 s a 20-node prod
    # job (priority 1000) needs a whole leaf.
    rows = [f"b{i},0,100000,1,8,batch,,required:leaf,,3600" for i in range(20)]
    rows.append("r0,1,100000,20,8,research,,required:leaf,,600")
    rows.append("p0,5000,1000,20,8,prod,,required:leaf,,600")
    trace = tmp_path / "t.csv"
    trace.write_text(HEAD + "\n".join(rows) + "\n")
    queues = tmp_path / "q.yaml"
    queues.write_text("queues:\n  - {name: batch, priority: 100}\n"
                      "  - {name: research, priority: 100}\n"
                      "  - {name: prod, priority: 1000}\n")
    return trace, queues


def test_domain_freeing_loses_less_than_the_greedy_order(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, queues = _trace(tmp_path)
    rc = main(["simulate", "--nodes", "40", "--queues", str(queues), "--trace", str(trace),
               "--policy", "trainmaster", "--preemption-search", "compare", "--json"])
    assert rc == 0
    results = {r["policy"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    domain, greedy = results["trainmaster/domain"], results["trainmaster/greedy"]
    # domain: evict r0 (started at 1 s, its last checkpoint 4,800 s of run time later):
    # 199 s x 160 GPUs lost
    assert domain["preemptions"] == 1
    assert domain["preemption"]["lost_gpu_hours"] == round(199 * 160 / 3600, 3)
    # greedy: cheapest gang first (each batch job loses 1,400 s x 8 GPUs, less than
    # r0), until a leaf frees: all 20 of them
    assert greedy["preemptions"] == 20
    assert greedy["preemption"]["lost_gpu_hours"] == round(20 * 1400 * 8 / 3600, 3)
    for r in (domain, greedy):  # p0 is the one high-priority required job: no wait
        assert r["preemption"]["required_high_priority_jobs"] == 1
        assert r["preemption"]["required_high_priority_wait_mean_s"] == 0.0
    assert main(["simulate", "--nodes", "40", "--queues", str(queues), "--trace",
                 str(trace), "--preemption-search", "best"]) == 2
    assert "--preemption-search must be one of" in capsys.readouterr().err


def test_checkpoint_s_is_read_and_checked(tmp_path: Path) -> None:
    trace = tmp_path / "c.csv"
    trace.write_text(HEAD + "a,0,100,1,8,,,,,900\nb,0,100,1,8,,,,,\n")
    a, b = load_trace(trace)
    assert (a.checkpoint_s, b.checkpoint_s) == (900.0, None)
    trace.write_text(HEAD + "a,0,100,1,8,,,,,-1\n")
    with pytest.raises(TraceError, match=r"c.csv:2: column 'checkpoint_s': checkpoint_s "
                       r"must be >= 0"):
        load_trace(trace)
