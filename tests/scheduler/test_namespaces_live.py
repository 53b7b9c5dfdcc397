"""`scheduler.namespaces` and the published queue ledger, on the real local control plane,
with the scheduler running as its own ServiceAccount (a token of it) under the rights the
spec renders: its Roles, ClusterRole and the not-served admission policy.

- a scheduler-plugins PodGroup gang in a namespace the spec does not list gets a
  `NamespaceNotServed` Warning and `PodScheduled=False` naming `scheduler.namespaces`,
  and is never bound; the same scheduler identity is refused any other status write there;
- a gang in a second, listed namespace is bound;
- a gang whose pods carry no queue label, admitted through its PodGroup's queue, counts in
  the ledger, and `trainmaster status` shows the scheduler's own numbers, fair sharing
  (share, entitlement, used against nominal) included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.conftest import LocalCluster
from tests.scheduler.live import (
    Scratch,
    add_ready_nodes,
    applied,
    is_guardrail,
    namespaces,
    processes,
    scratch_spec,
    start_as_its_account,
    wait_for,
)
from trainmaster.objects import build_scheduler
from trainmaster.spec import ClusterSpec
from trainmaster.status import collect_view

pytestmark = pytest.mark.integration

RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
              "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _spec(scratch: Scratch, served: str, queue: str) -> ClusterSpec:
    return scratch_spec(scratch, "ns", namespaces=[served],
                        queues=[{"name": "default"},
                                {"name": queue, "gpuQuota": 16, "cohort": queue,
                                 "fairSharing": {"weight": 3}},
                                {"name": f"{queue}-b", "gpuQuota": 16, "cohort": queue}],
                        fairSharing={"enable": True})


def _config(obj: dict[str, Any]) -> bool:
    """The scheduler's config ConfigMap."""
    return obj["kind"] == "ConfigMap" and "config.yaml" in (obj.get("data") or {})


def _scheduled(pod: Any) -> Any:
    return next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)


def _gang(scratch: Scratch, namespace: str, name: str, size: int,
          queue: str | None = None) -> list[str]:
    group: dict[str, Any] = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue} if queue else {}},
        "spec": {"minMember": size}}
    scratch.custom.create_namespaced_custom_object("scheduling.x-k8s.io", "v1alpha1",
                                                   namespace, "podgroups", group)
    names = [f"{name}-{i}" for i in range(size)]
    for pod in names:  # no queue label on the pods: the PodGroup's queue is theirs
        scratch.core.create_namespaced_pod(namespace, scratch.pod(pod, gpus=8, group=name))
    return names


def test_unserved_namespace_is_told_served_one_is_bound_and_status_reads_the_ledger(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    served, far = f"{scratch.namespace}-b", f"{scratch.namespace}-c"
    system = f"{scratch.namespace}-system"
    queue = f"research-{scratch.tag}"
    spec = _spec(scratch, served, queue)
    with namespaces(scratch, served, far, system):
        add_ready_nodes(scratch, [(f"n{i}", "leaf-a") for i in range(4)])
        # The scheduler's identity and rights as rendered, with its config: what
        # `trainmaster status` reads quotas, cohorts and weights from (deleted after too).
        rendered = [o for o in build_scheduler(spec)
                    if (o["kind"] in RBAC_KINDS and not is_guardrail(o)) or _config(o)]
        with applied(scratch, rendered, delete=_config), processes() as procs:
            kubeconfig = start_as_its_account(procs, local_cluster.kubeconfig, scratch, spec,
                                              system, tmp_path)
            told = _gang(scratch, far, "far", 2)
            # The not-served policy narrows what RBAC grants (pods/status patch
            # everywhere), and the API server puts a new policy in force asynchronously.
            # Wait until a dry run of the write refused below is refused (a dry run
            # changes nothing), so that refusal is the policy's, not a race.
            as_scheduler = client.CoreV1Api(_sa_client(kubeconfig))
            ready = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
            wait_for(lambda: _refused_by_policy(as_scheduler, told[0], far, ready),
                     "the not-served admission policy in force", 60)
            bound_b = _gang(scratch, served, "team", 2)
            ledgered = _gang(scratch, scratch.namespace, "train", 2, queue=queue)

            def placed(ns: str, names: list[str]) -> bool:
                pods = scratch.core.list_namespaced_pod(ns).items
                return {p.metadata.name for p in pods if p.spec.node_name} == set(names)

            wait_for(lambda: placed(served, bound_b), "the served namespace's gang bound", 180)
            wait_for(lambda: placed(scratch.namespace, ledgered), "the training gang bound", 180)

            def conditions() -> dict[str, Any] | None:
                pods = scratch.core.list_namespaced_pod(far).items
                conds = {p.metadata.name: _scheduled(p) for p in pods}
                return conds if all(c is not None for c in conds.values()) \
                    and set(conds) == set(told) else None

            conds = wait_for(conditions, "PodScheduled conditions in the unserved namespace", 180)
            for cond in conds.values():
                assert (cond.status, cond.reason) == ("False", "NamespaceNotServed")
                assert "scheduler.namespaces" in cond.message and far in cond.message

            def events() -> set[tuple[str, str]] | None:
                found = {(e.involved_object.kind, e.involved_object.name)
                         for e in scratch.core.list_namespaced_event(far).items
                         if e.reason == "NamespaceNotServed" and e.type == "Warning"}
                want = {("Pod", n) for n in told} | {("PodGroup", "far")}
                return found if found == want else None

            wait_for(events, "NamespaceNotServed Events on the pods and their PodGroup", 180)
            assert not placed(far, told) and not any(
                p.spec.node_name for p in scratch.core.list_namespaced_pod(far).items)

            # The same identity may not write anything else of a pod status there.
            with pytest.raises(client.ApiException) as refused:
                as_scheduler.patch_namespaced_pod_status(told[0], far, ready)
            assert refused.value.status in (403, 422)
            assert "PodScheduled" in str(refused.value.body)

            # The ledger: 16 GPUs of the unlabelled gang in its PodGroup's queue.
            metric = f'trainmaster_scheduler_queue_gpus_in_use{{queue="{queue}"}}'
            wait_for(lambda: procs[0].metrics().get(metric) == 16, "the queue gauge at 16", 180)

            def status_rows() -> dict[str, tuple[int, int | None, int]] | None:
                view = collect_view(local_cluster.kubeconfig)
                rows = {q.name: (q.in_use, q.nominal_quota, q.borrowed) for q in view.queues}
                ok = view.queues_from == "scheduler ledger" and rows.get(queue, (0,))[0] == 16
                return rows if ok else None

            rows = wait_for(status_rows, "trainmaster status to show the ledger", 180)
            assert rows[queue] == (16, 16, 0)
            assert rows[queue][0] == procs[0].metrics()[metric]
            # Its fair sharing, from the scheduler's config and its published ledger: the
            # queue holds its nominal 16 (share 0), entitled to 3/4 of the cohort.
            view = collect_view(local_cluster.kubeconfig)
            assert view.fairness is not None
            nodes = {(n["kind"], n["name"]): n for n in view.fairness["nodes"]}
            mine, other = nodes[("queue", queue)], nodes[("queue", f"{queue}-b")]
            assert (mine["share"], mine["entitlement"], mine["held"]) == (0.0, 0.75, 1.0)
            assert other["entitlement"] == 0.25 and nodes[("cohort", queue)]["children"] == [
                queue, f"{queue}-b"]
            gpu = next(r for r in mine["resources"] if r["name"] == "nvidia.com/gpu")
            assert (gpu["used"], gpu["nominal"], gpu["borrowed"], gpu["lent"]) == (16, 16, 0, 0)


def _refused_by_policy(api: client.CoreV1Api, pod: str, namespace: str,
                       patch: dict[str, Any]) -> bool:
    try:
        api.patch_namespaced_pod_status(pod, namespace, patch, dry_run="All")
    except client.ApiException as err:
        return err.status in (403, 422) and "PodScheduled" in str(err.body)
    return False


def _sa_client(kubeconfig: Path) -> client.ApiClient:
    from trainmaster.kubeclient import generated_client

    return generated_client(kubeconfig)
