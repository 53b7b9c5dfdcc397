"""Helpers for runtime tests on the real local control plane: scratch kwok nodes that only
our pods may use, scheduler subprocesses that are always stopped, polling."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kubernetes import client

from trainmaster.kubeclient import generated_client as client_for
from trainmaster.objects._crds import podgroup_crd
from trainmaster.polling import wait_until

TEST_LABEL = "trainmaster.io/scheduler-test"
PODGROUPS = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")


def wait_for(check: Callable[[], Any], what: str, timeout: float = 90) -> Any:
    return wait_until(check, what, timeout, 0.2)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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

def ensure_podgroup_crd(api_client: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    crd = podgroup_crd()
    with contextlib.suppress(client.ApiException):
        ext.create_custom_resource_definition(crd)

    def served() -> bool:
        try:
            client.CustomObjectsApi(api_client).list_cluster_custom_object(*PODGROUPS, limit=1)
            return True
        except client.ApiException:
            return False

    wait_for(served, "the PodGroup CRD to be served", 60)


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
                 unschedulable: bool = False, taints: list[dict[str, str]] | None = None) -> str:
        full = f"tm-{self.tag}-{name}"
        alloc = {"nvidia.com/gpu": str(gpus), "cpu": "64", "memory": "512Gi", "pods": "110"}
        body = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": full,
                "labels": {"kubernetes.io/hostname": full, TEST_LABEL: self.tag,
                           "topology.trainmaster.io/spine": f"tm-{self.tag}-spine",
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
