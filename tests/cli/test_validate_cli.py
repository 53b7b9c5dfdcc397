"""`trainmaster validate` says what the system will do, at the right line, through the
installed entry point: jobs that could never start, unions blamed on the right member,
quantities with their fix, duplicates at the duplicate, and `--queues` files with lines."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.cli.entry import run
from tests.helpers import stack_doc, write_spec


def _validate(tmp_path: Path, doc: dict[str, Any]) -> str:
    proc = run("validate", str(write_spec(tmp_path / "spec.yaml", doc)))
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stderr


def _line_of(path: Path, needle: str, after: int = 0) -> int:
    lines = path.read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if i >= after and needle in line)


def _research_job(doc: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return next((i, j) for i, j in enumerate(doc["jobs"]) if j["queue"] == "research")


def test_a_queue_with_quota_0_holding_jobs_is_invalid(tmp_path: Path) -> None:
    doc = stack_doc()
    queue = next(q for q in doc["scheduler"]["queues"] if q["name"] == "research")
    queue["gpuQuota"] = 0
    i, job = _research_job(doc)
    gpus = job["nodes"] * job["gpusPerPod"]
    err = _validate(tmp_path, doc)
    assert (f"jobs[{i}].queue: the job needs {gpus} GPUs, queue 'research' can never hold "
            "more than 0") in err


def test_a_job_larger_than_quota_plus_borrowing_says_what_the_simulator_says(
        tmp_path: Path) -> None:
    doc = stack_doc()
    i, job = _research_job(doc)
    gpus = job["nodes"] * job["gpusPerPod"]
    doc["scheduler"]["queues"] = [
        {"name": "default"},
        {"name": "research", "nominalQuota": gpus // 4, "cohort": "all",
         "borrowingLimit": gpus // 4},
        {"name": "prod", "nominalQuota": gpus, "cohort": "all"},
    ]
    err = _validate(tmp_path, doc)
    words = f"the job needs {gpus} GPUs, queue 'research' can never hold more than {gpus // 2}"
    assert f"jobs[{i}].queue: {words}" in err
    # The simulator refuses the same job with the same words.
    queues = tmp_path / "queues.yaml"
    write_spec(queues, {"queues": doc["scheduler"]["queues"]})
    trace = tmp_path / "trace.csv"
    trace.write_text("id,submit_s,duration_s,pods,gpus_per_pod,queue\n"
                     f"j1,0,60,{job['nodes']},{job['gpusPerPod']},research\n")
    sim = run("simulate", "--nodes", "8", "--queues", str(queues), "--trace", str(trace))
    assert sim.returncode == 1 and words in sim.stderr, sim.stderr


def test_topology_mode_is_blamed_on_the_mode_with_the_choices(tmp_path: Path) -> None:
    doc = stack_doc()
    doc["jobs"][0]["topology"] = {"mode": "require"}
    err = _validate(tmp_path, doc)
    assert 'jobs[0].topology.mode: "require" is not one of required, preferred' in err
    assert "did you mean `required`?" in err
    assert "null" not in err


@pytest.mark.parametrize(("given", "binary", "decimal"),
                         [("10Gb", "10Gi", "10G"), ("512MB", "512Mi", "512M"),
                          ("2kb", "2Ki", "2k")])
def test_a_quantity_with_a_byte_suffix_suggests_both_fixes(
        tmp_path: Path, given: str, binary: str, decimal: str) -> None:
    doc = stack_doc()
    doc["jobs"][0]["memoryPerPod"] = given
    err = _validate(tmp_path, doc)
    assert (f'jobs[0].memoryPerPod: "{given}" is not a quantity: did you mean `{binary}` '
            f"(binary) or `{decimal}` (decimal)?") in err


def test_a_duplicate_job_name_is_reported_at_the_duplicates_line(tmp_path: Path) -> None:
    doc = stack_doc()
    doc["jobs"].append(dict(doc["jobs"][0]))
    dup = len(doc["jobs"]) - 1
    err = _validate(tmp_path, doc)
    path = tmp_path / "spec.yaml"
    jobs_start = _line_of(path, "jobs:")
    names = [i + 1 for i, line in enumerate(path.read_text().splitlines())
             if i >= jobs_start and re.match(rf"\s*-?\s*name: {doc['jobs'][0]['name']}$", line)]
    assert f"{path}:{names[-1]}: jobs[{dup}].name: job name" in err
    assert "(first by jobs[0])" in err


def test_queues_file_errors_carry_line_numbers(tmp_path: Path) -> None:
    queues = tmp_path / "queues.yaml"
    queues.write_text("queues:\n  - name: a\n    nominalQuota: 8\n  - name: b\n"
                      "    nominalQuota: -1\npreemption: true\nbogus: 1\n")
    proc = run("simulate", "--nodes", "4", "--synthetic", "--queues", str(queues))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{queues}:5: queues[1].nominalQuota:" in proc.stderr \
        or f"{queues}:7: bogus: unknown key" in proc.stderr
    queues.write_text("queues:\n  - name: a\n    nominalQuota: -1\n")
    proc = run("simulate", "--nodes", "4", "--synthetic", "--queues", str(queues))
    assert f"{queues}:3: queues[0].nominalQuota: Input should be greater than or equal to 0" \
        in proc.stderr, proc.stderr


def test_validate_and_render_read_stdin() -> None:
    spec = Path("stacks/dev/cluster.yaml").read_text()
    proc = run("validate", "-", stdin=spec)
    assert proc.returncode == 0 and proc.stdout.startswith("<stdin>: valid"), proc.stderr
    proc = run("render", "-", stdin=spec)
    assert proc.returncode == 0 and "kind: TrainingJob" in proc.stdout, proc.stderr
    proc = run("validate", "-", stdin="kind: [\n")
    assert proc.returncode == 2 and proc.stderr.startswith("error: <stdin>:"), proc.stderr
