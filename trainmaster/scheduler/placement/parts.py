"""A gang placed part by part: each part whole in its own domain of one level.

JobSet's exclusive topology (``alpha.jobset.sigs.k8s.io/exclusive-topology``) asks that
each Job of a JobSet land in one domain of a level (a leaf, say), one Job per domain. The
gang stays all-or-nothing: the parts are placed one after another with the ordinary
placement, each kept off the nodes of the domains the parts before it took (as nodes
reserved for a starving gang are) and assumed on the snapshot so the next part sees the
capacity it took; every assumption is released before returning, so the snapshot is
unchanged. The gang gets every binding, or an ``Unschedulable`` naming the first part that
did not fit.

Parts are placed in name order, first fit: a gang whose parts would all fit only in
another order of domains can be refused where an exhaustive search would succeed. With
identical parts (a JobSet's replicas) and best-fit domains first, that does not arise.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..framework.interface import FilterPlugin, ScorePlugin
from ..framework.model import Gang, PodRequest, TopologyConstraint, TopologyMode
from ..framework.results import Binding, Placement, Unschedulable
from ..framework.status import Code
from ..state import ClusterState
from .placer import Placer


def parts_of(gang: Gang) -> dict[str, list[PodRequest]]:
    """Members by part, parts in name order."""
    parts: dict[str, list[PodRequest]] = {}
    for pod in sorted(gang.members, key=lambda p: (p.part, p.name)):
        parts.setdefault(pod.part, []).append(pod)
    return parts


def place_parts(
    snapshot: ClusterState,
    gang: Gang,
    place: Placer,
    *,
    filters: Sequence[FilterPlugin],
    scorer: ScorePlugin,
    blocked: Collection[str],
) -> Placement | Unschedulable:
    """Place every part of ``gang`` (``gang.part_level`` set) or none."""
    if len(gang.members) < gang.required_members:
        return Unschedulable(
            gang.key,
            f"gang {gang.key}: {len(gang.members)} of minMember {gang.required_members} pods exist",
            Code.WAIT,
        )
    level = gang.part_level
    used: list[str] = []
    held_out: set[str] = set(blocked)
    bindings: list[Binding] = []
    assumed: list[str] = []
    try:
        for name, members in parts_of(gang).items():
            part = Gang(name=gang.name, namespace=gang.namespace, members=tuple(members),
                        topology=TopologyConstraint(level, TopologyMode.REQUIRED),
                        priority=gang.priority, creation_timestamp=gang.creation_timestamp)
            result = place(snapshot, part, filters=filters, scorer=scorer, blocked=held_out)
            if isinstance(result, Unschedulable):
                return Unschedulable(
                    gang.key,
                    f"gang {gang.key} ({len(gang.members)} pods in parts of one {level} each): "
                    f"part {name or '(none)'} fits in no {level} left: {result.reason}",
                    result.code)
            domains = {snapshot.domain_of(b.node, level) or b.node for b in result.bindings}
            used.extend(sorted(domains))
            # No two parts in one domain: the next parts keep off every node of these.
            held_out.update(n for view in snapshot.domains(level) if view.name in domains
                            for n in view.nodes)
            for binding in result.bindings:
                snapshot.assume(binding.pod, binding.node)
                assumed.append(binding.pod.uid)
                bindings.append(binding)
    finally:
        for uid in reversed(assumed):
            snapshot.forget(uid)
    return Placement(gang.key, level, ",".join(used), tuple(bindings))
