"""A job as a gang: the one mapping from what a job asks (pods, GPUs, queue, priority, its
own topology constraint) to what the scheduler is asked for. The operator writes it as a
PodGroup and its pods (trainmaster.objects.build_gang), the simulator submits it directly,
and the scheduler applies the same policy to a PodGroup that names no topology.

Plain values in, plain values out, so every side can use it without the others' types.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

CLUSTER_DOMAIN: Final = "cluster"
"""The domain that holds every node: no constraint on placement."""
NODE_DOMAIN: Final = "node"
"""The domain of a single node (the smallest)."""
PREFERRED: Final = "preferred"
REQUIRED: Final = "required"


class SizeRule(Protocol):
    """One rule of a topology policy (the spec's `scheduler.topologyPolicy[]`)."""

    @property
    def max_nodes(self) -> int | None: ...
    @property
    def domain(self) -> str: ...
    @property
    def mode(self) -> str: ...


@dataclass(frozen=True)
class PolicyRule:
    """A SizeRule as plain values: what the scheduler reads from its config file without
    loading the spec model (whose TopologyRule validates the same fields)."""

    domain: str
    mode: str = PREFERRED
    max_nodes: int | None = None


def default_policy(levels: Sequence[str]) -> tuple[PolicyRule, ...]:
    """Where gangs go when nobody said: a one-node job on one node (required); larger ones
    prefer one domain of the last (smallest) of `levels`. The spec's default policy and the
    scheduler's when its config names none."""
    return (PolicyRule(NODE_DOMAIN, REQUIRED, max_nodes=1),
            PolicyRule(levels[-1] if levels else CLUSTER_DOMAIN, PREFERRED))


@dataclass(frozen=True)
class GangShape:
    """What the scheduler is asked to place for one attempt of a job."""

    pods: int
    """Members that must run, one per node: the PodGroup's minMember (an elastic job's
    minNodes)."""
    gpus_per_pod: int
    queue: str
    priority: int | None
    """None: the queue's priority."""
    domain: str
    """The topology domain the gang must (mode `required`) or should fit in."""
    mode: str
    max_pods: int | None = None
    """An elastic job's members (maxNodes; annotation `trainmaster.io/max-members`): the
    gang has this many pods and runs with any number from `pods` up. None: rigid."""
    sized: bool = False
    """The topology follows the size actually placed (an elastic job without its own
    constraint): `domain`/`mode` are the policy's for `pods` only, and the PodGroup names
    no topology, so the scheduler applies its policy to the size it places."""

    @property
    def members(self) -> int:
        """Pods in the gang: `max_pods` for an elastic job, else `pods`."""
        return self.max_pods if self.max_pods is not None else self.pods

    @property
    def gpus(self) -> int:
        """GPUs of the members that must run (minResources)."""
        return self.pods * self.gpus_per_pod


def rule_for_size(policy: Iterable[SizeRule], pods: int) -> tuple[str, str]:
    """(domain, mode) of the first rule whose maxNodes covers `pods` (one pod per node),
    else anywhere in the cluster, preferred."""
    for rule in policy:
        if rule.max_nodes is None or pods <= rule.max_nodes:
            return rule.domain, rule.mode
    return CLUSTER_DOMAIN, PREFERRED


def gang_shape(pods: int, gpus_per_pod: int, queue: str, priority: int | None,
               own: tuple[str, str] | None, policy: Iterable[SizeRule],
               elastic: tuple[int, int] | None = None) -> GangShape:
    """The gang of a job: its own (domain, mode) when it names one, else the policy's rule
    for its size. ``elastic``: (minNodes, maxNodes); the gang then must run ``minNodes``
    pods and has ``maxNodes``, and ``pods`` is not used."""
    if elastic is not None:
        low, high = elastic
        domain, mode = own if own is not None else rule_for_size(policy, low)
        return GangShape(low, gpus_per_pod, queue, priority, domain, mode,
                         max_pods=high, sized=own is None)
    domain, mode = own if own is not None else rule_for_size(policy, pods)
    return GangShape(pods, gpus_per_pod, queue, priority, domain, mode)
