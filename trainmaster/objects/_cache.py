"""The node-local dataset cache: its config, its warm-ups' identity, and the warm-up Job of
one (node, dataset), which the operator creates as nodes appear and return
(trainmaster.operator._warmer): the stack itself renders no warm-up.

A warm-up pod only copies files (`trainmaster cache warm`): it gets no API token and no
rights. It ends with a termination message naming the datasets its node holds and those it
evicted; the operator, which may patch nodes anyway (fencing), sets the node's
`dataset.trainmaster.io/<name>` state from it, so no warm-up can write to any node."""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import unquote, urlsplit

from trainmaster.api import (
    DATASET_LABEL,
    SIMULATE_LABEL,
    WARM_NODE_LABEL,
    app_labels,
    parse_bytes,
)
from trainmaster.objects._networks import NETWORKS_ANNOTATION, storage_network_annotation
from trainmaster.objects._rbac import service_account
from trainmaster.objects._security import SECCOMP_RUNTIME_DEFAULT, confined_container
from trainmaster.spec import CacheSpec, ClusterSpec, Dataset


def _source_mounts(dataset: Dataset) -> list[dict[str, Any]]:
    """The dataset's volume, read-only at the path its file:// source names."""
    if dataset.volume is None:
        return []
    path = urlsplit(dataset.source).path
    return [{"name": "source", "mountPath": unquote(path), "readOnly": True}]


SECRET_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
"""Keys of a dataset's credentialsSecret, given to its warm-up pods as these variables."""


def s3_env(endpoint: str | None, region: str | None, secret: str | None
           ) -> list[dict[str, Any]]:
    """An S3 client's endpoint, region and credentials (from the named Secret, never from
    the spec), as the standard AWS variables boto3 reads."""
    env: list[dict[str, Any]] = []
    if endpoint:
        env.append({"name": "AWS_ENDPOINT_URL", "value": endpoint})
    if region:
        env.append({"name": "AWS_REGION", "value": region})
    if secret:
        env += [
            {"name": key, "valueFrom": {"secretKeyRef": {
                "name": secret, "key": key,
                # A session token is only for temporary credentials.
                **({"optional": True} if key == "AWS_SESSION_TOKEN" else {})}}}
            for key in SECRET_KEYS
        ]
    return env


def _source_env(dataset: Dataset) -> list[dict[str, Any]]:
    """An s3:// source's endpoint, region and credentials."""
    return s3_env(dataset.endpoint, dataset.region, dataset.credentials_secret)


def _source_volumes(dataset: Dataset) -> list[dict[str, Any]]:
    if dataset.volume is None:
        return []
    return [{"name": "source",
             "persistentVolumeClaim": {"claimName": dataset.volume, "readOnly": True}}]


def cache_config_name(cluster: str) -> str:
    """The cache's ConfigMap and ServiceAccount; the owner of every warm-up Job, so that
    deleting the stack (`pulumi destroy`) takes the warm-ups with it."""
    return f"{cluster}-dataset-cache"


def build_cache(spec: ClusterSpec) -> list[dict[str, Any]]:
    cache = spec.cache
    if cache is None:
        return []
    ns, cluster = spec.metadata.namespace, spec.metadata.name
    labels = app_labels("dataset-cache", "cache", cluster)
    config = {
        "medium": cache.medium,
        "path": cache.path,
        "capacityBytes": parse_bytes(cache.capacity),
        "datasets": {
            d.name: {"source": d.source, "sizeBytes": parse_bytes(d.size)}
            for d in cache.datasets
        },
    }
    name = cache_config_name(cluster)
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "data": {"cache.json": json.dumps(config, indent=2, sort_keys=True)},
        },
        service_account(name, ns, labels, automount=False),
    ]


def warmup_job_name(cluster: str, dataset: str, node: str) -> str:
    """The one warm-up Job of (node, dataset): `<cluster>-warmup-<dataset>-<hash>`, the hash
    of the node's name so any node name fits the 63 characters a Job's name may have (its
    pods carry it as a label). Deterministic: at most one warm-up per (node, dataset)."""
    digest = hashlib.sha256(f"{cluster}/{dataset}/{node}".encode()).hexdigest()[:10]
    return f"{cluster}-warmup-{dataset}"[: 63 - 11] + f"-{digest}"


def _pin(node: str) -> dict[str, Any]:
    """Required node affinity on the node's name (as the DaemonSet controller pins its
    pods): the scheduler still checks taints and resources and says why it cannot place
    the pod (PodScheduled=False), which `nodeName` would skip."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}


def build_node_warmup(
    spec: ClusterSpec,
    dataset: Dataset,
    node: str,
    tolerations: list[dict[str, Any]],
    simulated: bool = False,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The warm-up Job that fills `node`'s cache with `dataset`: one pod pinned to the node,
    tolerating what the jobs that read the dataset there tolerate (`tolerations`, computed
    by the operator) plus `cache.tolerations`. On a kwok node (`simulated`) kwok finishes
    the pod: a simulated node has no disk to fill."""
    cache = spec.cache
    assert cache is not None
    ns, cluster = spec.metadata.namespace, spec.metadata.name
    labels = {
        **app_labels(dataset.name, "cache-warmup", cluster),
        DATASET_LABEL: dataset.name,
        # A node name may be longer than a label value: then the hash in the name suffices.
        **({WARM_NODE_LABEL: node} if len(node) <= 63 else {}),
    }
    pod_labels = {**labels, **({SIMULATE_LABEL: "complete"} if simulated else {})}
    pod_meta: dict[str, Any] = {"labels": pod_labels}
    # The dataset's source is read over the storage network, where the cluster has one.
    storage = storage_network_annotation(spec)
    if storage is not None:
        pod_meta["annotations"] = {NETWORKS_ANNOTATION: storage}
    extra = [t.model_dump(by_alias=True, exclude_none=True) for t in cache.tolerations]
    meta: dict[str, Any] = {
        "name": warmup_job_name(cluster, dataset.name, node),
        "namespace": ns,
        "labels": labels,
    }
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "backoffLimit": 6,
            # A finished warm-up is gone after a while: its result is on the node, and a
            # failed one is then tried again (the operator re-creates it).
            "ttlSecondsAfterFinished": WARMUP_TTL_SECONDS,
            "template": {
                "metadata": pod_meta,
                "spec": {
                    "serviceAccountName": cache_config_name(cluster),
                    "automountServiceAccountToken": False,
                    "securityContext": {"seccompProfile": dict(SECCOMP_RUNTIME_DEFAULT)},
                    "restartPolicy": "OnFailure",
                    "affinity": _pin(node),
                    "tolerations": [*tolerations, *(t for t in extra if t not in tolerations)],
                    "containers": [_warmup_container(spec, cache, dataset)],
                    "volumes": [
                        {"name": "cache",
                         "hostPath": {"path": cache.path, "type": "DirectoryOrCreate"}},
                        *_source_volumes(dataset),
                    ],
                },
            },
        },
    }


WARMUP_TTL_SECONDS = 300
"""How long a finished warm-up Job stays (then the TTL controller deletes it)."""


def _warmup_container(spec: ClusterSpec, cache: CacheSpec, dataset: Dataset) -> dict[str, Any]:
    return {
        "name": "warmup",
        "image": spec.image.reference,
        "imagePullPolicy": spec.image.pull_policy,
        "command": [
            "trainmaster", "cache", "warm",
            "--dataset", dataset.name,
            "--source", dataset.source,
            "--path", f"{cache.path}/{dataset.name}",
            "--capacity", cache.capacity,
            "--size", dataset.size,
        ],
        # What the node holds after the warm-up (and what it evicted), or why it failed:
        # the operator sets the node's state from it, or shows the failure on waiting
        # jobs. A crash that wrote nothing leaves its last log lines.
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            *_source_env(dataset),
        ],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
        # Root, without capabilities: it writes the root-owned cache directory on the host
        # and nothing else.
        "securityContext": {**confined_container(), "readOnlyRootFilesystem": True},
        "volumeMounts": [
            {"name": "cache", "mountPath": cache.path},
            *_source_mounts(dataset),
        ],
    }
