"""The node-local dataset cache: its config, a warm-up Job per dataset, and the
ClusterRole that lets warm-up pods label the nodes they filled."""

from __future__ import annotations

import json
from typing import Any

from trainmaster.objects._labels import DOMAIN, app_labels
from trainmaster.objects._rbac import service_account_with_cluster_role
from trainmaster.spec import ClusterSpec, parse_quantity


def dataset_label(dataset: str) -> str:
    """Node label a warm-up sets once the node holds the dataset: <label>=true."""
    return f"dataset.{DOMAIN}/{dataset}"


def build_cache(spec: ClusterSpec) -> list[dict[str, Any]]:
    cache = spec.cache
    if cache is None:
        return []
    ns, cluster = spec.metadata.namespace, spec.metadata.name
    labels = app_labels("dataset-cache", "cache", cluster)
    config = {
        "medium": cache.medium,
        "path": cache.path,
        "capacityBytes": parse_quantity(cache.capacity),
        "datasets": {
            d.name: {"source": d.source, "sizeBytes": parse_quantity(d.size)}
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
        # Warm-up pods record what their node holds as a node label: get + patch nodes only.
        *service_account_with_cluster_role(
            name,
            ns,
            labels,
            [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}],
        ),
    ]
    if not cache.warmup:
        return objs
    nodes = len(spec.nodes)
    for dataset in cache.datasets:
        job_labels = {
            **app_labels(dataset.name, "cache-warmup", cluster),
            f"{DOMAIN}/dataset": dataset.name,
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
                            "restartPolicy": "OnFailure",
                            "affinity": {
                                "podAntiAffinity": {
                                    "requiredDuringSchedulingIgnoredDuringExecution": [
                                        {
                                            "labelSelector": {
                                                "matchLabels": {f"{DOMAIN}/dataset": dataset.name}
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
                                        "--label",
                                        dataset_label(dataset.name),
                                    ],
                                    "env": [
                                        {
                                            "name": "NODE_NAME",
                                            "valueFrom": {
                                                "fieldRef": {"fieldPath": "spec.nodeName"}
                                            },
                                        }
                                    ],
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                                    "volumeMounts": [{"name": "cache", "mountPath": cache.path}],
                                }
                            ],
                            "volumes": [
                                {
                                    "name": "cache",
                                    "hostPath": {"path": cache.path, "type": "DirectoryOrCreate"},
                                }
                            ],
                        },
                    },
                },
            }
        )
    return objs
