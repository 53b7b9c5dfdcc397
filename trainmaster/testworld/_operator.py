"""One operator world on a real cluster, for the operator's tests and its recovery benchmark.

A namespace of its own with the cluster-spec ConfigMap and a checkpoint volume (PV + PVC),
the CRDs and the queues' PriorityClasses (cluster-scoped, shared, created once), the
operator as a separate process, and kwok's chaos stages to inject faults. ``close`` undoes
everything it did, failures included: injected node faults and the fences that followed,
the process, the namespace and the volume.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from trainmaster.api import CRD_ESTABLISHED, GPU_CONDITION
from trainmaster.kubeclient import (
    ApiError,
    SyncKube,
    api_path,
    crd_path,
    namespace_path,
    node_path,
    pod_path,
)
from trainmaster.objects import (
    TRAININGJOB_GROUP,
    TRAININGJOB_PLURAL,
    all_crds,
    build_scheduler,
    build_spec_configmap,
    spec_configmap_name,
    spec_text,
)
from trainmaster.operator import unfence
from trainmaster.polling import wait_until
from trainmaster.spec import ClusterSpec

KWOK_FAIL = "pod-container-running-failed.stage.kwok.x-k8s.io"
KWOK_NOT_READY = "node-not-ready.stage.kwok.x-k8s.io"
CHECKPOINT_CLAIM = "checkpoints"


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == CRD_ESTABLISHED and c.get("status") == "True" for c in conditions)


def ensure_cluster_objects(kube: SyncKube, spec: ClusterSpec, timeout: float = 60) -> None:
    """CRDs and the queues' PriorityClasses: cluster-scoped, shared by every world,
    created once (an existing one is kept) and left for the cluster's teardown."""
    priority_classes = [o for o in build_scheduler(spec) if o["kind"] == "PriorityClass"]
    for obj, path in [*((crd, crd_path()) for crd in all_crds()),
                      *((pc, api_path("scheduling.k8s.io/v1", "priorityclasses"))
                        for pc in priority_classes)]:
        with contextlib.suppress(ApiError):
            kube.post(path, obj)
    wait_until(lambda: _established(kube.get(crd_path(f"{TRAININGJOB_PLURAL}."
                                                      f"{TRAININGJOB_GROUP}"))),
               "the TrainingJob CRD", timeout)


class OperatorProcess:
    """`python -m trainmaster operator run` in its own process group, logging to a file."""

    def __init__(self, kubeconfig: Path, namespace: str, configmap: str, log: Path) -> None:
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "trainmaster", "operator", "run", "--kubeconfig",
                 str(kubeconfig), "--namespace", namespace, "--spec-configmap", configmap],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, kill: bool = False) -> None:
        """SIGTERM and wait (SIGKILL after 20 s); ``kill``: SIGKILL at once, no cleanup
        handlers, no graceful shutdown, like an OOM kill."""
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.proc.wait(30 if kill else 20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


class OperatorWorld:
    """The world of one test or benchmark: ``setup()``, then ``close()`` in a finally."""

    def __init__(self, kubeconfig: Path, spec: ClusterSpec, log: Path) -> None:
        self.kubeconfig = kubeconfig
        self.spec = spec
        self.namespace = spec.metadata.namespace
        self.log = log
        self.kube = SyncKube.connect(kubeconfig, pool=8)
        self.process: OperatorProcess | None = None
        self.touched_nodes: set[str] = set()
        self._pv = f"{self.namespace}-checkpoints"

    def setup(self) -> None:
        ensure_cluster_objects(self.kube, self.spec)
        kube, ns = self.kube, self.namespace
        kube.post(namespace_path(), {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": ns}})
        kube.post(api_path("v1", "persistentvolumes"), {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": self._pv},
            "spec": {"capacity": {"storage": "1Ti"}, "accessModes": ["ReadWriteMany"],
                     "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "",
                     "hostPath": {"path": f"/tmp/{self._pv}"},
                     "claimRef": {"namespace": ns, "name": CHECKPOINT_CLAIM}},
        })
        kube.post(api_path("v1", "persistentvolumeclaims", ns), {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": CHECKPOINT_CLAIM},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                     "volumeName": self._pv, "resources": {"requests": {"storage": "1Ti"}}},
        })
        kube.post(api_path("v1", "configmaps", ns),
                  build_spec_configmap(self.spec, spec_text(self.spec)))
        # Pods are refused until the namespace's default ServiceAccount exists.
        wait_until(lambda: any(sa["metadata"]["name"] == "default" for sa in
                               kube.list(api_path("v1", "serviceaccounts", ns))),
                   "the default service account", 60)

    # --- the operator process ---------------------------------------------------------

    def start_process(self) -> OperatorProcess:
        self.process = OperatorProcess(self.kubeconfig, self.namespace,
                                       spec_configmap_name(self.spec), self.log)
        return self.process

    def stop_process(self, kill: bool = False) -> None:
        process, self.process = self.process, None
        if process is not None:
            process.stop(kill)

    # --- faults -----------------------------------------------------------------------

    def fail_pod(self, pod: str, exit_code: int) -> None:
        """kwok's chaos stage: the Running pod's container exits with ``exit_code``."""
        self.kube.patch(pod_path(self.namespace, pod), {"metadata": {
            "labels": {KWOK_FAIL: "true"},
            "annotations": {f"{KWOK_FAIL}/exit-code": str(exit_code),
                            f"{KWOK_FAIL}/delay": "0ms", f"{KWOK_FAIL}/jitter-delay": "0ms"},
        }}, "strategic")

    def node_not_ready(self, node: str) -> None:
        """kwok's chaos stage: the node reports Ready=False (and keeps doing so)."""
        self.touched_nodes.add(node)
        self.kube.patch(node_path(node), {"metadata": {
            "labels": {KWOK_NOT_READY: "true"},
            "annotations": {f"{KWOK_NOT_READY}/delay": "0ms",
                            f"{KWOK_NOT_READY}/jitter-delay": "0ms"},
        }}, "strategic")

    def set_gpu_condition(self, node: str, status: str, reason: str, message: str) -> None:
        """What a GPU health agent reports: condition GPUHealthy."""
        self.touched_nodes.add(node)
        self.kube.patch(node_path(node, "status"), {"status": {"conditions": [{
            "type": GPU_CONDITION, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": now_rfc3339(), "lastTransitionTime": now_rfc3339()}]}},
            "strategic")

    def heal_node(self, node: str) -> None:
        """Undo injected faults and lift the fence, so later users get a clean node."""
        with contextlib.suppress(ApiError):
            self.kube.patch(node_path(node), {"metadata": {
                "labels": {KWOK_NOT_READY: None},
                "annotations": {f"{KWOK_NOT_READY}/delay": None,
                                f"{KWOK_NOT_READY}/jitter-delay": None}}}, "strategic")
            conditions = (self.kube.get(node_path(node)).get("status") or {}).get(
                "conditions") or []
            if any(c.get("type") == GPU_CONDITION for c in conditions):
                self.set_gpu_condition(node, "True", "Healthy", "")
            self.kube.run(unfence(self.kube.kube, node))

    def close(self) -> None:
        try:
            self.stop_process()
            for node in sorted(self.touched_nodes):
                self.heal_node(node)
            for path in (namespace_path(self.namespace),
                         api_path("v1", "persistentvolumes", None, self._pv)):
                with contextlib.suppress(ApiError):
                    self.kube.delete(path)
        finally:
            self.kube.close()
