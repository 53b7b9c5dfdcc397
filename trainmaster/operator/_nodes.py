"""The operator's in-memory book of nodes: each node's health, and which TrainingJobs have
pods on it (so a node going bad wakes exactly those jobs).

Fed by the node and pod watches; rebuilt from their initial listing after a restart, so it
never needs persisting. A node not seen yet counts as healthy: the node watch will report
it, and then the jobs on it are woken.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from trainmaster.operator._model import Key, NodeHealth


class NodeBook:
    def __init__(self) -> None:
        self._health: dict[str, NodeHealth] = {}
        self._pods: dict[str, tuple[str, Key]] = {}  # pod uid -> (node, job)
        self._by_node: dict[str, dict[str, Key]] = defaultdict(dict)  # node -> uid -> job

    def update(self, node: str, health: NodeHealth) -> bool:
        """Record a node's health; True if its usability changed."""
        old = self._health.get(node, NodeHealth())
        if health.usable:
            self._health.pop(node, None)  # only unusable nodes are kept
        else:
            self._health[node] = health
        return old.usable != health.usable or old.problem != health.problem

    def forget(self, node: str) -> None:
        self._health.pop(node, None)

    def health(self) -> Mapping[str, NodeHealth]:
        """Unusable nodes only; absent means healthy."""
        return self._health

    def track_pod(self, uid: str, node: str | None, job: Key) -> None:
        self.untrack_pod(uid)
        if node:
            self._pods[uid] = (node, job)
            self._by_node[node][uid] = job

    def untrack_pod(self, uid: str) -> None:
        old = self._pods.pop(uid, None)
        if old is not None:
            pods = self._by_node.get(old[0])
            if pods is not None:
                pods.pop(uid, None)
                if not pods:
                    del self._by_node[old[0]]

    def jobs_on(self, node: str) -> set[Key]:
        return set(self._by_node.get(node, {}).values())
