"""From pending pods and PodGroups to the core's ``Gang`` values.

Rules:

* A pod labelled ``scheduling.x-k8s.io/pod-group: <name>`` belongs to that PodGroup in
  its namespace; without the PodGroup object the pods wait (it may be created after
  them) and report why. A pod without the label is a gang of one.
* ``minMember`` counts the whole group. Members already placed (assumed or bound, and
  not terminating) count towards it, so the gang submitted to the core asks only for the
  rest: after a restart in the middle of a gang, the scheduler finishes it rather than
  waiting for pods that are already running.
* Finishing a gang must not break its topology promise: when some members are placed
  and the constraint is ``required`` at a level, the rest are pinned (a node-affinity
  term on the level's label) to the one domain the placed members are in.
* Topology comes from the PodGroup's ``trainmaster.io/topology-domain`` / ``-mode``
  annotations, else from the config's policy by group size.
* An elastic PodGroup (``trainmaster.io/max-members``) becomes an elastic gang: its
  minimum is ``minMember`` less the members placed (at least one once it runs: a grow),
  and without topology annotations the policy applies to the size actually placed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from .._keys import HOSTNAME_LABEL, topology_label
from ..framework.model import (
    CLUSTER_LEVEL,
    NODE_LEVEL,
    Gang,
    NodeInfo,
    NodeSelectorRequirement,
    PodRequest,
    SelectorOperator,
    TopologyConstraint,
    TopologyMode,
)
from .composites import is_composite, missing_composite_message
from .config import SchedulerConfig
from .convert import PodGroupInfo
from .jobset_labels import JOBSET_GANG_PREFIX
from .upstream_groups import is_upstream, missing_message

LONE_PREFIX = "pod:"


@dataclass(frozen=True, slots=True)
class Waiting:
    """The pods cannot form a gang yet; ``reason`` is what they wait for."""

    key: str
    reason: str


def lone_key(pod: PodRequest) -> str:
    return f"{pod.namespace}/{LONE_PREFIX}{pod.name}"


def gang_key_of(pod: PodRequest) -> str:
    """The queue key of the gang a pending pod belongs to (its own for a lone pod)."""
    return pod.gang_key or lone_key(pod)


def lone_gang(pod: PodRequest) -> Gang:
    """A gang of one. The ``pod:`` prefix keeps it apart from a PodGroup of the same name."""
    return Gang(
        name=f"{LONE_PREFIX}{pod.name}",
        namespace=pod.namespace,
        members=(pod,),
        priority=pod.priority,
        creation_timestamp=pod.creation_timestamp,
        topology=TopologyConstraint(NODE_LEVEL, TopologyMode.REQUIRED),
    )


def _pin_label(node: NodeInfo, level: str) -> tuple[str, str] | None:
    key = HOSTNAME_LABEL if level == NODE_LEVEL else topology_label(level)
    value = node.labels.get(key)
    return None if value is None else (key, value)


def _pinned(
    members: Sequence[PodRequest], placed_nodes: Sequence[NodeInfo], level: str
) -> tuple[PodRequest, ...] | None:
    """Members with an affinity term holding them to the placed members' domain, or None
    when the placed members are not in exactly one domain of ``level``."""
    pins = {_pin_label(node, level) for node in placed_nodes}
    if len(pins) != 1:
        return None
    pin = pins.pop()
    if pin is None:
        return None
    term = NodeSelectorRequirement(pin[0], SelectorOperator.IN, (pin[1],))
    return tuple(dataclasses.replace(p, affinity=(*p.affinity, term)) for p in members)


def pinned_gang(gang: Gang, level: str, value: str) -> Gang:
    """``gang`` with every member held to the domain whose ``level`` label is ``value``."""
    key = HOSTNAME_LABEL if level == NODE_LEVEL else topology_label(level)
    term = NodeSelectorRequirement(key, SelectorOperator.IN, (value,))
    members = tuple(dataclasses.replace(p, affinity=(*p.affinity, term)) for p in gang.members)
    return dataclasses.replace(gang, members=members)


def assemble(
    key: str,
    group: PodGroupInfo | None,
    members: Sequence[PodRequest],
    placed_nodes: Sequence[NodeInfo],
    config: SchedulerConfig,
) -> Gang | Waiting:
    """The gang to submit for ``key`` (a PodGroup key): ``members`` are its pending pods,
    ``placed_nodes`` the nodes of its members already placed (one entry per pod)."""
    if group is None:
        if is_composite(key):
            return Waiting(key, missing_composite_message(key))
        if is_upstream(key):
            return Waiting(key, missing_message(key))
        namespace, _, name = key.partition("/")
        if name.startswith(JOBSET_GANG_PREFIX):
            return Waiting(key, f"waiting for JobSet {namespace}/"
                                f"{name[len(JOBSET_GANG_PREFIX):]} (its pods name it)")
        return Waiting(key, f"waiting for PodGroup {key} (pods name it in their label)")
    if group.invalid is not None:
        return Waiting(key, f"PodGroup {group.namespace}/{group.ref_name}: {group.invalid}")
    if group.problem:
        return Waiting(key, group.problem)
    ordered = tuple(sorted(members, key=lambda p: p.name))
    placed = len(placed_nodes)
    required = group.min_member or placed + len(ordered)
    if group.elastic:
        return _elastic(group, ordered, placed_nodes, config)
    topology = group.topology or config.topology_for(required)
    # A gang placed part by part is not pinned whole: its parts hold their own domains.
    if (placed and not group.part_level and topology.mode is TopologyMode.REQUIRED
            and topology.level != CLUSTER_LEVEL):
        pinned = _pinned(ordered, placed_nodes, topology.level)
        if pinned is not None:
            ordered = pinned
    return Gang(
        name=group.name,
        namespace=group.namespace,
        members=ordered,
        # 0 means "all of them": once minMember is met, extra pending members come along.
        min_member=max(0, required - placed),
        topology=topology,
        priority=max((p.priority for p in ordered), default=0),
        creation_timestamp=group.creation_timestamp
        or min((p.creation_timestamp for p in ordered), default=0.0),
        part_level=group.part_level,
        parts_share=group.parts_share,
        whole_level=group.whole_level,
    )


def _elastic(group: PodGroupInfo, ordered: tuple[PodRequest, ...],
             placed_nodes: Sequence[NodeInfo], config: SchedulerConfig) -> Gang:
    """An elastic group's pending members: admitted at ``minMember`` or more (nothing
    placed yet), or grown by one or more (it runs). A running group's required topology
    holds the added members to the placed members' domain, as for a rigid gang."""
    placed = len(placed_nodes)
    rules = () if group.topology is not None else tuple(
        (rule.max_nodes, TopologyConstraint(rule.domain, TopologyMode(rule.mode)))
        for rule in config.policy)
    topology = group.topology or config.topology_for(placed + len(ordered))
    if placed and topology.mode is TopologyMode.REQUIRED and topology.level != CLUSTER_LEVEL:
        pinned = _pinned(ordered, placed_nodes, topology.level)
        if pinned is not None:
            ordered = pinned
            rules = ()  # held to the placed members' domain: the rules no longer apply
    return Gang(
        name=group.name,
        namespace=group.namespace,
        members=ordered,
        min_member=max(1, group.min_member - placed),
        topology=topology,
        priority=max((p.priority for p in ordered), default=0),
        creation_timestamp=group.creation_timestamp
        or min((p.creation_timestamp for p in ordered), default=0.0),
        elastic=True,
        placed=placed,
        size_rules=rules,
    )
