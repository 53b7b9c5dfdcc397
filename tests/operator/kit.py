"""Builders and a real-cluster harness for the operator tests.

`OperatorEnv` is one test's world: its own namespace with the cluster-spec ConfigMap, a
checkpoint volume, and an operator serving only that namespace (in a thread, or as a
`python -m trainmaster operator run` subprocess). It undoes everything it did on close,
including node faults it injected and the fences that followed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client

from trainmaster.kube import sync_client
from trainmaster.objects import (
    ATTEMPT_LABEL,
    JOB_LABEL,
    TRAININGJOB_GROUP,
    TRAININGJOB_PLURAL,
    TRAININGJOB_VERSION,
    all_crds,
    build_scheduler,
    build_spec_configmap,
    build_training_job,
    spec_configmap_name,
    spec_text,
)
from trainmaster.operator import OperatorConfig, OperatorThread, SpecRef, unfence_patch
from trainmaster.spec import ClusterSpec, Job, load_spec, validate_data

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
KWOK_FAIL = "pod-container-running-failed.stage.kwok.x-k8s.io"
KWOK_NOT_READY = "node-not-ready.stage.kwok.x-k8s.io"
WAIT = 120.0
"""Generous: the CPU is shared with other suites; no test asserts a duration."""


def wait_for(check: Callable[[], T | None], what: str, timeout: float = WAIT,
             every: float = 0.25) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def spec_for(base: Path, namespace: str) -> ClusterSpec:
    """The local cluster's spec, for a test namespace, placed by the stock kube-scheduler
    (trainmaster-scheduler is another component's business and not running here)."""
    data = load_spec(base).model_dump(by_alias=True, exclude_none=True, mode="json")
    data["metadata"] = {"name": "optest", "namespace": namespace}
    data["scheduler"]["name"] = "default-scheduler"
    data["jobs"] = []
    return validate_data(data, "optest")


def job_doc(name: str, nodes: int = 2, **restart: Any) -> dict[str, Any]:
    policy = {"maxRestarts": 3, "backoffSeconds": 0, "hangTimeoutSeconds": 3600, **restart}
    return {
        "name": name,
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "launcher": "torchrun",
        "nodes": nodes,
        "gpusPerPod": 8,
        "command": ["python", "train.py"],
        "checkpoint": {"volume": "checkpoints", "path": f"/checkpoints/{name}"},
        "restartPolicy": policy,
    }


def _json(resp: Any) -> Any:
    return json.loads(resp.data)


def ensure_cluster_objects(api: client.ApiClient, spec: ClusterSpec) -> None:
    """CRDs and the queue's PriorityClass: cluster-scoped, shared by every test, created
    once and left for the session's cluster teardown."""
    ext = client.ApiextensionsV1Api(api)
    for crd in all_crds():
        with contextlib.suppress(client.ApiException):
            ext.create_custom_resource_definition(crd)
    sched = client.SchedulingV1Api(api)
    for obj in build_scheduler(spec):
        if obj["kind"] == "PriorityClass":
            with contextlib.suppress(client.ApiException):
                sched.create_priority_class(obj)

    def established() -> bool:
        crd = _json(ext.read_custom_resource_definition(
            f"{TRAININGJOB_PLURAL}.{TRAININGJOB_GROUP}", _preload_content=False))
        conds = (crd.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)

    wait_for(established, "the TrainingJob CRD")


class OperatorProcess:
    """`python -m trainmaster operator run` as a child process, to be killed for real."""

    def __init__(self, kubeconfig: Path, namespace: str, configmap: str, log: Path) -> None:
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trainmaster", "operator", "run", "--kubeconfig",
             str(kubeconfig), "--namespace", namespace, "--spec-configmap", configmap],
            cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def kill(self) -> None:
        """SIGKILL: no cleanup handlers, no graceful shutdown, like an OOM kill."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._log.close()


class OperatorEnv:
    def __init__(self, kubeconfig: Path, base_spec: Path, workdir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.namespace = f"tmop-{uuid.uuid4().hex[:8]}"
        self.spec = spec_for(base_spec, self.namespace)
        self.api = sync_client(kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.operator: OperatorThread | None = None
        self.process: OperatorProcess | None = None
        self.touched_nodes: set[str] = set()
        self._pv = f"{self.namespace}-checkpoints"

    # --- set-up and tear-down ---------------------------------------------------------

    def setup(self) -> OperatorEnv:
        ensure_cluster_objects(self.api, self.spec)
        self.core.create_namespace({"metadata": {"name": self.namespace}})
        self.core.create_persistent_volume({
            "metadata": {"name": self._pv},
            "spec": {
                "capacity": {"storage": "1Ti"},
                "accessModes": ["ReadWriteMany"],
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": "",
                "hostPath": {"path": f"/tmp/{self._pv}"},
                "claimRef": {"namespace": self.namespace, "name": "checkpoints"},
            },
        })
        self.core.create_namespaced_persistent_volume_claim(self.namespace, {
            "metadata": {"name": "checkpoints"},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                     "volumeName": self._pv, "resources": {"requests": {"storage": "1Ti"}}},
        })
        self.core.create_namespaced_config_map(
            self.namespace, build_spec_configmap(self.spec, spec_text(self.spec)))
        wait_for(lambda: any(sa.metadata.name == "default" for sa in
                             self.core.list_namespaced_service_account(self.namespace).items),
                 "the default service account")
        return self

    @property
    def config(self) -> OperatorConfig:
        return OperatorConfig(
            spec=SpecRef(namespace=self.namespace, configmap=spec_configmap_name(self.spec)),
            namespaces=(self.namespace,),
            kubeconfig=self.kubeconfig,
            resync_seconds=30,
        )

    def start_operator(self) -> None:
        self.operator = OperatorThread(self.config).start()

    def stop_operator(self) -> None:
        if self.operator is not None:
            self.operator.stop()
            self.operator = None

    def start_process(self) -> OperatorProcess:
        self.process = OperatorProcess(self.kubeconfig, self.namespace,
                                       spec_configmap_name(self.spec),
                                       self.workdir / "operator.log")
        return self.process

    def kill_process(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process = None

    def close(self) -> None:
        self.stop_operator()
        self.kill_process()
        for node in sorted(self.touched_nodes):
            self.heal_node(node)
        with contextlib.suppress(client.ApiException):
            self.core.delete_namespace(self.namespace)
        with contextlib.suppress(client.ApiException):
            self.core.delete_persistent_volume(self._pv)

    # --- jobs -------------------------------------------------------------------------

    def create_job(self, doc: dict[str, Any]) -> dict[str, Any]:
        job = Job.model_validate(doc)
        body = build_training_job(self.spec, job)
        result: dict[str, Any] = self.custom.create_namespaced_custom_object(
            TRAININGJOB_GROUP, TRAININGJOB_VERSION, self.namespace, TRAININGJOB_PLURAL, body)
        return result

    def tj(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self.custom.get_namespaced_custom_object(
            TRAININGJOB_GROUP, TRAININGJOB_VERSION, self.namespace, TRAININGJOB_PLURAL, name)
        return result

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.tj(name).get("status") or {})

    def patch_status(self, name: str, status: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object_status(
            TRAININGJOB_GROUP, TRAININGJOB_VERSION, self.namespace, TRAININGJOB_PLURAL, name,
            {"status": status}, _content_type="application/merge-patch+json")

    def report_checkpoint(self, name: str, path: str, step: int) -> None:
        """What the launcher does when a checkpoint completes."""
        self.patch_status(name, {"lastCheckpoint": {"path": path, "step": step,
                                                    "time": _now()}})

    @contextlib.contextmanager
    def heartbeats(self, name: str, every: float = 2.0) -> Iterator[None]:
        """Report heartbeats like a live launcher until the block ends."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.is_set():
                with contextlib.suppress(Exception):
                    self.patch_status(name, {"lastHeartbeat": _now()})
                stop.wait(every)

        thread = threading.Thread(target=beat, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(10)

    def wait_phase(self, name: str, phase: str, timeout: float = WAIT) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            status = self.status(name)
            return status if status.get("phase") == phase else None
        return wait_for(reached, f"{name} phase {phase}", timeout)

    def pods(self, name: str, attempt: int | None = None) -> list[dict[str, Any]]:
        selector = f"{JOB_LABEL}={name}"
        if attempt is not None:
            selector += f",{ATTEMPT_LABEL}={attempt}"
        items: list[dict[str, Any]] = _json(self.core.list_namespaced_pod(
            self.namespace, label_selector=selector, _preload_content=False))["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def wait_gang_running(self, name: str, attempt: int, nodes: int,
                          timeout: float = WAIT) -> list[dict[str, Any]]:
        def running() -> list[dict[str, Any]] | None:
            pods = self.pods(name, attempt)
            ok = len(pods) == nodes and all(p["status"].get("phase") == "Running"
                                            for p in pods)
            return pods if ok else None
        return wait_for(running, f"{nodes} Running pods of {name}-r{attempt}", timeout)

    def jobs(self, name: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = _json(self.batch.list_namespaced_job(
            self.namespace, label_selector=f"{JOB_LABEL}={name}", _preload_content=False)
        )["items"]
        return [j for j in items if not j["metadata"].get("deletionTimestamp")]

    def events(self, reason: str | None = None, namespace: str | None = None
               ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = _json(self.core.list_namespaced_event(
            namespace or self.namespace, _preload_content=False))["items"]
        return [e for e in items if reason is None or e.get("reason") == reason]

    # --- faults -----------------------------------------------------------------------

    def fail_pod(self, pod: str, exit_code: int) -> None:
        """kwok's chaos stage: the Running pod's container exits with `exit_code`."""
        self.core.patch_namespaced_pod(pod, self.namespace, {"metadata": {
            "labels": {KWOK_FAIL: "true"},
            "annotations": {f"{KWOK_FAIL}/exit-code": str(exit_code),
                            f"{KWOK_FAIL}/delay": "0ms", f"{KWOK_FAIL}/jitter-delay": "0ms"},
        }})

    def node_not_ready(self, node: str) -> None:
        """kwok's chaos stage: the node reports Ready=False (and keeps doing so)."""
        self.touched_nodes.add(node)
        self.core.patch_node(node, {"metadata": {
            "labels": {KWOK_NOT_READY: "true"},
            "annotations": {f"{KWOK_NOT_READY}/delay": "0ms",
                            f"{KWOK_NOT_READY}/jitter-delay": "0ms"},
        }})

    def gpu_unhealthy(self, node: str) -> None:
        """What a GPU health agent reports: condition GPUHealthy=False."""
        self.touched_nodes.add(node)
        self.set_gpu_condition(node, "False", "XidError", "Xid 79: GPU has fallen off the bus")

    def set_gpu_condition(self, node: str, status: str, reason: str, message: str) -> None:
        self.core.patch_node_status(node, {"status": {"conditions": [{
            "type": "GPUHealthy", "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}]}})

    def node(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = _json(self.core.read_node(name, _preload_content=False))
        return result

    def heal_node(self, node: str) -> None:
        """Undo injected faults and lift the fence, so later tests get a clean node."""
        with contextlib.suppress(client.ApiException):
            self.core.patch_node(node, {"metadata": {
                "labels": {KWOK_NOT_READY: None},
                "annotations": {f"{KWOK_NOT_READY}/delay": None,
                                f"{KWOK_NOT_READY}/jitter-delay": None}}})
            body = self.node(node)
            if any(c["type"] == "GPUHealthy" for c in body["status"].get("conditions") or []):
                self.set_gpu_condition(node, "True", "Healthy", "")
            for _ in range(5):
                patch = unfence_patch(self.node(node))
                if patch is None:
                    break
                try:
                    self.core.patch_node(node, patch,
                                         _content_type="application/merge-patch+json")
                except client.ApiException as exc:
                    if exc.status != 409:
                        raise


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@contextlib.contextmanager
def operator_env(kubeconfig: Path, base_spec: Path, workdir: Path,
                 start: bool = True) -> Iterator[OperatorEnv]:
    env = OperatorEnv(kubeconfig, base_spec, workdir)
    try:
        env.setup()
        if start:
            env.start_operator()
        yield env
    finally:
        env.close()
