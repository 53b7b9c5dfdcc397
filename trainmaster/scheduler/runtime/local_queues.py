"""Namespaced queues: in a team's namespace a queue label names a LocalQueue.

Kueue's rule, for the namespaces of the config's ``localQueueNamespaces``: a pod's (or
its PodGroup's) ``kueue.x-k8s.io/queue-name`` names a LocalQueue of the pod's own
namespace, whose ``spec.clusterQueue`` is the queue (a ClusterQueue, in Kueue's words)
its work is charged to; work without the label goes to the namespace's LocalQueue
``default`` (Kueue's default LocalQueue). A team can therefore only use the queues its
namespace's LocalQueues point at, which the platform team renders from the spec. A label
naming no LocalQueue there resolves to nothing: the gang waits and is told so
(``missing_message``). In every other namespace (the cluster's own, where the operator's
TrainingJobs run) the label names the queue directly, as it always did.

The index is fed by a LocalQueue informer (``on_local_queue``); a change reports the
namespace so the runtime re-assembles the gangs waiting there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from trainmaster.kubeclient import DELETED, Kube, Reflector, localqueue_path

DEFAULT_LOCAL_QUEUE = "default"
"""The LocalQueue of a team's work without a queue label."""


class LocalQueues:
    def __init__(self, namespaces: Iterable[str] = ()) -> None:
        self.namespaces = frozenset(namespaces)
        self._cluster_queue: dict[tuple[str, str], str] = {}
        """(namespace, LocalQueue) -> its spec.clusterQueue."""

    def applies(self, namespace: str) -> bool:
        """Whether queue labels in ``namespace`` name LocalQueues."""
        return namespace in self.namespaces

    def on_local_queue(self, kind: str, obj: Mapping[str, Any]) -> str | None:
        """Apply one informer event; the namespace whose resolution changed, else None."""
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        target = str((obj.get("spec") or {}).get("clusterQueue") or "")
        old = self._cluster_queue.get(key)
        if kind == DELETED or not target:
            if old is None:
                return None
            del self._cluster_queue[key]
        elif old == target:
            return None
        else:
            self._cluster_queue[key] = target
        return key[0] if self.applies(key[0]) else None

    @staticmethod
    def name_of(label: str | None) -> str:
        """The LocalQueue a label names (unlabelled: ``default``)."""
        return label or DEFAULT_LOCAL_QUEUE

    def resolve(self, namespace: str, label: str | None) -> str | None:
        """The queue that work labelled ``label`` in ``namespace`` is charged to: the
        label itself outside LocalQueue namespaces (None: unlabelled, the config's default
        queue); inside, its LocalQueue's clusterQueue, or None if there is no such
        LocalQueue (``found`` tells the two Nones apart)."""
        if not self.applies(namespace):
            return label or None
        return self._cluster_queue.get((namespace, self.name_of(label)))

    def found(self, namespace: str, label: str | None) -> bool:
        """False only for a LocalQueue namespace without the LocalQueue ``label`` names."""
        return not self.applies(namespace) or \
            (namespace, self.name_of(label)) in self._cluster_queue

    def in_namespace(self, namespace: str) -> dict[str, str]:
        """LocalQueue -> clusterQueue of one namespace."""
        return {name: cq for (ns, name), cq in sorted(self._cluster_queue.items())
                if ns == namespace}

    def missing_message(self, namespace: str, label: str | None) -> str:
        """What a gang whose LocalQueue does not exist is told: why, and what fixes it."""
        wanted = self.name_of(label)
        named = (f"names LocalQueue {wanted!r}" if label
                 else f"has no queue label, so it goes to LocalQueue {wanted!r}")
        have = self.in_namespace(namespace)
        choice = (f"name one of {', '.join(sorted(have))} in its kueue.x-k8s.io/queue-name "
                  "label" if have else "the namespace has no LocalQueue yet")
        return (f"LocalQueue {namespace}/{wanted} not found: the gang {named}, and in "
                f"namespace {namespace} a queue label names a LocalQueue of the namespace; "
                f"{choice}, or add it to the cluster spec's scheduler.localQueues")


def local_queue_reflector(api: Kube, namespace: str,
                          handler: Callable[[str, Any], None]) -> Reflector:
    """The LocalQueue informer of one team namespace (the scheduler may read them there
    only: a rule of its Role in that namespace). Optional: without the CRD (a scheduler
    run by hand) nothing resolves, and the gangs of that namespace wait, saying so."""
    return Reflector(api, localqueue_path(namespace), handler, name=f"localqueues-{namespace}",
                     optional=True)
