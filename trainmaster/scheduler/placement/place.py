"""The placement core: put a whole gang into the smallest switch domain that holds it.

Algorithm for one gang (nothing is mutated; the caller assumes the result):

1. Members are grouped by signature (requests + the filters' cache keys). Static
   filters give each signature a node mask, cached in the snapshot.
2. Ranks are tried smallest first: node, lowest level (leaf), ..., top level, cluster;
   a ``required`` constraint stops at its level, ``preferred`` goes on to the cluster.
3. At a rank, domains whose aggregate free capacity (kept up to date by the snapshot)
   covers the gang's total request are candidates, tried in best-fit order: least free
   primary resource (GPUs) first, i.e. least left afterwards, then by name.
4. Inside a candidate, each signature group (largest pods first) is packed best-fit:
   nodes sorted by the score plugin (default: least GPUs left), each filled before the
   next. For a gang of identical pods this is exact (it fails only if the domain cannot
   hold the gang); mixed gangs are packed greedily.
5. The first candidate that packs wins; if none at any allowed rank, the gang gets an
   ``Unschedulable`` with the best domain's free vs. needed GPUs and per-node reasons,
   coded ``UNSCHEDULABLE_AND_UNRESOLVABLE`` if it could not fit even in an empty cluster.

Cost per gang: O(nodes) for the node rank, O(domains) aggregate checks per rank, and
O(nodes in the tried domains) for packing, never O(pods x nodes x domains). The snapshot
is read through its by-index API (``columns``, ``live_domains``, ``eligibility``): live
views, no copies.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..framework.interface import FilterPlugin, ScorePlugin
from ..framework.model import CLUSTER_LEVEL, Gang, TopologyMode
from ..framework.results import Binding, Placement, Unschedulable
from ..framework.status import Code
from ..plugins import DEFAULT_FILTERS, DEFAULT_SCORER
from ..state import ClusterState
from .parts import place_parts
from .placer import Placer
from .search import Search, last_rank, min_depth

__all__ = ["Binding", "Placement", "Placer", "Unschedulable", "place_gang"]


def place_gang(
    snapshot: ClusterState,
    gang: Gang,
    *,
    filters: Sequence[FilterPlugin] = DEFAULT_FILTERS,
    scorer: ScorePlugin = DEFAULT_SCORER,
    blocked: Collection[str] = (),
) -> Placement | Unschedulable:
    """Place every member of ``gang`` or none. Does not modify ``snapshot``.

    ``blocked`` names nodes the gang must not use (capacity reserved for a starving gang
    ahead of it in the queue).
    """
    if not gang.members:
        return Unschedulable(gang.key, f"gang {gang.key} has no members", Code.WAIT)
    if gang.part_level:  # a JobSet's Jobs, each in its own domain (parts.py)
        return place_parts(snapshot, gang, place_gang, filters=filters, scorer=scorer,
                           blocked=blocked)
    if len(gang.members) < gang.required_members:
        return Unschedulable(
            gang.key,
            f"gang {gang.key}: {len(gang.members)} of minMember {gang.required_members} pods exist",
            Code.WAIT,
        )
    try:
        cap_rank, last = last_rank(snapshot, gang)
    except ValueError as err:
        return Unschedulable(
            gang.key, f"gang {gang.key}: {err}", Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        )
    search = Search(snapshot, gang, filters, scorer, blocked)
    required = gang.topology.mode is TopologyMode.REQUIRED
    node_depth = min_depth(snapshot, cap_rank) if required else 0
    for rank in range(last + 1):
        found = search.at_rank(rank, node_depth)
        if found is not None:
            domain, assignment = found
            nodes = snapshot.columns.nodes
            return Placement(
                gang.key,
                snapshot.level_names[rank],
                domain,
                tuple(Binding(pod, nodes[i].name) for pod, i in assignment),
            )
    return _explain(search, last, node_depth)


def _explain(search: Search, last: int, node_depth: int) -> Unschedulable:
    snap, gang = search.snap, search.gang
    level = snap.level_names[last]
    where, free = search.best_free(last)
    topo = gang.topology
    head = f"gang {gang.key} ({len(gang.members)} pods, topology {topo.mode} {topo.level})"
    if level == CLUSTER_LEVEL:
        what = f"{head} does not fit in the cluster: {free} free {search.primary}"
    else:
        what = (
            f"{head} fits in no single {level}: best {level} {where} has "
            f"{free} free {search.primary}"
        )
    what += f", needs {search.need}"
    # Smallest first: a gang that fits an empty leaf is found after one small pack.
    # Node specs alone decide it, so gangs of the same shape share the answer.
    memo = snap.static_memo()
    key = ("ever", search.shape(), last, node_depth)
    ever = memo.get(key)
    if ever is None:
        ever = memo[key] = any(search.at_rank(r, node_depth, static=True)
                               for r in range(last + 1))
    code = Code.UNSCHEDULABLE if ever else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    never = "" if ever else "; it cannot fit even with every scheduled pod gone"
    return Unschedulable(gang.key, f"{what}{never}; {search.node_summary()}", code)
