"""The node-local dataset cache: its config and a warm-up Job per dataset.

A warm-up pod only copies files (`trainmaster cache warm`): it gets no API token and no
rights. It ends with a termination message naming the datasets its node holds and those it
evicted; the operator, which may patch nodes anyway (fencing), labels the node
`dataset.trainmaster.io/<name>=true` for each held one and removes the label of each evicted
one once the warm-up pod has succeeded, so no warm-up can write to any node."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote, urlsplit

from trainmaster.api import DATASET_LABEL, GPU_RESOURCE, app_labels, parse_bytes
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


def _source_env(dataset: Dataset) -> list[dict[str, Any]]:
    """An s3:// source's endpoint, region and credentials (from the Secret the dataset
    names, never from the spec), as the standard AWS variables boto3 reads."""
    env: list[dict[str, Any]] = []
    if dataset.endpoint:
        env.append({"name": "AWS_ENDPOINT_URL", "value": dataset.endpoint})
    if dataset.region:
        env.append({"name": "AWS_REGION", "value": dataset.region})
    if dataset.credentials_secret:
        env += [
            {"name": key, "valueFrom": {"secretKeyRef": {
                "name": dataset.credentials_secret, "key": key,
                # A session token is only for temporary credentials.
                **({"optional": True} if key == "AWS_SESSION_TOKEN" else {})}}}
            for key in SECRET_KEYS
        ]
    return env


def _source_volumes(dataset: Dataset) -> list[dict[str, Any]]:
    if dataset.volume is None:
        return []
    return [{"name": "source",
             "persistentVolumeClaim": {"claimName": dataset.volume, "readOnly": True}}]


def _placement(cache: CacheSpec) -> dict[str, Any]:
    """Where warm-ups run: the GPU nodes whose caches jobs read, so they tolerate the GPU
    taint as the jobs' pods do; `cache.nodeSelector`/`tolerations` narrow or widen it."""
    tolerations = [
        {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
        *(t.model_dump(by_alias=True, exclude_none=True) for t in cache.tolerations),
    ]
    out: dict[str, Any] = {"tolerations": tolerations}
    if cache.node_selector:
        out["nodeSelector"] = dict(cache.node_selector)
    return out


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
    name = f"{cluster}-dataset-cache"
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "data": {"cache.json": json.dumps(config, indent=2, sort_keys=True)},
        },
        service_account(name, ns, labels, automount=False),
    ]
    if not cache.warmup:
        return objs
    nodes = len(spec.nodes)
    for dataset in cache.datasets:
        job_labels = {
            **app_labels(dataset.name, "cache-warmup", cluster),
            DATASET_LABEL: dataset.name,
        }
        objs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"{cluster}-warmup-{dataset.name}",
                    "namespace": ns,
                    "labels": job_labels,
                    # A warm-up copies a whole dataset to every node, for hours on a real
                    # cluster: `pulumi up` must not wait for it to finish.
                    "annotations": {"pulumi.com/skipAwait": "true"},
                },
                "spec": {
                    # One pod per node: spread by anti-affinity, each fills its node's cache.
                    "completions": nodes,
                    "parallelism": min(nodes, 64),
                    "backoffLimit": 6,
                    "completionMode": "Indexed",
                    "template": {
                        "metadata": {"labels": job_labels},
                        "spec": {
                            "serviceAccountName": name,
                            "automountServiceAccountToken": False,
                            "securityContext": {"seccompProfile": dict(SECCOMP_RUNTIME_DEFAULT)},
                            "restartPolicy": "OnFailure",
                            "affinity": {
                                "podAntiAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": [
                                        {
                                            "labelSelector": {
                                                "matchLabels": {DATASET_LABEL: dataset.name}
                                            },
                                            "topologyKey": "kubernetes.io/hostname",
                                        }
                                    ]
                                }
                            },
                            "containers": [
                                {
                                    "name": "warmup",
                                    "image": spec.image.reference,
                                    "imagePullPolicy": spec.image.pull_policy,
                                    "command": [
                                        "trainmaster",
                                        "cache",
                                        "warm",
                                        "--dataset",
                                        dataset.name,
                                        "--source",
                                        dataset.source,
                                        "--path",
                                        f"{cache.path}/{dataset.name}",
                                        "--capacity",
                                        cache.capacity,
                                        "--size",
                                        dataset.size,
                                    ],
                                    # What the node holds after the warm-up (and what it
                                    # evicted), or why it failed: the operator labels the
                                    # node from it, or shows the failure on waiting jobs.
                                    # A crash that wrote nothing leaves its last log lines.
                                    "terminationMessagePath": "/dev/termination-log",
                                    "terminationMessagePolicy": "FallbackToLogsOnError",
                                    "env": [
                                        {
                                            "name": "NODE_NAME",
                                            "valueFrom": {
                                                "fieldRef": {"fieldPath": "spec.nodeName"}
                                            },
                                        },
                                        *_source_env(dataset),
                                    ],
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                                    # Root, without capabilities: it writes the root-owned
                                    # cache directory on the host and nothing else.
                                    "securityContext": {
                                        **confined_container(),
                                        "readOnlyRootFilesystem": True,
                                    },
                                    "volumeMounts": [
                                        {"name": "cache", "mountPath": cache.path},
                                        *_source_mounts(dataset),
                                    ],
                                }
                            ],
                            "volumes": [
                                {
                                    "name": "cache",
                                    "hostPath": {"path": cache.path, "type": "DirectoryOrCreate"},
                                },
                                *_source_volumes(dataset),
                            ],
                            **_placement(cache),
                        },
                    },
                },
            }
        )
    return objs
