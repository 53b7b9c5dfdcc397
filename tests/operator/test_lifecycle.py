"""A TrainingJob on the real control plane: its gang, its status, success, and deletion."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.operator.kit import OperatorEnv, job_doc, wait_for
from trainmaster.api import JOB_LABEL
from trainmaster.objects import (
    PODGROUP_GROUP,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    TRAININGJOB_GROUP,
    TRAININGJOB_PLURAL,
    TRAININGJOB_VERSION,
)

pytestmark = pytest.mark.integration


def _podgroups(env: OperatorEnv, name: str) -> list[str]:
    items = env.custom.list_namespaced_custom_object(
        PODGROUP_GROUP, PODGROUP_VERSION, env.namespace, PODGROUP_PLURAL,
        label_selector=f"{JOB_LABEL}={name}")["items"]
    return [i["metadata"]["name"] for i in items if not i["metadata"].get("deletionTimestamp")]


def test_a_trainingjob_runs_as_one_gang_it_owns(env: OperatorEnv) -> None:
    tj = env.create_job(job_doc("gpt", nodes=3))
    pods = env.wait_gang_running("gpt", 0, 3)
    status = env.wait_phase("gpt", "Running")

    assert status["attempt"] == 0 and status["restarts"] == 0
    assert status["gang"] == "gpt-r0"
    assert sorted(status["nodes"]) == sorted(p["spec"]["nodeName"] for p in pods)
    assert status["observedGeneration"] == tj["metadata"]["generation"]
    running = next(c for c in status["conditions"] if c["type"] == "Running")
    assert running["status"] == "True"

    job = env.batch.read_namespaced_job("gpt-r0", env.namespace)
    assert job.spec.completion_mode == "Indexed"
    assert job.spec.completions == job.spec.parallelism == 3
    service = env.core.read_namespaced_service("gpt", env.namespace)
    assert service.spec.cluster_ip == "None"
    env.core.read_namespaced_config_map("gpt-launch", env.namespace)
    assert _podgroups(env, "gpt") == ["gpt-r0"]
    for owned in (job, service):
        (ref,) = owned.metadata.owner_references
        assert (ref.kind, ref.name, ref.uid, ref.controller) == (
            "TrainingJob", "gpt", tj["metadata"]["uid"], True)
    # The job's own identity: its pods run as it, and it may report on this job only.
    assert {p["spec"]["serviceAccountName"] for p in pods} == {"gpt-trainer"}
    account = env.core.read_namespaced_service_account("gpt-trainer", env.namespace)
    rbac = client.RbacAuthorizationV1Api(env.core.api_client)
    role = rbac.read_namespaced_role("gpt-trainer", env.namespace)
    assert [(r.resources, r.resource_names, r.verbs) for r in role.rules] == [
        (["trainingjobs/status"], ["gpt"], ["get", "patch"])]
    binding = rbac.read_namespaced_role_binding("gpt-trainer", env.namespace)
    assert [(s.kind, s.name) for s in binding.subjects] == [("ServiceAccount", "gpt-trainer")]
    policy = client.NetworkingV1Api(env.core.api_client).read_namespaced_network_policy(
        "gpt-rendezvous", env.namespace)
    for owned in (account, role, binding, policy):
        assert [r.uid for r in owned.metadata.owner_references] == [tj["metadata"]["uid"]]
    env_vars = {e["name"]: e.get("value", "") for e in pods[0]["spec"]["containers"][0]["env"]}
    assert env_vars["TRAINMASTER_RESUME_FROM"] == ""
    assert env_vars["WORLD_SIZE"] == "24"


def test_a_gang_whose_pods_all_succeed_is_succeeded(env: OperatorEnv) -> None:
    env.create_job(job_doc("short", nodes=2))
    for pod in env.wait_gang_running("short", 0, 2):
        env.core.patch_namespaced_pod(pod["metadata"]["name"], env.namespace,
                                      {"metadata": {"labels": {"trainmaster.io/simulate":
                                                               "complete"}}})
    status = env.wait_phase("short", "Succeeded")
    assert status["restarts"] == 0
    assert any(c["type"] == "Succeeded" and c["status"] == "True" for c in status["conditions"])
    assert wait_for(lambda: env.events("Succeeded"), "the Succeeded Event")


def test_deleting_the_trainingjob_leaves_nothing_behind(env: OperatorEnv) -> None:
    env.create_job(job_doc("gone", nodes=2))
    env.wait_gang_running("gone", 0, 2)
    env.custom.delete_namespaced_custom_object(
        TRAININGJOB_GROUP, TRAININGJOB_VERSION, env.namespace, TRAININGJOB_PLURAL, "gone")

    def nothing_left() -> bool:
        selector = f"{JOB_LABEL}=gone"
        ns = env.namespace
        return not (
            env.pods("gone")
            or env.jobs("gone")
            or _podgroups(env, "gone")
            or env.core.list_namespaced_service(ns, label_selector=selector).items
            or env.core.list_namespaced_config_map(ns, label_selector=selector).items
            or env.core.list_namespaced_service_account(ns, label_selector=selector).items
        )

    wait_for(nothing_left, "garbage collection of every object of the job")


def test_an_invalid_spec_fails_with_the_reason(env: OperatorEnv) -> None:
    doc = job_doc("bad", nodes=2)
    doc["queue"] = "no-such-queue"
    env.create_job(doc)
    status = env.wait_phase("bad", "Failed")
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "InvalidSpec"
    assert "no-such-queue" in failed["message"]
    assert not env.jobs("bad")
    assert wait_for(lambda: env.events("InvalidSpec"), "the InvalidSpec Event")


def test_a_spec_change_rolls_a_new_gang_without_counting_a_restart(env: OperatorEnv) -> None:
    env.create_job(job_doc("gpt", nodes=2))
    env.wait_gang_running("gpt", 0, 2)
    env.report_checkpoint("gpt", "/checkpoints/gpt/step-7", 7)
    env.custom.patch_namespaced_custom_object(
        TRAININGJOB_GROUP, TRAININGJOB_VERSION, env.namespace, TRAININGJOB_PLURAL, "gpt",
        {"spec": {"env": {"NCCL_DEBUG": "INFO"}}}, _content_type="application/merge-patch+json")
    pods = env.wait_gang_running("gpt", 1, 2)
    env_vars = {e["name"]: e.get("value", "") for e in pods[0]["spec"]["containers"][0]["env"]}
    assert env_vars["NCCL_DEBUG"] == "INFO"
    assert env_vars["TRAINMASTER_RESUME_FROM"] == "/checkpoints/gpt/step-7"
    status = wait_for(lambda: (s := env.status("gpt")).get("observedGeneration") == 2 and s,
                      "observedGeneration 2")
    assert (status["attempt"], status["restarts"]) == (1, 0)
    # Events are written apart from the status: wait for the one, then none restarted.
    assert wait_for(lambda: env.events("SpecChanged"), "the SpecChanged Event")
    assert not env.events("Restarting")
