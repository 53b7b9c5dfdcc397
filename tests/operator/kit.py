"""Builders and a real-cluster harness for the operator tests.

`OperatorEnv` is one test's world, the same ``OperatorWorld`` the recovery benchmark uses:
its own namespace with the cluster-spec ConfigMap, a checkpoint volume, and an operator
serving only that namespace (in a thread here, or as a `python -m trainmaster operator
run` subprocess). It undoes everything it did on close, including node faults it
injected and the fences that followed.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client

from trainmaster.api import ATTEMPT_LABEL, JOB_LABEL
from trainmaster.kubeclient import generated_client
from trainmaster.objects import (
    TRAININGJOB_GROUP,
    TRAININGJOB_PLURAL,
    TRAININGJOB_VERSION,
    build_training_job,
    spec_configmap_name,
)
from trainmaster.operator import OperatorConfig, OperatorThread, SpecRef
from trainmaster.polling import wait_until
from trainmaster.spec import ClusterSpec, Job, load_spec, validate_data
from trainmaster.testworld import OperatorWorld, now_rfc3339

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
WAIT = 120.0
"""Generous: the CPU is shared with other suites; no test asserts a duration."""


def wait_for(check: Callable[[], T | None], what: str, timeout: float = WAIT,
             every: float = 0.25) -> T:
    """``wait_until`` with the tests' generous default timeout."""
    return wait_until(check, what, timeout, every)


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


class OperatorEnv(OperatorWorld):
    """``OperatorWorld`` plus the operator in a thread, and the generated typed clients
    (``core``, ``batch``, ``custom``) for the tests' own reads and writes."""

    def __init__(self, kubeconfig: Path, base_spec: Path, workdir: Path) -> None:
        super().__init__(kubeconfig, spec_for(base_spec, f"tmop-{uuid.uuid4().hex[:8]}"),
                         workdir / "operator.log")
        self.workdir = workdir
        self.api = generated_client(kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.operator: OperatorThread | None = None

    def setup(self) -> OperatorEnv:
        super().setup()
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
            # kopf finishes the handlers in flight before it stops: on the 500-node bench
            # cluster the per-node warm-ups of a dataset can take longer than the thread's
            # default 30 s on a loaded machine (one fresh-clone CI run errored there).
            self.operator.stop(timeout=120)
            self.operator = None

    def kill_process(self) -> None:
        """SIGKILL the operator process: no cleanup handlers, like an OOM kill."""
        self.stop_process(kill=True)

    def close(self) -> None:
        self.stop_operator()
        self.kill_process()
        try:
            super().close()
        finally:
            self.api.close()

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
                                                    "time": now_rfc3339()}})

    @contextlib.contextmanager
    def heartbeats(self, name: str, every: float = 2.0) -> Iterator[None]:
        """Report heartbeats like a live launcher until the block ends."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.is_set():
                with contextlib.suppress(Exception):
                    self.patch_status(name, {"lastHeartbeat": now_rfc3339()})
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

    # --- faults (fail_pod, node_not_ready, heal_node: OperatorWorld) ----------------------

    def gpu_unhealthy(self, node: str) -> None:
        """What a GPU health agent reports: condition GPUHealthy=False."""
        self.set_gpu_condition(node, "False", "XidError", "Xid 79: GPU has fallen off the bus")

    def node(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = _json(self.core.read_node(name, _preload_content=False))
        return result


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
