"""Helpers for runtime tests on the real local control plane: scratch kwok nodes that only
our pods may use, scheduler subprocesses that are always stopped, polling, and the
scheduler as the spec renders it (its rights applied, run as its own account)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, dynamic

from tests.helpers import ROOT, STACKS
from trainmaster.cluster import free_port
from trainmaster.kubeclient import generated_client as client_for
from trainmaster.objects._crds import podgroup_crd
from trainmaster.objects._scheduler import scheduler_config
from trainmaster.polling import wait_until
from trainmaster.spec import ClusterSpec

TEST_LABEL = "trainmaster.io/scheduler-test"
PODGROUPS = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")


def wait_for(check: Callable[[], Any], what: str, timeout: float = 90) -> Any:
    return wait_until(check, what, timeout, 0.2)


def scrape_metrics(port: int) -> dict[str, float]:
    """Samples of a local /metrics as {'name{labels}': value}; empty until it serves."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out

def ensure_crd(api_client: client.ApiClient, crd: dict[str, Any],
               plural: tuple[str, str, str], what: str) -> None:
    """`crd` created unless it exists (left in place after: other tests may use it), and
    waited for until its kind (group, version, plural) is served."""
    ext = client.ApiextensionsV1Api(api_client)
    with contextlib.suppress(client.ApiException):
        ext.create_custom_resource_definition(crd)

    def served() -> bool:
        try:
            client.CustomObjectsApi(api_client).list_cluster_custom_object(*plural, limit=1)
            return True
        except client.ApiException:
            return False

    wait_for(served, f"the {what} CRD to be served", 60)


def ensure_podgroup_crd(api_client: client.ApiClient) -> None:
    ensure_crd(api_client, podgroup_crd(), PODGROUPS, "PodGroup")


class Scratch:
    """A namespace, a scheduler name and kwok nodes of this test only.

    The nodes carry a taint only our pods tolerate (so the session's kube-scheduler never
    puts other tests' pods there) and a label our pods select; everything is deleted at
    the end.
    """

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.tag = uuid.uuid4().hex[:6]
        self.namespace = f"tm-{self.tag}"
        self.scheduler = f"tm-sched-{self.tag}"
        self.nodes: list[str] = []
        self.core.create_namespace({"metadata": {"name": self.namespace}})

    def add_node(self, name: str, leaf: str = "leaf-a", gpus: int = 8,
                 unschedulable: bool = False, taints: list[dict[str, str]] | None = None,
                 spine: str = "spine") -> str:
        full = f"tm-{self.tag}-{name}"
        alloc = {"nvidia.com/gpu": str(gpus), "cpu": "64", "memory": "512Gi", "pods": "110"}
        body = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": full,
                "labels": {"kubernetes.io/hostname": full, TEST_LABEL: self.tag,
                           "topology.trainmaster.io/spine": f"tm-{self.tag}-{spine}",
                           "topology.trainmaster.io/leaf": f"tm-{self.tag}-{leaf}"},
                "annotations": {"kwok.x-k8s.io/node": "fake"},
            },
            "spec": {"unschedulable": unschedulable,
                     "taints": [{"key": TEST_LABEL, "value": self.tag, "effect": "NoSchedule"},
                                *(taints or [])]},
            "status": {"capacity": alloc, "allocatable": alloc},
        }
        self.core.create_node(body)
        self.nodes.append(full)
        return full

    def pod(self, name: str, gpus: int = 8, group: str | None = None,
            controlled: bool = False) -> dict[str, Any]:
        labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
        body: dict[str, Any] = {
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "schedulerName": self.scheduler,
                "terminationGracePeriodSeconds": 0,
                "nodeSelector": {TEST_LABEL: self.tag},
                "tolerations": [{"key": TEST_LABEL, "operator": "Exists"}],
                "containers": [{"name": "c", "image": "busybox:1.36", "resources": {
                    "requests": {"nvidia.com/gpu": str(gpus)},
                    "limits": {"nvidia.com/gpu": str(gpus)}}}],
            },
        }
        return body

    def create_pods(self, pods: list[dict[str, Any]]) -> None:
        for body in pods:
            self.core.create_namespaced_pod(self.namespace, body)

    def create_gangs(self, sizes: dict[str, int], gpus: int) -> int:
        """A PodGroup per gang and its pods (``<gang>-<i>``); returns how many pods."""
        pods = []
        for gang, size in sizes.items():
            self.create_group(gang, size)
            pods += [self.pod(f"{gang}-{i}", gpus=gpus, group=gang) for i in range(size)]
        self.create_pods(pods)
        return len(pods)

    def create_group(self, name: str, min_member: int, domain: str = "leaf",
                     mode: str = "required") -> None:
        self.custom.create_namespaced_custom_object(*PODGROUPS[:2], self.namespace,
                                                    PODGROUPS[2], {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "annotations": {
                "trainmaster.io/topology-domain": domain, "trainmaster.io/topology-mode": mode}},
            "spec": {"minMember": min_member},
        })

    def pods(self) -> list[Any]:
        return list(self.core.list_namespaced_pod(self.namespace).items)

    def bound(self) -> dict[str, str]:
        return {p.metadata.name: p.spec.node_name for p in self.pods() if p.spec.node_name}

    def nodes_ready(self) -> bool:
        """Ready, and the node controller has lifted its not-ready taint (it lags)."""
        for name in self.nodes:
            node = self.core.read_node(name)
            if not any(c.type == "Ready" and c.status == "True"
                       for c in node.status.conditions or []):
                return False
            lagging = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
            if any(t.key in lagging for t in node.spec.taints or []):
                return False
        return True

    def leaf_of(self, node: str) -> str:
        return str(self.core.read_node(node).metadata.labels["topology.trainmaster.io/leaf"])

    def cleanup(self) -> None:
        with contextlib.suppress(client.ApiException):
            self.core.delete_collection_namespaced_pod(self.namespace, grace_period_seconds=0)
        with contextlib.suppress(client.ApiException):
            self.core.delete_namespace(self.namespace)
        for name in self.nodes:
            with contextlib.suppress(client.ApiException):
                self.core.delete_node(name)


class SchedulerProcess:
    """``trainmaster-scheduler`` as a child process in its own process group."""

    def __init__(self, kubeconfig: Path, scratch: Scratch, log_dir: Path, identity: str,
                 *extra: str) -> None:
        self.identity = identity
        self.metrics_port = free_port()
        self.log = log_dir / f"scheduler-{identity}.log"
        argv = [
            sys.executable, "-m", "trainmaster.scheduler.cli",
            "--kubeconfig", str(kubeconfig),
            "--scheduler-name", scratch.scheduler,
            "--levels", "spine,leaf",
            "--identity", identity,
            "--metrics-port", str(self.metrics_port),
            "--lease-name", scratch.scheduler,
            "--lease-namespace", scratch.namespace,
            # Generous: this machine is shared and the API server can stall for seconds.
            "--lease-duration", "10", "--renew-deadline", "8", "--retry-period", "1",
            "--log-level", "DEBUG",
            *extra,
        ]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

    def metrics(self) -> dict[str, float]:
        """Samples of /metrics as {'name{labels}': value}; empty until it serves."""
        return scrape_metrics(self.metrics_port)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)


@contextlib.contextmanager
def scratch_box(kubeconfig: Path) -> Iterator[Scratch]:
    """A Scratch on the cluster of ``kubeconfig`` (PodGroup CRD ensured), cleaned up after."""
    api_client = client_for(kubeconfig)
    ensure_podgroup_crd(api_client)
    box = Scratch(api_client)
    try:
        yield box
    finally:
        box.cleanup()


@contextlib.contextmanager
def processes() -> Iterator[list[SchedulerProcess]]:
    started: list[SchedulerProcess] = []
    try:
        yield started
    finally:
        for proc in started:
            proc.kill()


# --- the scheduler as the spec renders it: its identity, its rights, its account ----------


def scratch_spec(scratch: Scratch, prefix: str, **scheduler: Any) -> ClusterSpec:
    """The dev stack's spec, no jobs, as cluster `<prefix>-<tag>` in the scratch namespace,
    its scheduler named as the scratch's and given the `scheduler` fields."""
    doc = yaml.safe_load((STACKS / "dev" / "cluster.yaml").read_text())
    doc["metadata"].update(name=f"{prefix}-{scratch.tag}", namespace=scratch.namespace)
    doc["scheduler"].update(name=scratch.scheduler, **scheduler)
    doc["jobs"] = []
    return ClusterSpec.model_validate(doc)


@contextlib.contextmanager
def namespaces(scratch: Scratch, *names: str) -> Iterator[None]:
    """The namespaces created; after, their pods and themselves deleted."""
    for ns in names:
        scratch.core.create_namespace({"metadata": {"name": ns}})
    try:
        yield
    finally:
        for ns in names:
            with contextlib.suppress(client.ApiException):
                scratch.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
            with contextlib.suppress(client.ApiException):
                scratch.core.delete_namespace(ns)


def add_ready_nodes(scratch: Scratch, nodes: list[tuple[str, str]]) -> None:
    """Scratch nodes (name, leaf), waited for until Ready."""
    for name, leaf in nodes:
        scratch.add_node(name, leaf=leaf)
    # Generous: the machine is shared, and kwok and the node controller lag under load.
    wait_for(scratch.nodes_ready, "scratch nodes Ready", 300)


@contextlib.contextmanager
def applied(scratch: Scratch, objs: list[dict[str, Any]],
            delete: Callable[[dict[str, Any]], bool] = lambda obj: False,
            ) -> Iterator[list[dict[str, Any]]]:
    """Rendered objects server-side applied as the administrator; after, the
    cluster-scoped ones deleted, and the namespaced ones `delete` picks (the others go
    with their namespaces)."""
    dyn = dynamic.DynamicClient(scratch.api_client)
    try:
        for obj in objs:
            dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).server_side_apply(
                body=obj, name=obj["metadata"]["name"],
                namespace=obj["metadata"].get("namespace"), field_manager="trainmaster")
        yield objs
    finally:
        for obj in objs:
            if "namespace" not in obj["metadata"] or delete(obj):
                with contextlib.suppress(client.ApiException):
                    dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).delete(
                        name=obj["metadata"]["name"],
                        namespace=obj["metadata"].get("namespace"))


def is_guardrail(obj: dict[str, Any]) -> bool:
    """A tenancy guardrail policy or binding (tests that create GPU work outside its
    rules as a non-administrator leave them out)."""
    labels = obj["metadata"].get("labels") or {}
    return bool(labels.get("app.kubernetes.io/component") == "guardrails")


def token_kubeconfig(admin: Path, scratch: Scratch, account: str, ns: str, out: Path) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount (a TokenRequest token)."""
    token = scratch.core.create_namespaced_service_account_token(
        account, ns, {"spec": {"expirationSeconds": 3600}}).status.token
    doc = yaml.safe_load(admin.read_text())
    doc["users"] = [{"name": account, "user": {"token": token}}]
    for ctx in doc["contexts"]:
        ctx["context"]["user"] = account
    out.write_text(yaml.safe_dump(doc))
    return out


def start_as_its_account(procs: list[SchedulerProcess], admin: Path, scratch: Scratch,
                         spec: ClusterSpec, system: str, tmp_path: Path) -> Path:
    """The scheduler with its rendered config, run as its own ServiceAccount of `system`
    (a token of it; its lease there too); returns that account's kubeconfig."""
    kubeconfig = token_kubeconfig(admin, scratch, scratch.scheduler, system,
                                  tmp_path / "scheduler.yaml")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(scheduler_config(spec)))
    procs.append(SchedulerProcess(kubeconfig, scratch, tmp_path, "sa", "--config",
                                  str(config), "--lease-namespace", system))
    return kubeconfig


INTEROP_PAGE = ROOT / "docs" / "interop.md"


def interop_page_objects(kind: str) -> list[dict[str, Any]]:
    """docs/interop.md's YAML block that holds an object of this kind, as printed."""
    for block in re.findall(r"^```yaml\n(.*?)^```", INTEROP_PAGE.read_text(), re.S | re.M):
        docs = [d for d in yaml.safe_load_all(block) if d]
        if kind in {d.get("kind") for d in docs}:
            return docs
    raise AssertionError(f"{INTEROP_PAGE}: no YAML block with a {kind}")


def fit_page_object(scratch: Scratch, obj: dict[str, Any]) -> dict[str, Any]:
    """A page's object in this test's namespace, for its scheduler and its nodes (only what
    must differ on a shared test cluster)."""
    assert obj["metadata"]["namespace"] == "trainmaster"
    obj["metadata"]["namespace"] = scratch.namespace
    if obj["kind"] == "Job":
        pod = obj["spec"]["template"]["spec"]
        assert pod["schedulerName"] == "trainmaster-scheduler"
        pod["schedulerName"] = scratch.scheduler
        pod["nodeSelector"] = {TEST_LABEL: scratch.tag}
        pod["tolerations"].append({"key": TEST_LABEL, "operator": "Exists"})
    return obj
