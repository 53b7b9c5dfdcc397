"""The dataset-cache tests' world: an OperatorEnv whose spec has a cache with one dataset,
and a pool of its own kwok nodes (labelled and tainted with the test's tag), so the jobs
that read the dataset, which select and tolerate the pool, may use those nodes and no
other of the shared cluster's. Nodes are deleted (with their cache states) at the end."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes.client.exceptions import ApiException

from tests.conftest import LocalCluster
from tests.operator.kit import OperatorEnv, job_doc
from trainmaster.api import dataset_label
from trainmaster.objects import build_cache
from trainmaster.spec import validate_data

POOL_KEY = "tmtest.trainmaster.io/pool"


class CacheWorld:
    def __init__(self, env: OperatorEnv, dataset: str, tag: str) -> None:
        self.env = env
        self.dataset = dataset
        self.tag = tag
        self.nodes: list[str] = []

    def add_node(self, name: str, gpus: int = 8, cpu: str = "64") -> str:
        """A kwok node of the pool: Ready within seconds, tainted so nothing else lands."""
        full = f"tmc-{self.tag}-{name}"
        alloc = {"nvidia.com/gpu": str(gpus), "cpu": cpu, "memory": "512Gi", "pods": "110"}
        self.env.core.create_node({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": full,
                         "labels": {"kubernetes.io/hostname": full, POOL_KEY: self.tag},
                         "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {"taints": [{"key": POOL_KEY, "value": self.tag, "effect": "NoSchedule"}]},
            "status": {"capacity": alloc, "allocatable": alloc},
        })
        self.nodes.append(full)
        return full

    def reader(self, name: str = "reader", nodes: int = 2) -> dict[str, Any]:
        """A job reading the dataset, placed on the pool (its selector and toleration)."""
        return {**job_doc(name, nodes=nodes), "datasets": [self.dataset],
                "nodeSelector": {POOL_KEY: self.tag},
                "tolerations": [{"key": POOL_KEY, "operator": "Exists",
                                 "effect": "NoSchedule"}]}

    def node(self, name: str) -> dict[str, Any]:
        return self.env.node(name)

    def state(self, name: str) -> tuple[str | None, dict[str, Any]]:
        """The node's label and annotation for the dataset."""
        meta = self.node(name)["metadata"]
        key = dataset_label(self.dataset)
        raw = (meta.get("annotations") or {}).get(key)
        return (meta.get("labels") or {}).get(key), (json.loads(raw) if raw else {})

    def warmup_jobs(self) -> list[dict[str, Any]]:
        return [j for j in self.env.batch.list_namespaced_job(
            self.env.namespace, label_selector=f"trainmaster.io/dataset={self.dataset}",
            _preload_content=False).json()["items"]
            if not j["metadata"].get("deletionTimestamp")]

    def close(self) -> None:
        for name in self.nodes:
            with contextlib.suppress(ApiException):
                self.env.core.delete_node(name)


@contextlib.contextmanager
def cache_world(cluster: LocalCluster, tmp_path: Path, wait: bool = True,
                **cache: Any) -> Iterator[CacheWorld]:
    tag = uuid.uuid4().hex[:6]
    dataset = f"ds-{tag}"
    env = OperatorEnv(cluster.kubeconfig, cluster.spec, tmp_path)
    data = env.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    data["cache"] = {"capacity": "100Gi", "warmup": True, "waitForWarmup": wait,
                     "datasets": [{"name": dataset, "source": f"s3://corpus/{dataset}",
                                   "size": "1Gi"}], **cache}
    env.spec = validate_data(data, "optest")
    world = CacheWorld(env, dataset, tag)
    try:
        env.setup()
        # What the stack renders for the cache: its ConfigMap (owner of the warm-ups) and
        # the warm-ups' ServiceAccount.
        for obj in build_cache(env.spec):
            if obj["kind"] == "ConfigMap":
                env.core.create_namespaced_config_map(env.namespace, obj)
            else:
                env.core.create_namespaced_service_account(env.namespace, obj)
        env.start_operator()
        yield world
    finally:
        try:
            env.close()
        finally:
            world.close()
