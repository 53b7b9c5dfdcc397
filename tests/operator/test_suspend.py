"""Suspend and resume, pure: the decision (spec.suspend against the status) and the status
patches they write. The real control plane runs them in test_suspend_live.py."""

from __future__ import annotations

from tests.operator.builders import (
    at,
    make_gang_job,
    make_job,
    make_pod,
    make_state,
    running_state,
)
from trainmaster.api import SUSPENDED
from trainmaster.objects import build_training_job
from trainmaster.operator import Action, Cause, JobState, decide, gang_view
from trainmaster.operator._status import restart_patch, start_patch, suspend_patch
from trainmaster.spec import Job


def _suspended(job: Job) -> Job:
    return job.model_copy(update={"suspend": True})


def _gang() -> object:
    return gang_view(0, [make_pod(0), make_pod(1)], [make_gang_job(0)])


def _after(state: JobState, patch: dict[str, object], generation: int | None = None
           ) -> JobState:
    return make_state(generation=generation or state.generation,
                      **{k: v for k, v in {**state.status, **patch}.items() if v is not None})


def test_a_running_job_with_suspend_set_is_suspended_even_though_its_generation_moved() -> None:
    state = running_state()  # gang built from generation 1; the suspend made it 2
    state = make_state(generation=2, **state.status)
    decision = decide(_suspended(make_job()), state, _gang(), {}, at(5))
    assert decision.action is Action.SUSPEND


def test_a_job_created_suspended_never_starts_until_resumed() -> None:
    empty = gang_view(0, [], [])
    assert decide(_suspended(make_job()), make_state(), empty, {}, at(0)).action \
        is Action.SUSPEND
    state = _after(make_state(), suspend_patch(make_state(), at(0)))
    assert state.suspended and not state.started
    # Resumed before it ever ran: an ordinary start, which clears Suspended.
    assert decide(make_job(), state, empty, {}, at(1)).action is Action.START
    started = _after(state, start_patch(state, at(1)))
    cond = started.condition("Suspended")
    assert cond is not None and cond["status"] == "False" and cond["reason"] == "JobResumed"


def test_suspend_writes_phase_and_condition_naming_the_checkpoint_once() -> None:
    state = running_state(lastCheckpoint={"path": "/ckpt/step-90", "step": 90},
                          nodes=["node-0", "node-1"])
    patch = suspend_patch(state, at(5))
    assert patch["phase"] == SUSPENDED and patch["nodes"] == []
    assert patch["runningSince"] is None
    cond = next(c for c in patch["conditions"] if c["type"] == "Suspended")
    assert (cond["status"], cond["reason"]) == ("True", "JobSuspended")
    assert "a resume starts from the checkpoint /ckpt/step-90" in cond["message"]
    running = next(c for c in patch["conditions"] if c["type"] == "Running")
    assert (running["status"], running["reason"]) == ("False", "JobSuspended")
    after = _after(state, patch)
    assert after.suspended
    assert suspend_patch(after, at(50)) == {}  # the passes while suspended write nothing


def test_resume_is_a_restart_from_the_newest_checkpoint_not_counted() -> None:
    state = running_state(restarts=1, attempt=1, resumeFrom="/ckpt/step-10",
                          lastCheckpoint={"path": "/ckpt/step-90", "step": 90})
    suspended = _after(state, suspend_patch(state, at(5)), generation=2)
    resumed = make_state(generation=3, **suspended.status)
    decision = decide(make_job(), resumed, gang_view(1, [], []), {}, at(10))
    assert decision.action is Action.RESTART and not decision.counted
    assert decision.fault is not None and decision.fault.cause is Cause.RESUMED
    assert "/ckpt/step-90" in decision.fault.message
    patch = restart_patch(resumed, decision, at(10))
    assert (patch["attempt"], patch["restarts"]) == (2, 1)
    assert patch["resumeFrom"] == "/ckpt/step-90"
    assert patch["gangGeneration"] == 3  # so the next pass sees no spec change
    assert patch["restartHistory"][-1]["cause"] == "Resumed"
    cond = next(c for c in patch["conditions"] if c["type"] == "Suspended")
    assert (cond["status"], cond["reason"]) == ("False", "JobResumed")
    assert "lastFailure" not in patch


def test_a_finished_job_is_not_suspended() -> None:
    done = running_state(phase="Succeeded")
    assert decide(_suspended(make_job()), done, gang_view(0, [], []), {}, at(1)).action \
        is Action.DONE


def test_suspend_renders_only_when_set() -> None:
    """A re-apply of the spec must not resume a job suspended by `trainmaster jobs`: the
    rendered TrainingJob leaves `suspend` out unless the spec sets it."""
    from tests.helpers import small_spec_doc
    from trainmaster.spec import validate_data

    spec = validate_data(small_spec_doc("s"), "s")
    job = make_job()
    assert "suspend" not in build_training_job(spec, job)["spec"]
    assert build_training_job(spec, _suspended(job))["spec"]["suspend"] is True
