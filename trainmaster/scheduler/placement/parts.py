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

An upstream composite group (``runtime/composites.py``) is placed the same way, level by
level: its children are the parts, each whole in one domain of ``part_level`` (children
may share one: ``parts_share``), and all of them inside one domain of ``whole_level``,
tried domain by domain.
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
    """Place every part of ``gang`` (``gang.part_level`` set) or none; with
    ``gang.whole_level``, all of them inside one domain of that level, tried most
    loaded first (best fit, as the ordinary placement prefers)."""
    if len(gang.members) < gang.required_members:
        return Unschedulable(
            gang.key,
            f"gang {gang.key}: {len(gang.members)} of minMember {gang.required_members} pods exist",
            Code.WAIT,
        )
    if not gang.whole_level:
        return _parts_in(snapshot, gang, place, filters, scorer, set(blocked))
    whole = gang.whole_level
    views = sorted(snapshot.domains(whole), key=lambda v: (sum(v.free.values()), v.name))
    first: Unschedulable | None = None
    for view in views:
        inside = set(view.nodes)
        outside = {n.name for n in snapshot.nodes if n.name not in inside}
        result = _parts_in(snapshot, gang, place, filters, scorer, set(blocked) | outside)
        if isinstance(result, Placement):
            return Placement(gang.key, whole, view.name, result.bindings)
        first = first or result
    detail = f": in {whole} {views[0].name}, {first.reason}" if first and views else ""
    return Unschedulable(
        gang.key,
        f"gang {gang.key} ({len(gang.members)} pods in parts of one {gang.part_level} each, "
        f"all in one {whole}) fits in no single {whole}{detail}",
        first.code if first else Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def _parts_in(snapshot: ClusterState, gang: Gang, place: Placer,
              filters: Sequence[FilterPlugin], scorer: ScorePlugin,
              held_out: set[str]) -> Placement | Unschedulable:
    """Every part placed with the nodes of ``held_out`` off limits, or none."""
    level = gang.part_level
    used: list[str] = []
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
            if not gang.parts_share:
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
