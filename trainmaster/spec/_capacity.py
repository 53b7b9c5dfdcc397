"""How many nodes that can hold a job's pods one topology domain holds at most.

Spec validation and the policy pack both ask this for every job; a spec may list 100,000
nodes and thousands of jobs, so answers are computed once per GPU size (and domain).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from trainmaster.spec._model import ResolvedNode


class DomainCapacity:
    """Per GPU size: the nodes that can hold such a pod, and the most of them one domain
    (`node`, a level of `levels`, `cluster`) holds."""

    def __init__(self, nodes: Sequence[ResolvedNode], levels: Sequence[str]) -> None:
        self.nodes = nodes
        self.levels = tuple(levels)
        self.most_gpus = max((n.gpus for n in nodes), default=0)
        self._eligible: dict[int, list[ResolvedNode]] = {}
        self._largest: dict[tuple[int, str], int | None] = {}

    def eligible(self, gpus: int) -> list[ResolvedNode]:
        """The nodes a pod asking for `gpus` GPUs fits on (by GPU count)."""
        if gpus not in self._eligible:
            self._eligible[gpus] = [n for n in self.nodes if n.gpus >= gpus]
        return self._eligible[gpus]

    def largest(self, gpus: int, domain: str) -> int | None:
        """The most eligible nodes one `domain` holds; None when `domain` is not one."""
        key = (gpus, domain)
        if key not in self._largest:
            self._largest[key] = self._count(gpus, domain)
        return self._largest[key]

    def _count(self, gpus: int, domain: str) -> int | None:
        eligible = self.eligible(gpus)
        if domain == "node":
            return 1 if eligible else 0
        if domain == "cluster":
            return len(eligible)
        if domain not in self.levels:
            return None
        depth = self.levels.index(domain) + 1
        counts = Counter(n.switches[:depth] for n in eligible)
        return max(counts.values(), default=0)
