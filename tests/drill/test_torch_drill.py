"""The drill on the PyTorch job, without a cluster: its log lines (rank 0 alone logs the
steps, its resume line names the world size), where a new gang's recovery time went, and
which job of a stack is drilled with what restart policy."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers import STACKS
from trainmaster.cluster import ClusterError
from trainmaster.drill import drilled_job, spec_real_images, steppers, with_restart_policy
from trainmaster.drill._drill import _phases, _rank0_resumed
from trainmaster.drill._logs import RankLog, parse_cri_log
from trainmaster.image import torch_reference
from trainmaster.spec import load_spec

# What two pods of examples/transformer log after a restart; torchrun gave rank 0 to the
# second pod.
POD0 = ("2026-12-05T13:00:10.000000000Z stdout F rank 1 of 2: pid 7, torchrun restart 0, "
        "gloo on net1\n"
        "2026-12-05T13:00:11.000000000Z stdout F rank 1: resumed from /checkpoints/lm/step-40 "
        "at step 40 (world size 2)\n")
POD1 = ("2026-12-05T13:00:09.500000000Z stdout F rank 0 of 2: pid 9, torchrun restart 0, "
        "gloo on net1\n"
        "2026-12-05T13:00:10.500000000Z stdout F rank 0: resumed from /checkpoints/lm/step-40 "
        "at step 40 (world size 2)\n"
        "2026-12-05T13:00:12.000000000Z stdout F step 41 loss 2.5012\n"
        "2026-12-05T13:00:13.000000000Z stdout F step 42 loss 2.4901\n")
KILLED_AT = parse_cri_log("2026-12-05T13:00:00.000000000Z stdout F x\n")[0].time


def _logs() -> dict[int, RankLog | None]:
    return {0: RankLog("lm-r1-0", parse_cri_log(POD0)),
            1: RankLog("lm-r1-1", parse_cri_log(POD1))}


def test_rank_zeros_torch_lines_are_the_gangs_steps_and_resume() -> None:
    logs = _logs()
    assert logs[1] is not None and logs[0] is not None
    assert [s for _, s in logs[1].steps()] == [41, 42]
    assert logs[0].steps() == []  # the other ranks log no steps
    assert logs[0].resumed() == ("/checkpoints/lm/step-40", 40)
    assert logs[0].resumed(0) is None
    # Rank 0 is on the second pod: its resume line is the gang's.
    assert _rank0_resumed(logs) == ("/checkpoints/lm/step-40", 40)


def test_the_phases_of_a_new_gangs_recovery_come_from_its_pods_and_logs() -> None:
    pods = [{"status": {"containerStatuses": [
        {"state": {"running": {"startedAt": f"2026-12-05T13:00:0{second}Z"}}}]}}
        for second in (4, 6)]
    phases = dict(_phases(pods, _logs(), KILLED_AT))
    assert phases == {"containers_started": 6.0, "workers_up": 10.0, "resumed": 10.5}
    # A container not running yet, a pod whose worker is not up: those phases are left out.
    waiting = [{"status": {"containerStatuses": [{"state": {"waiting": {}}}]}}]
    logs = {0: RankLog("lm-r1-0", []), 1: _logs()[1]}
    assert dict(_phases(waiting, logs, KILLED_AT)) == {"resumed": 10.5}


def test_the_demo_stack_drills_its_torch_job_and_the_dev_stack_its_numpy_job() -> None:
    demo, dev = STACKS / "demo" / "cluster.yaml", STACKS / "dev" / "cluster.yaml"
    image = load_spec(demo).image.reference
    assert spec_real_images(demo) == {torch_reference(image)}
    assert drilled_job(demo) == "lm"
    assert spec_real_images(dev) is None
    assert drilled_job(dev) == "dp-example"
    jobs = {j.name: j for j in load_spec(demo).jobs}
    assert steppers(jobs["lm"]) == 1
    assert steppers(jobs["dp-example"]) == jobs["dp-example"].nodes == 2


def test_the_drilled_jobs_restart_policy_is_edited_for_the_run(tmp_path: Path) -> None:
    doc = yaml.safe_load((STACKS / "demo" / "cluster.yaml").read_text())
    edited = with_restart_policy(doc, "lm", backoff_seconds=0, hang_timeout_seconds=60)
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(edited, sort_keys=False))
    jobs = {j.name: j for j in load_spec(path).jobs}
    assert (jobs["lm"].restart_policy.backoff_seconds,
            jobs["lm"].restart_policy.hang_timeout_seconds) == (0, 60)
    assert jobs["lm"].restart_policy.max_restarts == 5  # the rest as it was
    assert jobs["dp-example"].restart_policy.backoff_seconds == 5  # other jobs untouched
    assert with_restart_policy(doc, "lm") == doc  # nothing given: nothing changed
    assert doc["jobs"][-1]["restartPolicy"]["backoffSeconds"] == 5  # a copy, not in place
    with pytest.raises(ClusterError, match="no job 'nope'"):
        with_restart_policy(doc, "nope", backoff_seconds=0)


def test_an_in_place_recoverys_phases_start_at_the_restarted_container() -> None:
    from trainmaster.drill._inplace import _phases as in_place_phases

    lines = [*parse_cri_log(POD0), *parse_cri_log(POD1)]
    restarted = {"status": {"containerStatuses": [
        {"state": {"running": {"startedAt": "2026-12-05T13:00:03Z"}}}]}}
    kept = {"status": {"containerStatuses": [
        {"state": {"running": {"startedAt": "2026-12-05T12:40:00Z"}}}]}}
    resumed_at = KILLED_AT + 10.5
    assert dict(in_place_phases([restarted, kept], lines, KILLED_AT, resumed_at)) == {
        "container_started": 3.0, "workers_up": 10.0, "resumed": 10.5}
    # A worker killed: no container started again.
    assert dict(in_place_phases([kept], lines, KILLED_AT, resumed_at)) == {
        "workers_up": 10.0, "resumed": 10.5}
