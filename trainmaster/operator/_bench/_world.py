"""The recovery benchmark's world: a local control plane (its own unless given one), a
namespace with the cluster-spec ConfigMap and a checkpoint volume, and the operator as a
separate process, as it runs in production. Everything is undone on exit, failures
included: namespace, volume, injected node faults, fences, processes, cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from trainmaster.objects import (
    TRAININGJOB_GROUP,
    TRAININGJOB_PLURAL,
    all_crds,
    build_scheduler,
    build_spec_configmap,
    spec_configmap_name,
    spec_text,
)
from trainmaster.operator._fence import unfence_patch
from trainmaster.spec import ClusterSpec, validate_data

Report = Callable[[str], None]
KWOK_NOT_READY = "node-not-ready.stage.kwok.x-k8s.io"


def bench_spec_doc(nodes: int) -> dict[str, Any]:
    """Bench-stack nodes (8 GPUs, 8 rails), leaves of 8, placed by the stock kube-scheduler."""
    leaves = max(1, -(-nodes // 8))
    return {
        "apiVersion": "trainmaster.io/v1alpha1",
        "kind": "TrainingCluster",
        "metadata": {"name": "recovery"},
        "topology": {
            "levels": ["spine", "leaf"],
            "node": {"gpus": 8, "gpuModel": "nvidia-h100-80gb", "nics": 8, "cpu": 128,
                     "memory": "2048Gi", "localDisk": "15Ti"},
            "generate": {"switchesPerLevel": [1, leaves], "nodesPerLeaf": 8},
        },
        "networks": {
            "compute": {"fabric": "infiniband",
                        "rails": [{"subnet": f"10.{r}.0.0/16"} for r in range(8)]},
            "storage": {"subnet": "10.8.0.0/16"},
        },
        "scheduler": {"name": "default-scheduler"},
    }


@contextlib.contextmanager
def local_cluster(nodes: int, kubeconfig: Path | None, report: Report) -> Iterator[Path]:
    if kubeconfig is not None:
        yield kubeconfig
        return
    from trainmaster import cluster

    with tempfile.TemporaryDirectory(prefix="trainmaster-recovery-") as tmp:
        spec = Path(tmp) / "cluster.yaml"
        spec.write_text(yaml.safe_dump(bench_spec_doc(nodes), sort_keys=False))
        state = Path(tmp) / "state"
        report(f"starting a local control plane: {nodes} kwok nodes + kube-scheduler")
        result = cluster.up(spec, state_dir=state, kube_scheduler=True, report=report)
        try:
            yield Path(result.record.kubeconfig)
        finally:
            report("stopping the local control plane")
            cluster.down_state_dir(state)


def _json(response: Any) -> Any:
    return json.loads(response.data)


class World:
    """Kubernetes clients and the objects the benchmark made, to undo on close."""

    def __init__(self, kubeconfig: Path, nodes: int, report: Report) -> None:
        from kubernetes import client

        from trainmaster.kube import sync_client

        self.kubeconfig = kubeconfig
        self.report = report
        self.namespace = f"tm-recovery-{uuid.uuid4().hex[:6]}"
        doc = bench_spec_doc(nodes)
        doc["metadata"]["namespace"] = self.namespace
        self.spec: ClusterSpec = validate_data(doc, "recovery bench")
        self.api = sync_client(kubeconfig, pool=8)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.touched_nodes: set[str] = set()
        self._operator: subprocess.Popen[bytes] | None = None
        self._log = Path(tempfile.gettempdir()) / f"{self.namespace}-operator.log"
        self._pv = f"{self.namespace}-checkpoints"

    def setup(self) -> None:
        from kubernetes import client

        ext = client.ApiextensionsV1Api(self.api)
        for crd in all_crds():
            with contextlib.suppress(client.ApiException):
                ext.create_custom_resource_definition(crd)
        for obj in build_scheduler(self.spec):
            if obj["kind"] == "PriorityClass":
                with contextlib.suppress(client.ApiException):
                    client.SchedulingV1Api(self.api).create_priority_class(obj)
        self.core.create_namespace({"metadata": {"name": self.namespace}})
        self.core.create_persistent_volume({
            "metadata": {"name": self._pv},
            "spec": {"capacity": {"storage": "1Ti"}, "accessModes": ["ReadWriteMany"],
                     "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "",
                     "hostPath": {"path": f"/tmp/{self._pv}"},
                     "claimRef": {"namespace": self.namespace, "name": "checkpoints"}},
        })
        self.core.create_namespaced_persistent_volume_claim(self.namespace, {
            "metadata": {"name": "checkpoints"},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                     "volumeName": self._pv, "resources": {"requests": {"storage": "1Ti"}}},
        })
        self.core.create_namespaced_config_map(
            self.namespace, build_spec_configmap(self.spec, spec_text(self.spec)))
        self.wait(lambda: self._crd_ready(ext) and any(
            sa.metadata.name == "default"
            for sa in self.core.list_namespaced_service_account(self.namespace).items),
            "the namespace and CRDs", 60)

    @staticmethod
    def _crd_ready(ext: Any) -> bool:
        crd = _json(ext.read_custom_resource_definition(
            f"{TRAININGJOB_PLURAL}.{TRAININGJOB_GROUP}", _preload_content=False))
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (crd.get("status") or {}).get("conditions") or [])

    def start_operator(self) -> None:
        """`trainmaster operator run` in its own process (and process group)."""
        log = self._log.open("ab")
        self._operator = subprocess.Popen(
            [sys.executable, "-m", "trainmaster", "operator", "run", "--kubeconfig",
             str(self.kubeconfig), "--namespace", self.namespace,
             "--spec-configmap", spec_configmap_name(self.spec)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()

    def stop_operator(self) -> None:
        proc, self._operator = self._operator, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)

    def operator_alive(self) -> bool:
        return self._operator is not None and self._operator.poll() is None

    @property
    def operator_log(self) -> Path:
        return self._log

    def heal_node(self, node: str) -> None:
        """Undo an injected NotReady and lift the fence that followed."""
        from kubernetes import client

        with contextlib.suppress(client.ApiException):
            self.core.patch_node(node, {"metadata": {
                "labels": {KWOK_NOT_READY: None},
                "annotations": {f"{KWOK_NOT_READY}/delay": None,
                                f"{KWOK_NOT_READY}/jitter-delay": None}}})
        for _ in range(5):
            node_body = _json(self.core.read_node(node, _preload_content=False))
            patch = unfence_patch(node_body)
            if patch is None:
                return
            try:
                self.core.patch_node(node, patch, _content_type="application/merge-patch+json")
                return
            except client.ApiException as exc:
                if exc.status != 409:
                    raise

    def close(self) -> None:
        from kubernetes import client

        self.stop_operator()
        for node in sorted(self.touched_nodes):
            self.heal_node(node)
        with contextlib.suppress(client.ApiException):
            self.core.delete_namespace(self.namespace)
        with contextlib.suppress(client.ApiException):
            self.core.delete_persistent_volume(self._pv)
        self._log.unlink(missing_ok=True)

    @staticmethod
    def wait(check: Callable[[], Any], what: str, timeout: float, every: float = 0.2) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            time.sleep(every)
        raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
