"""The tenancy guardrails on the real local control plane: each team acts with its own
token (a ServiceAccount holding the built-in `edit` role in its namespace), and the API
server holds its GPU work to its queue.

- refused, each with the field and what is allowed: the top PriorityClass,
  `default-scheduler`, another namespace's LocalQueue, no queue; in a Job as in a pod;
- a TrainingJob naming a priority its queue does not allow, or no queue of the cluster;
- passes: the team's own LocalQueue with its queue's class or none, a pod without GPUs
  on any scheduler, and the platform's own gang Job, whose pods the job controller
  creates under the same policy.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, dynamic

from tests.conftest import LocalCluster
from tests.helpers import STACKS
from tests.scheduler.live import (
    Scratch,
    applied,
    ensure_crd,
    namespaces,
    token_kubeconfig,
    wait_for,
)
from trainmaster.api import POD_GROUP_LABEL, QUEUE_LABEL
from trainmaster.kubeclient import generated_client
from trainmaster.objects import trainingjob_crd
from trainmaster.objects._guards import build_guards
from trainmaster.objects._jobs import build_gang, build_training_job, priority_class_name
from trainmaster.objects._scheduler import priority_classes
from trainmaster.spec import ClusterSpec

pytestmark = pytest.mark.integration

TRAININGJOBS = ("trainmaster.io", "v1alpha1", "trainingjobs")


def _spec(scratch: Scratch, team_a: str, team_b: str) -> ClusterSpec:
    doc = yaml.safe_load((STACKS / "dev" / "cluster.yaml").read_text())
    doc["metadata"].update(name=f"gd-{scratch.tag}", namespace=scratch.namespace)
    doc["scheduler"].update(
        name=scratch.scheduler, namespaces=[team_a, team_b],
        queues=[{"name": "default"},
                {"name": "alpha", "priority": 100},
                {"name": "beta", "priority": 100},
                {"name": "urgent", "priority": 1_000_000}],
        localQueues=[{"name": "lq-a", "namespace": team_a, "clusterQueue": "alpha"},
                     {"name": "lq-b", "namespace": team_b, "clusterQueue": "beta"}])
    # One job of the platform's own, with a priority of its own (a class of its own).
    job = next(j for j in doc["jobs"] if j["name"] == "bert-finetune")
    doc["jobs"] = [{**job, "queue": "alpha", "priority": 150, "datasets": []}]
    return ClusterSpec.model_validate(doc)


def _tenant(scratch: Scratch, admin: Path, namespace: str, account: str, out: Path,
            extra: list[dict[str, Any]] | None = None) -> client.ApiClient:
    """A team's ServiceAccount with `edit` in its namespace (and `extra` rules there)."""
    rbac = client.RbacAuthorizationV1Api(scratch.api_client)
    scratch.core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    subject = [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": f"{account}-edit"}, "subjects": subject,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "edit"}})
    if extra:
        rbac.create_namespaced_role(namespace, {"metadata": {"name": f"{account}-extra"},
                                                "rules": extra})
        rbac.create_namespaced_role_binding(namespace, {
            "metadata": {"name": f"{account}-extra"}, "subjects": subject,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": f"{account}-extra"}})
    return generated_client(token_kubeconfig(admin, scratch, account, namespace, out))


def _pod(scratch: Scratch, name: str, queue: str | None, klass: str | None = None,
         scheduler: str | None = None, gpus: bool = True) -> dict[str, Any]:
    body = scratch.pod(name)
    if queue:
        body["metadata"]["labels"][QUEUE_LABEL] = queue
    if klass:
        body["spec"]["priorityClassName"] = klass
    if scheduler:
        body["spec"]["schedulerName"] = scheduler
    if not gpus:
        body["spec"]["containers"][0]["resources"] = {}
    return body


def _job(pod: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": pod["metadata"]["name"]},
            "spec": {"backoffLimit": 0, "template": {
                "metadata": {"labels": pod["metadata"]["labels"]},
                "spec": {**pod["spec"], "restartPolicy": "Never"}}}}


def _refusal(call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(client.ApiException) as err:
        call(*args, **kwargs)
    assert err.value.status in (403, 422), err.value.body
    return str(err.value.body)


def test_a_team_cannot_leave_its_queue_and_the_platform_runs_as_before(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    team_a, team_b = f"{scratch.namespace}-a", f"{scratch.namespace}-b"
    spec = _spec(scratch, team_a, team_b)
    admin = local_cluster.kubeconfig
    top = priority_class_name(spec, "urgent")
    mine = priority_class_name(spec, "alpha")
    ensure_crd(scratch.api_client, trainingjob_crd(), TRAININGJOBS, "TrainingJob")
    with namespaces(scratch, team_a, team_b), \
            applied(scratch, [*priority_classes(spec), *build_guards(spec)]):
        alice = client.CoreV1Api(_tenant(scratch, admin, team_a, "alice",
                                         tmp_path / "alice.yaml"))
        alice_batch = client.BatchV1Api(alice.api_client)

        # Policies take effect asynchronously: wait until the API server enforces them
        # (a dry run changes nothing), and say how long that took.
        start = time.monotonic()

        def enforced() -> bool:
            try:
                alice.create_namespaced_pod(team_a, _pod(scratch, "probe", None),
                                            dry_run="All")
            except client.ApiException as err:
                return err.status in (403, 422)
            return False

        wait_for(enforced, "the guardrails in force", 60)
        print(f"guardrails in force after {time.monotonic() - start:.1f}s")

        # --- refused, each naming the field and what is allowed --------------------
        body = _refusal(alice.create_namespaced_pod, team_a,
                        _pod(scratch, "top", "lq-a", klass=top))
        assert f"spec.priorityClassName: {top} is not allowed in queue lq-a" in body
        assert f"use one of {mine}, {mine}-p150 (or none)" in body
        body = _refusal(alice.create_namespaced_pod, team_a,
                        _pod(scratch, "bypass", "lq-a", scheduler="default-scheduler"))
        assert f"spec.schedulerName: GPU work in namespace {team_a} must use schedulerName " \
               f"{scratch.scheduler}" in body
        body = _refusal(alice.create_namespaced_pod, team_a, _pod(scratch, "theirs", "lq-b"))
        assert f"metadata.labels[{QUEUE_LABEL}]: lq-b is not a LocalQueue of namespace " \
               f"{team_a}: name one of lq-a" in body
        body = _refusal(alice.create_namespaced_pod, team_a, _pod(scratch, "none", None))
        assert f"metadata.labels[{QUEUE_LABEL}]: GPU work must name a LocalQueue of " \
               f"namespace {team_a}: name one of lq-a" in body
        # A Job is held to the same rules, at once (not only its pods, later).
        body = _refusal(alice_batch.create_namespaced_job, team_a,
                        _job(_pod(scratch, "job-top", "lq-a", klass=top)))
        assert f"spec.template.spec.priorityClassName: {top} is not allowed" in body
        body = _refusal(alice_batch.create_namespaced_job, team_a,
                        _job(_pod(scratch, "job-bypass", "lq-a",
                                  scheduler="default-scheduler")))
        assert "spec.template.spec.schedulerName" in body
        # Relabelling a pod of its own to another namespace's queue is refused too.
        alice.create_namespaced_pod(team_a, _pod(scratch, "relabel", "lq-a"))
        body = _refusal(alice.patch_namespaced_pod, "relabel", team_a,
                        {"metadata": {"labels": {QUEUE_LABEL: "lq-b"}}})
        assert "lq-b is not a LocalQueue" in body

        # --- allowed ----------------------------------------------------------------
        alice.create_namespaced_pod(team_a, _pod(scratch, "own-class", "lq-a", klass=mine))
        alice.create_namespaced_pod(team_a, _pod(scratch, "no-gpu", None,
                                                 scheduler="default-scheduler", gpus=False))
        alice_batch.create_namespaced_job(team_a, _job(_pod(scratch, "job-ok", "lq-a",
                                                            klass=mine)))
        wait_for(lambda: [p for p in scratch.core.list_namespaced_pod(
            team_a, label_selector="job-name=job-ok").items],
            "the job controller to create job-ok's pod", 120)

        # --- TrainingJobs, in the cluster's namespace --------------------------------
        tj_rules = [{"apiGroups": ["trainmaster.io"], "resources": ["trainingjobs"],
                     "verbs": ["create", "get", "list"]}]
        carol = client.CustomObjectsApi(_tenant(scratch, admin, scratch.namespace, "carol",
                                                tmp_path / "carol.yaml", tj_rules))
        job = build_training_job(spec, spec.jobs[0])["spec"]

        def training_job(name: str, **fields: Any) -> dict[str, Any]:
            return {"apiVersion": "trainmaster.io/v1alpha1", "kind": "TrainingJob",
                    "metadata": {"name": name}, "spec": {**job, "name": name, **fields}}

        def create(body: dict[str, Any]) -> Any:
            return carol.create_namespaced_custom_object(*TRAININGJOBS[:2], scratch.namespace,
                                                         TRAININGJOBS[2], body, dry_run="All")

        wait_for(lambda: _refused_now(create, training_job("probe", queue="nope")),
                 "the TrainingJob guardrail in force", 60)
        body = _refusal(create, training_job("tj-top", queue="urgent", priority=999_999_999))
        assert "spec.priority: 999999999 renders PriorityClass" in body
        assert f"not allowed in queue urgent: leave priority unset or use a class of " \
               f"{top}" in body
        body = _refusal(create, training_job("tj-lost", queue="nope"))
        assert "spec.queue: nope is not a scheduler queue: name one of alpha, beta" in body
        create(training_job("tj-ok", queue="alpha", priority=150))
        create(training_job("tj-plain", queue="alpha"))

        # --- the platform's own gang: created by an administrator, as the operator
        # creates it; its pods come from the job controller and pass the same policy.
        dyn = dynamic.DynamicClient(scratch.api_client)
        gang = build_gang(spec, spec.jobs[0], 0)
        for obj in gang:
            dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).server_side_apply(
                body=obj, name=obj["metadata"]["name"], namespace=obj["metadata"]["namespace"],
                field_manager="trainmaster")
        name = next(o["metadata"]["name"] for o in gang if o["kind"] == "Job")
        pods = wait_for(lambda: scratch.core.list_namespaced_pod(
            scratch.namespace, label_selector=f"{POD_GROUP_LABEL}={name}").items or None,
            "the platform gang's pods created by the job controller", 120)
        assert pods[0].spec.priority_class_name == priority_class_name(spec, "alpha", 150)


def _refused_now(call: Any, body: dict[str, Any]) -> bool:
    try:
        call(body)
    except client.ApiException as err:
        return err.status in (403, 422)
    return False
