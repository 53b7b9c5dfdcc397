"""Every identity of every example stack, on the real control plane: it can do what
docs/security.md lists for it, and nothing dangerous.

Per stack (sequentially, each in its own namespaces and cluster name, cleaned up after):
1. apply the stack's rendered objects (build_all, the optional in-cluster UI on) as the
   administrator; workloads are not started (500 DaemonSet pods each would only load the
   machine): each pod template is instead created as a Pod with server-side dry run,
   which runs Pod Security admission;
2. as the operator (impersonated), apply each job's gang: its identity (ServiceAccount,
   Role, RoleBinding), NetworkPolicy, Service, ConfigMap, PodGroup, and the Indexed Job
   (dry run) — the API server's escalation check passes without `bind`/`escalate`;
3. SubjectAccessReview, table-driven: each identity of the dev stack has exactly the rights
   docs/security.md's hand-kept table lists (every verb on every resource probed); the
   dangerous actions are refused; the namespaces' `default` ServiceAccounts are refused
   every right any identity holds;
4. the NIC agent, as its pod's bound token presents it, writes its own node's status only;
5. the in-cluster UI's identity writes nothing and reads no Secret, and the UI run with its
   token and the Deployment's arguments lists all it watches and serves its pages; with a
   team namespace, it resolves a gang's LocalQueue and shows the scheduler's quota answer.
"""

from __future__ import annotations

import contextlib
import functools
import html
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml
from kubernetes import dynamic
from kubernetes.client.exceptions import ApiException

from tests.conftest import LocalCluster
from tests.helpers import STACKS
from tests.security.access import Access, Action
from tests.security.documented import (
    Right,
    documented_rights,
    for_cluster,
    with_optional_identities,
)
from trainmaster.api import FIELD_MANAGER, POD_GROUP_LABEL, QUEUE_LABEL
from trainmaster.apply import apply_objects
from trainmaster.kubeclient import (
    SyncKube,
    api_path,
    localqueue_path,
    node_path,
    pod_path,
    podgroup_path,
)
from trainmaster.kubeclient import generated_client as sync_client
from trainmaster.objects import (
    NODE_EVENT_NAMESPACE,
    TRAININGJOB_GROUP,
    Grant,
    build_all,
    build_gang,
    grants,
    service_accounts,
    system_namespace,
    ui_command,
    ui_name,
)
from trainmaster.objects._nodeagent import NODE_NAME_CLAIM, nic_agent_name
from trainmaster.polling import wait_until
from trainmaster.spec import ClusterSpec, load_spec
from trainmaster.status import ledger_entries, scheduler_configs, scheduler_queues
from trainmaster.ui import World, why_pending

pytestmark = pytest.mark.integration

STACK_NAMES = sorted(p.parent.name for p in STACKS.glob("*/cluster.yaml"))
WORKLOADS = {"Deployment", "DaemonSet", "StatefulSet", "Job"}


def isolated(stack: str) -> ClusterSpec:
    """The stack's spec with its own cluster name and namespace, so stacks (and other
    tests sharing the session cluster) never share an object; with its optional
    identities on (the in-cluster UI), so theirs are proven too."""
    spec = with_optional_identities(load_spec(STACKS / stack / "cluster.yaml"))
    meta = spec.metadata.model_copy(update={"name": f"sec-{stack}", "namespace": f"sec-{stack}"})
    return spec.model_copy(update={"metadata": meta})


def operator_account(spec: ClusterSpec) -> str:
    return f"{system_namespace(spec)}/{spec.metadata.name}-operator"


def _resource(client: dynamic.DynamicClient, obj: dict[str, Any]) -> Any:
    return client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])


def _apply(client: dynamic.DynamicClient, obj: dict[str, Any], dry_run: bool = False) -> None:
    kwargs: dict[str, Any] = {"dry_run": "All"} if dry_run else {}
    _resource(client, obj).server_side_apply(
        body=obj,
        name=obj["metadata"]["name"],
        namespace=obj["metadata"].get("namespace"),
        field_manager=FIELD_MANAGER,
        force_conflicts=True,
        **kwargs,
    )


def _pod_from(obj: dict[str, Any]) -> dict[str, Any]:
    template = obj["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{obj['metadata']['name']}-dry-run",
            "namespace": obj["metadata"]["namespace"],
            "labels": template["metadata"].get("labels", {}),
        },
        "spec": template["spec"],
    }


def _wait_default_accounts(core: kubernetes.client.CoreV1Api, namespaces: list[str]) -> None:
    """Pods (even dry-run ones) need their ServiceAccount; the controller creates
    `default` shortly after a namespace appears."""
    deadline = time.monotonic() + 60
    for ns in namespaces:
        while True:
            try:
                core.read_namespaced_service_account("default", ns)
                break
            except ApiException as exc:
                if exc.status != 404 or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)


class Deployed:
    """One stack on the cluster: its objects, its jobs' gangs, its identities."""

    def __init__(self, spec: ClusterSpec, kubeconfig: Path) -> None:
        self.spec = spec
        self.kubeconfig = kubeconfig
        self.parts = build_all(spec)
        self.objects = [o for objs in self.parts.values() for o in objs]
        self.gangs = {job.name: build_gang(spec, job, 0) for job in spec.jobs}
        self.access = Access(kubeconfig)
        self.pod_results: dict[str, str] = {}

    @property
    def all_objects(self) -> list[dict[str, Any]]:
        return self.objects + [o for gang in self.gangs.values() for o in gang]

    def deploy(self) -> None:
        static = [o for o in self.objects if o["kind"] not in WORKLOADS]
        apply_objects(self.kubeconfig, static)
        admin = dynamic.DynamicClient(sync_client(self.kubeconfig))
        core = kubernetes.client.CoreV1Api(sync_client(self.kubeconfig))
        _wait_default_accounts(core, [self.spec.metadata.namespace, system_namespace(self.spec)])
        for obj in self.objects:
            if obj["kind"] in WORKLOADS:
                _apply(admin, obj, dry_run=True)
        self.settle_rbac(static)
        # The gangs, as the operator creates them: as the operator.
        operator = self.access.client_as(operator_account(self.spec))
        for gang in self.gangs.values():
            for obj in gang:
                _apply(operator, obj, dry_run=obj["kind"] in WORKLOADS)
        self.settle_rbac(self.all_objects)
        for obj in self.all_objects:
            if obj["kind"] in WORKLOADS:
                pod = _pod_from(obj)
                try:
                    core.create_namespaced_pod(pod["metadata"]["namespace"], pod, dry_run="All")
                    self.pod_results[obj["metadata"]["name"]] = "admitted"
                except ApiException as exc:
                    self.pod_results[obj["metadata"]["name"]] = f"{exc.status}: {exc.body}"

    def settle_rbac(self, objects: list[dict[str, Any]], timeout: float = 30) -> None:
        """Wait (up to ``timeout``) until the API server's RBAC authorizer, which reads
        roles and bindings from its own cache, allows one action of every grant just
        applied: acting as an identity right after binding it may otherwise be refused.
        It never fails by itself: the tests check every right afterwards."""
        pending = [(g.account, _actions(g)[0]) for g in grants(objects)]
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            pending = [(a, act) for a, act in pending if not self.access.allowed(a, act)]
            if pending:
                time.sleep(0.5)

    def clean(self) -> None:
        api = sync_client(self.kubeconfig)
        core = kubernetes.client.CoreV1Api(api)
        rbac = kubernetes.client.RbacAuthorizationV1Api(api)
        sched = kubernetes.client.SchedulingV1Api(api)
        admission = kubernetes.client.AdmissionregistrationV1Api(api)
        for obj in self.objects:
            kind, name = obj["kind"], obj["metadata"]["name"]
            ns = obj["metadata"].get("namespace")
            try:
                if kind == "Namespace":
                    core.delete_namespace(name)
                elif kind == "ClusterRole":
                    rbac.delete_cluster_role(name)
                elif kind == "ClusterRoleBinding":
                    rbac.delete_cluster_role_binding(name)
                elif kind == "PriorityClass":
                    sched.delete_priority_class(name)
                elif kind == "ValidatingAdmissionPolicy":
                    admission.delete_validating_admission_policy(name)
                elif kind == "ValidatingAdmissionPolicyBinding":
                    admission.delete_validating_admission_policy_binding(name)
                elif ns == NODE_EVENT_NAMESPACE and kind == "Role":
                    rbac.delete_namespaced_role(name, ns)
                elif ns == NODE_EVENT_NAMESPACE and kind == "RoleBinding":
                    rbac.delete_namespaced_role_binding(name, ns)
            except ApiException as exc:
                if exc.status != 404:
                    raise


@pytest.fixture(scope="module", params=STACK_NAMES)
def deployed(request: pytest.FixtureRequest, local_cluster: LocalCluster) -> Iterator[Deployed]:
    made = Deployed(isolated(request.param), local_cluster.kubeconfig)
    try:
        made.deploy()
        yield made
    finally:
        made.clean()


# --- the table ------------------------------------------------------------------------


def _actions(grant: Grant) -> list[Action]:
    namespace = "" if grant.scope == "cluster" else grant.scope
    names = grant.names or ("",)
    return [
        Action(verb, grant.resource, grant.api_group, namespace, name)
        for verb in grant.verbs
        for name in names
    ]


def dangerous(spec: ClusterSpec, account: str, holds: list[Grant]) -> list[Action]:
    """What no identity may do (patching nodes: unless it fences, i.e. holds it)."""
    ns, system = spec.metadata.namespace, system_namespace(spec)
    actions = []
    for where in (ns, system, ""):
        actions += [
            Action("get", "secrets", "", where),
            Action("list", "secrets", "", where),
            Action("create", "pods", "", where),
            Action("create", "pods/exec", "", where, "any-pod"),
            Action("create", "pods/attach", "", where, "any-pod"),
            Action("create", "serviceaccounts/token", "", where, "default"),
        ]
    for kind in ("roles", "clusterroles"):
        for verb in ("bind", "escalate"):
            actions.append(Action(verb, kind, "rbac.authorization.k8s.io", ns))
            actions.append(Action(verb, kind, "rbac.authorization.k8s.io", ""))
    actions.append(Action("impersonate", "serviceaccounts", "", ns))
    actions.append(Action("create", "clusterrolebindings", "rbac.authorization.k8s.io"))
    fences = any(g.resource == "nodes" and "patch" in g.verbs for g in holds)
    if not fences:
        actions.append(Action("patch", "nodes", "", "", "any-node"))
    if account.endswith("-trainer"):
        own = account.split("/", 1)[1].removesuffix("-trainer")
        others = [j.name for j in spec.jobs if j.name != own] + ["someone-else"]
        for other in others:
            for verb in ("patch", "update", "get"):
                actions.append(Action(verb, "trainingjobs/status", TRAININGJOB_GROUP, ns, other))
            actions.append(Action("patch", "trainingjobs", TRAININGJOB_GROUP, ns, own))
    return actions


def test_pods_pass_pod_security(deployed: Deployed) -> None:
    """Each workload's pods are admitted in their namespace: restricted in -system."""
    assert deployed.pod_results, "no workloads rendered"
    refused = {k: v for k, v in deployed.pod_results.items() if v != "admitted"}
    assert refused == {}


def test_restricted_namespace_refuses_a_privileged_pod(deployed: Deployed) -> None:
    core = kubernetes.client.CoreV1Api(sync_client(deployed.kubeconfig))
    ns = system_namespace(deployed.spec)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "privileged", "namespace": ns},
        "spec": {
            "containers": [
                {"name": "c", "image": "busybox:1.36", "securityContext": {"privileged": True}}
            ]
        },
    }
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(ns, pod, dry_run="All")
    assert exc.value.status == 403 and "PodSecurity" in str(exc.value.body)


VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
CLUSTER_SCOPED = {"nodes", "nodes/status", "namespaces", "persistentvolumes",
                  "customresourcedefinitions", "clusterroles", "clusterrolebindings",
                  "priorityclasses", "validatingadmissionpolicies",
                  "validatingadmissionpolicybindings"}
# Probed besides the documented resources: what an identity must never quietly gain.
PROBED = {("", "secrets"), ("", "pods/exec"), ("", "serviceaccounts/token"),
          ("", "persistentvolumes"), ("", "namespaces"), ("", "configmaps"),
          ("rbac.authorization.k8s.io", "clusterrolebindings"),
          ("admissionregistration.k8s.io", "validatingadmissionpolicies")}


def _expected(rights: list[Right], account: str, action: Action) -> bool:
    """Whether the documented table allows `action` to `account`."""
    scope = action.namespace or "cluster"
    return any(
        r.account == account and r.api_group == action.group and r.resource == action.resource
        and action.verb in r.verbs and r.scope in ("cluster", scope)
        and (not r.names or action.name in r.names)
        for r in rights
    )


def _probes(rights: list[Right], namespaces: list[str]) -> list[Action]:
    """Every verb on every documented or probed resource, in every scope, by name where a
    right is limited to names (each such name, and one no right names)."""
    resources = {(r.api_group, r.resource) for r in rights} | PROBED
    names = {(r.api_group, r.resource): sorted(r.names) for r in rights if r.names}
    out = []
    for group, resource in sorted(resources):
        scopes = [""] if resource in CLUSTER_SCOPED else ["", *namespaces]
        for name in ["", *names.get((group, resource), []),
                     *(["someone-else"] if (group, resource) in names else [])]:
            out += [Action(verb, resource, group, where, name)
                    for verb in VERBS for where in scopes]
    return out


@pytest.mark.parametrize("deployed", ["dev"], indirect=True)
def test_every_identity_has_exactly_its_documented_rights(deployed: Deployed) -> None:
    """docs/security.md's hand-kept table, not the rendered bindings, says what each
    identity may do; the API server must allow exactly that: a right missing from the
    cluster, or one the table does not list, fails."""
    spec = deployed.spec
    ns, system = spec.metadata.namespace, system_namespace(spec)
    rights = for_cluster(documented_rights(), spec.metadata.name, ns)
    accounts = sorted({r.account for r in rights} | set(service_accounts(deployed.all_objects))
                      | {f"{ns}/default", f"{system}/default"})
    assert operator_account(spec) in accounts
    checks = [(account, action) for account in accounts
              for action in _probes(rights, [ns, system, "default"])]

    def differs(check: tuple[str, Action]) -> str | None:
        account, action = check
        allowed = deployed.access.allowed(account, action)
        if allowed == _expected(rights, account, action):
            return None
        return f"{account}: {action.describe()}: " + (
            "allowed, not documented" if allowed else "documented, refused")

    with ThreadPoolExecutor(8) as pool:
        wrong = sorted(filter(None, pool.map(differs, checks)))
    assert wrong == []
    assert len(checks) > 1000  # the probe covers every identity, resource, verb and scope


@pytest.mark.parametrize("deployed", ["dev"], indirect=True)
def test_nic_agent_writes_its_own_nodes_status_only(deployed: Deployed) -> None:
    """As the agent's pod on node A presents itself (its bound token carries node A's
    name): A's status is patched; B's is refused by the admission policy, though RBAC
    allows it; so is any node's without a node-bound token."""
    spec = deployed.spec
    agent = f"{spec.metadata.namespace}/{nic_agent_name(spec)}"
    admin = kubernetes.client.CoreV1Api(sync_client(deployed.kubeconfig))
    own, other = sorted(n.metadata.name for n in admin.list_node().items)[:2]
    on_own = kubernetes.client.CoreV1Api(
        deployed.access.api_client_as(agent, {NODE_NAME_CLAIM: own}))
    unbound = kubernetes.client.CoreV1Api(deployed.access.api_client_as(agent))
    body = {"status": {"conditions": [{
        "type": "NICHealthy", "status": "True", "reason": "PortsActive",
        "message": "tests/security", "lastHeartbeatTime": "2026-01-01T00:00:00Z",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    assert deployed.access.allowed(agent, Action("patch", "nodes/status", "", "", other))

    def refused(api: kubernetes.client.CoreV1Api, node: str) -> str | None:
        try:
            api.patch_node_status(node, body)
        except ApiException as exc:
            return f"{exc.status}: {exc.body}"
        return None

    # The policy is enforced once the API server has loaded it (about a second).
    message = wait_until(lambda: refused(on_own, other), "the own-node policy to apply", 30, 0.5)
    assert message.startswith("403") and f"not {other}" in message and own in message
    assert refused(on_own, own) is None
    assert (refused(unbound, own) or "").startswith("403")


def test_every_identity_is_refused_the_dangerous_actions(deployed: Deployed) -> None:
    held = grants(deployed.all_objects)
    accounts = service_accounts(deployed.all_objects)
    assert len(accounts) >= 2 + len(deployed.spec.jobs)
    allowed = [
        f"{account}: {a.describe()}"
        for account in accounts
        for a in dangerous(deployed.spec, account, [g for g in held if g.account == account])
        if deployed.access.allowed(account, a)
    ]
    assert allowed == []


def test_operator_fences_and_nobody_else_patches_nodes(deployed: Deployed) -> None:
    patch_node = Action("patch", "nodes", "", "", "any-node")
    may = [
        a for a in service_accounts(deployed.all_objects) if deployed.access.allowed(a, patch_node)
    ]
    assert may == [operator_account(deployed.spec)]


def test_default_service_accounts_have_nothing(deployed: Deployed) -> None:
    """Refused every right any identity of the stack holds, in either namespace."""
    spec = deployed.spec
    every = {a for g in grants(deployed.all_objects) for a in _actions(g)}
    allowed = [
        f"{ns}/default: {a.describe()}"
        for ns in (spec.metadata.namespace, system_namespace(spec))
        for a in every
        if deployed.access.allowed(f"{ns}/default", a)
    ]
    assert allowed == []


def test_operator_cannot_escalate(deployed: Deployed) -> None:
    """The escalation check that lets the operator create a job's Role refuses it a Role
    or binding with rights it lacks."""
    ns = deployed.spec.metadata.namespace
    operator = deployed.access.client_as(operator_account(deployed.spec))
    meta = {"namespace": ns}
    attempts: list[dict[str, Any]] = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {**meta, "name": "grab-admin"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {**meta, "name": "grab-secrets"},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
        },
    ]
    for obj in attempts:
        with pytest.raises(ApiException) as exc:
            _apply(operator, obj)
        assert exc.value.status == 403, obj["metadata"]["name"]


STACKS_WITH_TWO_JOBS = [name for name in STACK_NAMES
                        if len(load_spec(STACKS / name / "cluster.yaml").jobs) >= 2]


@pytest.mark.parametrize("deployed", STACKS_WITH_TWO_JOBS, indirect=True)
def test_trainer_patches_its_own_status_only(deployed: Deployed) -> None:
    """A real request as the trainer, not just a review: its own job's status goes
    through, another job's is forbidden (in every stack with two jobs or more)."""
    spec, ns = deployed.spec, deployed.spec.metadata.namespace
    assert len(spec.jobs) >= 2
    own, other = spec.jobs[0].name, spec.jobs[1].name
    trainer = deployed.access.client_as(f"{ns}/{own}-trainer")
    jobs = trainer.resources.get(api_version=f"{TRAININGJOB_GROUP}/v1alpha1", kind="TrainingJob")
    body = {"status": {"lastHeartbeat": "2026-01-01T00:00:00Z"}}
    patched = jobs.status.patch(
        name=own, namespace=ns, body=body, content_type="application/merge-patch+json"
    )
    assert patched.status.lastHeartbeat == "2026-01-01T00:00:00Z"
    with pytest.raises(ApiException) as exc:
        jobs.status.patch(
            name=other, namespace=ns, body=body, content_type="application/merge-patch+json"
        )
    assert exc.value.status == 403


WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


def _token_kubeconfig(admin: Path, token: str, path: Path) -> Path:
    """The admin kubeconfig's cluster, reached with a ServiceAccount's token only."""
    config = yaml.safe_load(admin.read_text())
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c for c in config["clusters"]
                   if c["name"] == current["context"]["cluster"])
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": [cluster],
        "users": [{"name": "ui", "user": {"token": token}}],
        "contexts": [{"name": "ui", "context": {"cluster": cluster["name"], "user": "ui"}}],
        "current-context": "ui"}))
    return path


@pytest.mark.parametrize("deployed", ["dev"], indirect=True)
def test_the_ui_reads_what_it_shows_and_nothing_else(deployed: Deployed,
                                                      tmp_path: Path) -> None:
    """The in-cluster UI's identity (`ui.enabled`): the API server refuses it every write
    verb on every documented or probed resource, and Secrets in every scope; and the UI
    itself, run with that ServiceAccount's own token and the Deployment's arguments, lists
    everything it watches and serves the dev stack's jobs and queues."""
    spec = deployed.spec
    ns, system = spec.metadata.namespace, system_namespace(spec)
    account = f"{system}/{ui_name(spec)}"
    assert account in service_accounts(deployed.all_objects)
    resources = {(r.api_group, r.resource) for r in documented_rights()} | PROBED
    scopes = ["", ns, system, NODE_EVENT_NAMESPACE]
    refused = [Action(verb, resource, group, "" if resource in CLUSTER_SCOPED else where)
               for group, resource in sorted(resources) for verb in WRITE_VERBS
               for where in scopes]
    refused += [Action(verb, "secrets", "", where) for verb in ("get", "list", "watch")
                for where in scopes]
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda a: deployed.access.allowed(account, a), refused))
    allowed = [a.describe() for a, yes in zip(refused, answers, strict=True) if yes]
    assert allowed == [] and len(refused) > 200

    core = kubernetes.client.CoreV1Api(sync_client(deployed.kubeconfig))
    token = core.create_namespaced_service_account_token(
        ui_name(spec), system, {"spec": {"expirationSeconds": 600}}).status.token
    kubeconfig = _token_kubeconfig(deployed.kubeconfig, token, tmp_path / "ui.kubeconfig")
    args = [a for a in ui_command(spec)[2:] if a != "--in-cluster"]
    args[args.index("--port") + 1] = "0"
    log = tmp_path / "ui.log"
    with log.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "trainmaster", "ui", *args,
                                 "--kubeconfig", str(kubeconfig)], stderr=err,
                                env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"})
    try:
        found = wait_until(lambda: re.search(r"serving (http://\S+)", log.read_text())
                           or (proc.poll() is not None and log.read_text()),
                           "the UI to list everything as its ServiceAccount", 90, 0.2)
        assert isinstance(found, re.Match), f"the UI did not start: {found}"
        url = found.group(1).rstrip("/")

        def page(path: str) -> str:
            with urllib.request.urlopen(url + path, timeout=60) as response:
                return str(response.read().decode())

        assert page("/healthz").startswith("ok")
        jobs = page("/jobs")
        assert all(job.name in jobs for job in spec.jobs), jobs[:2000]
        queues = page("/queues")
        assert all(q.name in queues for q in spec.scheduler.queues), queues[:2000]
        assert "leaf-0" in page("/topology")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
    assert "403" not in log.read_text() and "orbidden" not in log.read_text(), log.read_text()


def _team_spec() -> tuple[ClusterSpec, str]:
    """The dev stack under its own name, serving one team namespace whose LocalQueue
    `lq-a` feeds the `research` queue (32 GPUs), with the in-cluster UI on."""
    spec = isolated("dev")
    meta = spec.metadata.model_copy(update={"name": "sec-teams", "namespace": "sec-teams"})
    team = "sec-teams-a"
    scheduler = spec.scheduler.model_validate({
        **spec.scheduler.model_dump(by_alias=True), "namespaces": [team],
        "localQueues": [{"name": "lq-a", "namespace": team, "clusterQueue": "research"}]})
    return spec.model_copy(update={"metadata": meta, "scheduler": scheduler}), team


def _quota_cell(html: str, namespace: str, gang: str) -> str | None:
    row = re.search(rf'<tr id="why-{namespace}-{gang}">.*?</tr>', html, re.S)
    cell = row and re.search(r'<td class="quota">(.*?)</td>', row.group(0), re.S)
    return cell.group(1) if cell else None


def test_the_ui_resolves_a_team_gangs_queue_with_its_own_rights(
        local_cluster: LocalCluster, tmp_path: Path) -> None:
    """In a team namespace a gang names a LocalQueue, not a queue. The in-cluster UI, run
    with its ServiceAccount's own token and the Deployment's arguments, reads that
    namespace's LocalQueues (its Role there, as the scheduler's) and resolves the gang's
    label as the scheduler does: its quota answer is the scheduler's admission answer on
    `research`, the same text the UI's code gives over what the administrator lists."""
    spec, team = _team_spec()
    made = Deployed(spec, local_cluster.kubeconfig)
    api = sync_client(local_cluster.kubeconfig)
    core = kubernetes.client.CoreV1Api(api)
    custom = kubernetes.client.CustomObjectsApi(api)
    gang = "big"
    try:
        core.create_namespace({"metadata": {"name": team}})
        static = [o for o in made.objects if o["kind"] not in WORKLOADS]
        apply_objects(made.kubeconfig, static)
        made.settle_rbac(static)
        _wait_default_accounts(core, [team])
        custom.create_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", team, "podgroups",
            {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": gang}, "spec": {"minMember": 5}})
        for i in range(5):  # 40 GPUs: more than research's 32
            body = _team_pod(spec, f"{gang}-{i}", gang, "lq-a")
            wait_until(functools.partial(_created, core, team, body),
                       "the guard to admit the team's pod", 30, 0.5)

        system = system_namespace(spec)
        token = core.create_namespaced_service_account_token(
            ui_name(spec), system, {"spec": {"expirationSeconds": 600}}).status.token
        kubeconfig = _token_kubeconfig(made.kubeconfig, token, tmp_path / "ui.kubeconfig")
        args = [a for a in ui_command(spec)[2:] if a != "--in-cluster"]
        assert args[args.index("--localqueue-namespace") + 1] == team
        args[args.index("--port") + 1] = "0"
        log = tmp_path / "ui.log"
        with log.open("w") as err:
            proc = subprocess.Popen([sys.executable, "-m", "trainmaster", "ui", *args,
                                     "--kubeconfig", str(kubeconfig)], stderr=err,
                                    env={k: v for k, v in os.environ.items()
                                         if k != "KUBECONFIG"})
        try:
            found = wait_until(lambda: re.search(r"serving (http://\S+)", log.read_text())
                               or (proc.poll() is not None and log.read_text()),
                               "the UI to list everything as its ServiceAccount", 90, 0.2)
            assert isinstance(found, re.Match), f"the UI did not start: {found}"
            url = found.group(1).rstrip("/")
            with urllib.request.urlopen(url + "/pending", timeout=60) as response:
                shown = _quota_cell(response.read().decode(), team, gang)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(20)
        assert "403" not in log.read_text() and "orbidden" not in log.read_text(), \
            log.read_text()

        # The same answer from the UI's code over the administrator's lists.
        world = _admin_world(made.kubeconfig, team, system)
        (why,) = [w for w in why_pending(world) if w.pending.key == f"{team}/{gang}"]
        assert why.quota is not None and "research" in why.quota, why.quota
        assert shown == html.escape(why.quota), shown
    finally:
        made.clean()
        with contextlib.suppress(ApiException):
            core.delete_namespace(team)


def _team_pod(spec: ClusterSpec, name: str, gang: str, local_queue: str) -> dict[str, Any]:
    """A gang member as the guard admits it in a team namespace: the cluster's scheduler,
    a LocalQueue of the namespace; it never gets a node (none has the label)."""
    gpus = {"nvidia.com/gpu": "8"}
    return {"metadata": {"name": name, "labels": {POD_GROUP_LABEL: gang,
                                                  QUEUE_LABEL: local_queue}},
            "spec": {"schedulerName": spec.scheduler.name, "terminationGracePeriodSeconds": 0,
                     "nodeSelector": {"trainmaster.io/test-none": "true"},
                     "containers": [{"name": "c", "image": "busybox:1.36",
                                     "resources": {"requests": gpus, "limits": gpus}}]}}


def _created(core: kubernetes.client.CoreV1Api, namespace: str, body: dict[str, Any]) -> bool:
    """Created; False while the guard (a policy the API server compiles a moment after it
    sees it) still refuses or has not the LocalQueue's namespace yet."""
    try:
        core.create_namespaced_pod(namespace, body)
        return True
    except ApiException as exc:
        if exc.status == 409:
            return True
        if exc.status in (400, 403, 422):
            return False
        raise


def _admin_world(kubeconfig: Path, team: str, system: str) -> World:
    """What the UI watches there, listed once as the administrator."""
    with SyncKube.connect(kubeconfig) as kube:
        def get(path: str) -> list[dict[str, Any]]:
            return list(kube.run(kube.kube.list(path)))

        maps = get(api_path("v1", "configmaps", system))
        return World(nodes=get(node_path()), pods=get(pod_path(team)),
                     podgroups=get(podgroup_path(team)),
                     events=get(api_path("v1", "events", team)),
                     queues=scheduler_queues(maps), configs=scheduler_configs(maps),
                     ledger=ledger_entries(maps), localqueues=get(localqueue_path(team)))
