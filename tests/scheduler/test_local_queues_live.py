"""Two teams in their own namespaces submit through their LocalQueues, on the real local
control plane with kwok nodes, and a fair-share preemption happens between them.

Everything runs under the rights the spec renders, as the identities that hold them:

- the scheduler runs as its own ServiceAccount (a token of it) with the rendered Roles,
  ClusterRole and admission policy, so it reads the LocalQueues of the team namespaces
  through its Role there;
- each team is a ServiceAccount of its namespace (`alice` in team A, `bob` in team B)
  bound, as a platform team binds its teams, to the rendered `<cluster>-queue-user`
  Role, and creates its Jobs and PodGroups with its own token; the API server refuses it
  another team's namespace, cluster-wide reads, pods and LocalQueue writes.

The queues: `alpha` and `beta` hold no quota of their own (nominalQuota 0) in cohort
`lab`, which holds 32 GPUs (the four 8-GPU nodes), fair sharing on with equal weights:
everything either team runs is borrowed. Team B's LocalQueue points at `beta`, team A's
at `alpha`. B fills the cohort with four one-pod gangs (share 32/32 = 1.0). A first names
a LocalQueue that does not exist (told `LocalQueueNotFound`, never bound), then its own:
its gang's share would be 8/32 = 0.25, at most B's 24/32 = 0.75 after losing one gang
(Kueue's LessThanOrEqualToFinalShare), so exactly one of B's gangs is preempted, whole,
with a `Preempted` Event saying why, and A's gang takes its node.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.conftest import LocalCluster
from tests.scheduler.live import (
    PODGROUPS,
    Scratch,
    add_ready_nodes,
    applied,
    ensure_crd,
    is_guardrail,
    namespaces,
    processes,
    scratch_spec,
    start_as_its_account,
    token_kubeconfig,
    wait_for,
)
from trainmaster.api import LOCAL_QUEUE_NOT_FOUND, LOCALQUEUE_KIND, POD_GROUP_LABEL, QUEUE_LABEL
from trainmaster.kubeclient import generated_client
from trainmaster.objects import build_scheduler
from trainmaster.objects._crds import localqueue_crd
from trainmaster.objects._local_queues import tenant_role_name
from trainmaster.spec import ClusterSpec

pytestmark = pytest.mark.integration

APPLIED = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
           "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", LOCALQUEUE_KIND}
LOCALQUEUES = ("trainmaster.io", "v1alpha1", "localqueues")


def _spec(scratch: Scratch, team_a: str, team_b: str) -> ClusterSpec:
    return scratch_spec(
        scratch, "lq", namespaces=[team_a, team_b],
        queues=[{"name": "default"},
                {"name": "alpha", "nominalQuota": 0, "cohort": "lab"},
                {"name": "beta", "nominalQuota": 0, "cohort": "lab"}],
        cohorts=[{"name": "lab", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 32}]}],
        fairSharing={"enable": True},
        localQueues=[{"name": "lq-a", "namespace": team_a, "clusterQueue": "alpha"},
                     {"name": "lq-b", "namespace": team_b, "clusterQueue": "beta"}])


def _bind_team(scratch: Scratch, spec: ClusterSpec, namespace: str, account: str) -> None:
    """What the platform team does for a team: its account, bound to the rendered Role."""
    scratch.core.create_namespaced_service_account(namespace, {"metadata": {"name": account}})
    client.RbacAuthorizationV1Api(scratch.api_client).create_namespaced_role_binding(
        namespace, {
            "metadata": {"name": f"{account}-queue-user"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": tenant_role_name(spec)},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        })


class Team:
    """A team's account, acting with its own token in its own namespace."""

    def __init__(self, kubeconfig: Path, namespace: str, scratch: Scratch) -> None:
        api_client = generated_client(kubeconfig)
        self.namespace = namespace
        self.scratch = scratch
        self.core = client.CoreV1Api(api_client)
        self.batch = client.BatchV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    def submit(self, name: str, queue: str, gpus: int = 8) -> None:
        """A one-pod gang: its PodGroup and a Job whose pod names it and the LocalQueue."""
        labels = {QUEUE_LABEL: queue}
        self.custom.create_namespaced_custom_object(*PODGROUPS[:2], self.namespace,
                                                    PODGROUPS[2], {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "labels": labels}, "spec": {"minMember": 1}})
        pod = self.scratch.pod(name, gpus=gpus)
        self.batch.create_namespaced_job(self.namespace, {
            "metadata": {"name": name},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 20, "template": {
                "metadata": {"labels": {**labels, POD_GROUP_LABEL: name}},
                "spec": {**pod["spec"], "restartPolicy": "Never"}}},
        })

    def pods(self, gang: str) -> list[Any]:
        return [p for p in self.core.list_namespaced_pod(self.namespace).items
                if (p.metadata.labels or {}).get(POD_GROUP_LABEL) == gang]

    def running(self) -> dict[str, tuple[str, str]]:
        """gang -> (pod uid, node) of its bound pods that are not being deleted."""
        return {p.metadata.labels[POD_GROUP_LABEL]: (p.metadata.uid, p.spec.node_name)
                for p in self.core.list_namespaced_pod(self.namespace).items
                if p.spec.node_name and not p.metadata.deletion_timestamp
                and POD_GROUP_LABEL in (p.metadata.labels or {})}

    def events(self, reason: str) -> list[Any]:
        return [e for e in self.core.list_namespaced_event(self.namespace).items
                if e.reason == reason]


def _refused(call: Any, *args: Any) -> int:
    with pytest.raises(client.ApiException) as err:
        call(*args)
    return int(err.value.status)


def test_two_teams_submit_through_local_queues_and_fair_sharing_preempts_between_them(
    local_cluster: LocalCluster, scratch: Scratch, tmp_path: Path
) -> None:
    team_a, team_b = f"{scratch.namespace}-a", f"{scratch.namespace}-b"
    system = f"{scratch.namespace}-system"
    spec = _spec(scratch, team_a, team_b)
    with namespaces(scratch, team_a, team_b, system):
        # The LocalQueue CRD, as `trainmaster apply` installs it.
        ensure_crd(scratch.api_client, localqueue_crd(), LOCALQUEUES, "LocalQueue")
        add_ready_nodes(scratch, [(f"{leaf}-{i}", leaf) for leaf in ("leaf-a", "leaf-b")
                                  for i in range(2)])
        # The scheduler's identity and rights, the LocalQueues and the team Roles, as
        # rendered.
        # Not the guardrails: with them the API server refuses the gang that names no
        # LocalQueue of its namespace (tests/scheduler/test_guards_live.py), and this test
        # is about what the scheduler says when one gets through (a LocalQueue deleted).
        rendered = [o for o in build_scheduler(spec) if o["kind"] in APPLIED
                    and not is_guardrail(o)]
        with applied(scratch, rendered), processes() as procs:
            _bind_team(scratch, spec, team_a, "alice")
            _bind_team(scratch, spec, team_b, "bob")
            admin = local_cluster.kubeconfig
            alice = Team(token_kubeconfig(admin, scratch, "alice", team_a,
                                          tmp_path / "alice.yaml"), team_a, scratch)
            bob = Team(token_kubeconfig(admin, scratch, "bob", team_b, tmp_path / "bob.yaml"),
                       team_b, scratch)

            # --- least privilege, asked of the real API server ----------------------
            mine = alice.custom.list_namespaced_custom_object(*LOCALQUEUES[:2], team_a,
                                                             LOCALQUEUES[2])["items"]
            assert [(q["metadata"]["name"], q["spec"]["clusterQueue"]) for q in mine] == [
                ("lq-a", "alpha")]
            assert _refused(alice.custom.list_namespaced_custom_object, *LOCALQUEUES[:2],
                            team_b, LOCALQUEUES[2]) == 403
            assert _refused(alice.custom.list_cluster_custom_object, *LOCALQUEUES) == 403
            assert _refused(alice.custom.patch_namespaced_custom_object, *LOCALQUEUES[:2],
                            team_a, LOCALQUEUES[2], "lq-a",
                            {"spec": {"clusterQueue": "beta"}}) == 403
            assert _refused(alice.batch.create_namespaced_job, team_b,
                            {"metadata": {"name": "x"}, "spec": {"template": {}}}) == 403
            assert _refused(alice.core.create_namespaced_pod, team_a,
                            scratch.pod("direct")) == 403
            assert _refused(alice.core.list_pod_for_all_namespaces) == 403

            # --- the scheduler, as its own ServiceAccount ------------------------------
            start_as_its_account(procs, admin, scratch, spec, system, tmp_path)

            # --- B borrows the whole cohort ---------------------------------------------
            b_gangs = [f"b{i}" for i in range(4)]
            for gang in b_gangs:
                bob.submit(gang, "lq-b")
            before = wait_for(lambda: (r := bob.running()) and set(r) == set(b_gangs) and r,
                              "team B's four gangs bound", 240)
            gauge = 'trainmaster_scheduler_queue_gpus_in_use{{queue="{}"}}'
            wait_for(lambda: procs[0].metrics().get(gauge.format("beta")) == 32,
                     "beta charged 32 GPUs", 120)

            # --- A names a LocalQueue its namespace does not have ------------------------
            alice.submit("a-lost", "nope")

            def told() -> list[Any] | None:
                pods = alice.pods("a-lost")
                conds = [next((c for c in p.status.conditions or []
                               if c.type == "PodScheduled"), None) for p in pods]
                return conds if pods and all(c is not None for c in conds) else None

            for cond in wait_for(told, "PodScheduled on the gang naming no LocalQueue", 180):
                assert (cond.status, cond.reason) == ("False", LOCAL_QUEUE_NOT_FOUND)
                assert f"LocalQueue {team_a}/nope not found" in cond.message
                assert "name one of lq-a" in cond.message
            # The team reads the Events itself (its Role allows it in its namespace).
            kinds = wait_for(lambda: {e.involved_object.kind
                                      for e in alice.events(LOCAL_QUEUE_NOT_FOUND)}
                             >= {"Pod", "PodGroup"} or None,
                             "LocalQueueNotFound Events on the pod and the PodGroup", 120)
            assert kinds
            assert all(not p.spec.node_name for p in alice.pods("a-lost"))

            # --- A through its own LocalQueue: fair sharing preempts one of B's gangs -----
            alice.submit("a1", "lq-a")
            placed = wait_for(lambda: alice.running().get("a1"), "team A's gang bound", 240)
            after = bob.running()
            gone = [g for g in b_gangs if after.get(g) != before[g]]
            assert len(gone) == 1, (before, after)  # exactly one gang, whole
            victim = gone[0]
            assert placed[1] == before[victim][1]  # A took the node B's victim left
            for gang in b_gangs:
                if gang != victim:
                    assert after[gang] == before[gang]  # the others untouched
            events = wait_for(lambda: bob.events("Preempted") or None,
                              "the Preempted Event in team B's namespace", 120)
            assert [(e.involved_object.kind, e.involved_object.name) for e in events] == [
                ("PodGroup", victim)]
            message = events[0].message
            assert f"preempted by {team_a}/a1" in message
            assert "queue alpha" in message and "fair sharing, its side's share" in message
            # B's Job recreated the evicted pod: it waits, since B is above its share.
            assert victim not in bob.running()
            wait_for(lambda: procs[0].metrics().get(gauge.format("alpha")) == 8
                     and procs[0].metrics().get(gauge.format("beta")) == 24,
                     "alpha charged 8 GPUs, beta 24", 120)
            assert "a-lost" not in alice.running()
