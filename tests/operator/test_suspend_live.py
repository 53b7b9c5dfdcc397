"""On the real control plane, with the operator running: `trainmaster jobs suspend` (the
installed CLI) stops a running gang, deleting its Job, pods and PodGroup and keeping its
checkpoint; `trainmaster jobs resume` restarts it from that checkpoint, not counted as a
restart; `trainmaster jobs list` shows both states."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.cli.entry import run, target_line
from tests.operator.kit import OperatorEnv, job_doc, wait_for
from trainmaster.api import JOB_LABEL

pytestmark = pytest.mark.integration


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}


def _podgroups(env: OperatorEnv, name: str) -> list[str]:
    items = env.custom.list_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", env.namespace, "podgroups",
        label_selector=f"{JOB_LABEL}={name}")["items"]
    return [g["metadata"]["name"] for g in items if not g["metadata"].get("deletionTimestamp")]


def _condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == kind)


def _listed(env: OperatorEnv, name: str) -> dict[str, Any]:
    proc = run("jobs", "list", "-n", env.namespace, "--json", "--kubeconfig",
               str(env.kubeconfig))
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    return rows[name]


def test_suspend_removes_the_gang_and_keeps_the_checkpoint_resume_restarts_from_it(
        env: OperatorEnv) -> None:
    name = f"sj-{env.namespace[-8:]}"  # unique: `suspend` finds it by name cluster-wide
    env.create_job(job_doc(name, nodes=2))
    env.wait_gang_running(name, 0, 2)
    env.wait_phase(name, "Running")
    env.report_checkpoint(name, f"/checkpoints/{name}/step-120", 120)
    row = _listed(env, name)
    assert (row["phase"], row["suspended"], row["step"]) == ("Running", False, 120)

    proc = run("jobs", "suspend", name, "--wait", "90", "--kubeconfig", str(env.kubeconfig))
    assert proc.returncode == 0, proc.stderr
    assert target_line(proc) is not None and "from --kubeconfig" in proc.stderr
    assert (f"suspended {env.namespace}/{name}: the operator deletes its gang; checkpoint "
            f"/checkpoints/{name}/step-120 is kept") in proc.stderr
    status = env.status(name)
    assert status["phase"] == "Suspended"
    cond = _condition(status, "Suspended")
    assert (cond["status"], cond["reason"]) == ("True", "JobSuspended")
    assert f"a resume starts from the checkpoint /checkpoints/{name}/step-120" in \
        cond["message"]
    # Nothing of the gang is left: no Job, no pod, no PodGroup (its GPUs and its place in
    # the queue are free); the checkpoint is kept.
    wait_for(lambda: not env.pods(name) and not env.jobs(name) and not _podgroups(env, name),
             "the suspended gang's Job, pods and PodGroup gone")
    assert status["lastCheckpoint"]["path"] == f"/checkpoints/{name}/step-120"
    wait_for(lambda: env.events("Suspended"), "the Suspended Event")
    time.sleep(3)  # several looks of the operator: a suspended job stays without a gang
    assert not env.jobs(name) and not env.pods(name)
    row = _listed(env, name)
    assert (row["phase"], row["suspended"]) == ("Suspended", True)
    again = run("jobs", "suspend", name, "-n", env.namespace, "--kubeconfig",
                str(env.kubeconfig))
    assert again.returncode == 0 and "is already suspended" in again.stderr

    proc = run("jobs", "resume", name, "-n", env.namespace, "--wait", "90", "--kubeconfig",
               str(env.kubeconfig))
    assert proc.returncode == 0, proc.stderr
    pods = env.wait_gang_running(name, 1, 2)
    for pod in pods:
        assert _env(pod)["TRAINMASTER_RESUME_FROM"] == f"/checkpoints/{name}/step-120"
    status = env.wait_phase(name, "Running")
    assert (status["attempt"], status["restarts"]) == (1, 0)  # not counted
    assert status["resumeFrom"] == f"/checkpoints/{name}/step-120"
    assert status["restartHistory"][-1]["cause"] == "Resumed"
    cond = _condition(status, "Suspended")
    assert (cond["status"], cond["reason"]) == ("False", "JobResumed")
    (event,) = wait_for(lambda: env.events("Resumed"), "the Resumed Event")
    assert f"new gang {name}-r1, resuming from /checkpoints/{name}/step-120" in \
        event["message"]
    assert _listed(env, name)["suspended"] is False


def test_an_unknown_job_is_one_error_line(env: OperatorEnv) -> None:
    proc = run("jobs", "suspend", "no-such-job", "-n", env.namespace, "--kubeconfig",
               str(env.kubeconfig))
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        f"error: no TrainingJob no-such-job in namespace {env.namespace} "
        "(`trainmaster jobs list`)")
