"""The teams' namespaced queues: one LocalQueue object per `scheduler.localQueues` entry
(Kueue's LocalQueue, in trainmaster's group) and, in each namespace that has one, the Role
its users are bound to (Kueue's `batch-user` role, for trainmaster's gangs).

The Role is rendered without a binding: who the team is (a group of the cluster's
identity provider, or ServiceAccounts) is the platform team's to say, with a RoleBinding
in that namespace. It grants nothing outside the namespace and nothing cluster-wide: the
team creates its Jobs and PodGroups, reads its pods, Events and LocalQueues, and which
scheduler queue its work is charged to is the LocalQueue's, which it cannot change."""

from __future__ import annotations

from typing import Any

from trainmaster.api import (
    API_VERSION,
    GROUP,
    LOCALQUEUE_KIND,
    LOCALQUEUE_PLURAL,
    PODGROUP_GROUP,
    PODGROUP_PLURAL,
    app_labels,
)
from trainmaster.objects._rbac import Rules, role
from trainmaster.spec import ClusterSpec

TENANT_RULES: Rules = [
    {"apiGroups": ["batch"], "resources": ["jobs"],
     "verbs": ["get", "list", "watch", "create", "delete"]},
    {"apiGroups": [PODGROUP_GROUP], "resources": [PODGROUP_PLURAL],
     "verbs": ["get", "list", "watch", "create", "delete"]},
    {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [GROUP], "resources": [LOCALQUEUE_PLURAL], "verbs": ["get", "list", "watch"]},
]  # fmt: skip
"""What a team may do in its own namespace: submit gangs (a Job and its PodGroup, naming
a LocalQueue), watch them, and read the LocalQueues it may name."""

LOCALQUEUE_READ: Rules = [
    {"apiGroups": [GROUP], "resources": [LOCALQUEUE_PLURAL], "verbs": ["get", "list", "watch"]},
]
"""The scheduler's one right on LocalQueues, in each team namespace (a rule of its Role
there): it resolves the queue labels of that namespace through them."""


def tenant_role_name(spec: ClusterSpec) -> str:
    """The Role a team's users are bound to in their namespace."""
    return f"{spec.metadata.name}-queue-user"


def local_queue_namespaces(spec: ClusterSpec) -> list[str]:
    """The namespaces whose queue labels name LocalQueues: with any LocalQueue in the
    spec, every served namespace but the cluster's (whose jobs name queues directly)."""
    if not spec.scheduler.local_queues:
        return []
    return [n for n in dict.fromkeys(spec.scheduler.namespaces) if n != spec.metadata.namespace]


def build_local_queues(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The LocalQueue objects, then one tenant Role per namespace that resolves them."""
    objs: list[dict[str, Any]] = [
        {
            "apiVersion": API_VERSION,
            "kind": LOCALQUEUE_KIND,
            "metadata": {
                "name": local.name,
                "namespace": local.namespace,
                "labels": app_labels(local.name, "local-queue", spec.metadata.name),
            },
            "spec": {"clusterQueue": local.cluster_queue},
        }
        for local in spec.scheduler.local_queues
    ]
    labels = app_labels(tenant_role_name(spec), "queue-user", spec.metadata.name)
    for namespace in local_queue_namespaces(spec):
        objs.append(role(tenant_role_name(spec), namespace, labels, TENANT_RULES))
    return objs
