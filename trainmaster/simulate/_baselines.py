"""Classic placement policies as plug-ins of the scheduler's ``Placer`` interface.

Each is ``place_gang``'s signature and contract (all members or none, ``blocked`` nodes
and the static filters respected, the snapshot untouched); only the node and domain order
differ. A ``required`` topology constraint is honoured by every policy (it is the job's
requirement, not a preference); ``preferred`` is ignored by the topology-blind ones.

* ``first-fit``: the lowest-index nodes (rack order) first.
* ``spread``: the nodes with the most free GPUs first (kube-scheduler's default
  ``LeastAllocated`` bias).
* ``slurm-tree``: Slurm's topology/tree idea: the lowest switch level where one switch
  can hold the gang, the best-fit switch there (least free GPUs), nodes in index order.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence

from trainmaster.scheduler import (
    GPU,
    Binding,
    BlockedNodes,
    ClusterState,
    Code,
    FilterPlugin,
    Gang,
    LiveDomain,
    Placement,
    Placer,
    PodRequest,
    ScorePlugin,
    TopologyMode,
    Unschedulable,
    fit_count,
)

NodeOrder = Callable[[ClusterState, Sequence[int] | None], Iterable[int]]
"""Nodes to try, in order: all schedulable nodes (``None``) or those of one domain."""


def _groups(gang: Gang) -> list[tuple[tuple[tuple[str, int], ...], list[PodRequest]]]:
    by: dict[tuple[tuple[str, int], ...], list[PodRequest]] = {}
    for pod in gang.members:
        by.setdefault(tuple(sorted(pod.effective_requests.items())), []).append(pod)
    return sorted(by.items(), key=lambda kv: -dict(kv[0]).get(GPU, 0))


def _fill(
    snapshot: ClusterState,
    gang: Gang,
    order: Iterable[int],
    mask: Sequence[int],
) -> list[tuple[PodRequest, int]] | None:
    """Greedy: each pod group fills nodes in ``order`` as far as each holds."""
    free = snapshot.columns.free
    overlay: dict[int, dict[str, int]] = {}
    out: list[tuple[PodRequest, int]] = []
    nodes = list(order) if len(_groups(gang)) > 1 else order
    for items, pods in _groups(gang):
        placed = 0
        for i in nodes:
            if not mask[i]:
                continue
            room: Mapping[str, int] = overlay.get(i) or free[i]
            take = min(fit_count(items, room), len(pods) - placed)
            if take <= 0:
                continue
            mine = overlay.setdefault(i, dict(free[i]))
            for r, q in items:
                mine[r] = mine.get(r, 0) - q * take
            out.extend((p, i) for p in pods[placed:placed + take])
            placed += take
            if placed == len(pods):
                break
        if placed < len(pods):
            return None
    return out


def _mask(
    snapshot: ClusterState,
    gang: Gang,
    filters: Sequence[FilterPlugin],
    blocked: Collection[str],
) -> Sequence[int]:
    """Nodes every member may use: the static filters (one answer per filter key), minus
    ``blocked``."""
    by_key = {snapshot.pod_key(p, filters): p for p in gang.members}
    masks = [snapshot.eligibility(p, filters, key).mask for key, p in by_key.items()]
    if len(masks) == 1 and isinstance(blocked, BlockedNodes) and blocked.snapshot is snapshot:
        return blocked.masked(masks[0])  # kept up to date by the cycle: O(new) per call
    mask = bytearray(masks[0]) if len(masks) == 1 else bytearray(map(min, *masks))
    for i in snapshot.indices(blocked):
        mask[i] = 0
    return mask


def _gpu_need(gang: Gang) -> int:
    return sum(p.effective_requests.get(GPU, 0) for p in gang.members)


def _placement(
    snapshot: ClusterState,
    gang: Gang,
    rank: int,
    domain: str,
    found: list[tuple[PodRequest, int]],
) -> Placement:
    nodes = snapshot.columns.nodes
    return Placement(gang.key, snapshot.level_names[rank], domain,
                     tuple(Binding(p, nodes[i].name) for p, i in found))


def _pick_node(
    snapshot: ClusterState, gang: Gang, order: Iterable[int], mask: Sequence[int]
) -> tuple[int, list[tuple[PodRequest, int]]] | None:
    """The first node in ``order`` that holds the whole gang."""
    for i in order:
        if mask[i]:
            found = _fill(snapshot, gang, (i,), mask)
            if found is not None:
                return i, found
    return None


def _by_bucket(snapshot: ClusterState, need: int, descending: bool) -> Iterator[int]:
    """Nodes with >= ``need`` free GPUs, bucket by bucket (fewest free first, or most),
    lowest index first inside a bucket; the bucket is sorted only if its lowest fails."""
    buckets = snapshot.gpu_buckets
    for k in sorted((k for k in buckets if k >= need), reverse=descending):
        bucket = buckets[k]
        yield min(bucket)
        if len(bucket) > 1:
            yield from sorted(bucket)


def _first_fit_single(snapshot: ClusterState, need: int) -> Iterator[int]:
    fitting = [b for k, b in snapshot.gpu_buckets.items() if k >= need and b]
    if fitting:
        yield min(min(b) for b in fitting)
        yield from sorted(i for b in fitting for i in b)


SingleOrder = Callable[[ClusterState, int], Iterable[int]]
"""Nodes to try for a one-node gang needing ``need`` GPUs, in order."""
DomainKey = Callable[[LiveDomain], tuple[int, ...]]


def _ordered_placer(single: SingleOrder, node_order: NodeOrder, domain_key: DomainKey,
                    tree: bool) -> Placer:
    """A ``Placer`` from its orders: ``single`` for one-node gangs, ``node_order`` inside a
    domain, ``domain_key`` among domains. ``tree``: try every rank from the node up
    (Slurm); else only the constraint's rank when it is ``required``, the whole cluster
    otherwise (topology-blind)."""

    def place(
        snapshot: ClusterState,
        gang: Gang,
        *,
        filters: Sequence[FilterPlugin],
        scorer: ScorePlugin,
        blocked: Collection[str] = (),
    ) -> Placement | Unschedulable:
        del scorer  # the policy's order replaces the score plugin
        if not gang.members:
            return Unschedulable(gang.key, "no members", Code.WAIT)
        mask = _mask(snapshot, gang, filters, blocked)
        need = _gpu_need(gang)
        top = len(snapshot.levels) + 1
        try:
            rank = snapshot.rank(gang.topology.level)
        except ValueError as err:
            return Unschedulable(gang.key, str(err), Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        required = gang.topology.mode is TopologyMode.REQUIRED
        if tree:
            ranks = range(0, (rank if required else top) + 1)
        else:
            ranks = range(rank, rank + 1) if required else range(top, top + 1)
        for r in ranks:
            if r == 0:
                picked = _pick_node(snapshot, gang, single(snapshot, need), mask)
                if picked is not None:
                    i, on_node = picked
                    name = snapshot.columns.nodes[i].name
                    return _placement(snapshot, gang, 0, name, on_node)
                continue
            domains = [d for d in snapshot.live_domains(r) if d.free.get(GPU, 0) >= need]
            domains.sort(key=domain_key)
            for dom in domains:
                found = _fill(snapshot, gang, node_order(snapshot, dom.nodes), mask)
                if found is not None:
                    return _placement(snapshot, gang, r, dom.name, found)
        return Unschedulable(gang.key, f"gang {gang.key} ({need} GPUs) does not fit")

    return place


def _index_order(snapshot: ClusterState, within: Sequence[int] | None) -> Iterable[int]:
    if within is not None:
        return within  # a domain's nodes are in index order
    # Only nodes with a free GPU can take a GPU pod: the buckets skip the full ones.
    buckets = snapshot.gpu_buckets
    return sorted(i for k, b in buckets.items() if k > 0 for i in b)


def _most_free_order(snapshot: ClusterState, within: Sequence[int] | None) -> Iterator[int]:
    free = snapshot.columns.free
    if within is not None and len(within) == len(snapshot.columns.nodes):
        # The whole cluster (a topology-blind gang): the free-GPU buckets, fullest first,
        # give the same order without a key per node. Buckets hold the schedulable nodes
        # by max(free GPUs, 0); the others are cordoned, so every mask skips them, and
        # bucket 0 (none free, or fewer than none) is ordered as below, lazily: a gang
        # that fits on nodes with free GPUs never reaches it.
        buckets = snapshot.gpu_buckets
        for k in sorted(buckets, reverse=True):
            if k > 0:
                yield from sorted(buckets[k])
        yield from sorted(buckets.get(0, ()), key=lambda i: (-free[i].get(GPU, 0), i))
        return
    if within is not None:
        yield from sorted(within, key=lambda i: (-free[i].get(GPU, 0), i))
        return
    buckets = snapshot.gpu_buckets
    for k in sorted(buckets, reverse=True):
        if k > 0:
            yield from sorted(buckets[k])


first_fit: Placer = _ordered_placer(
    _first_fit_single, _index_order, lambda d: (d.nodes[0],), tree=False)
spread: Placer = _ordered_placer(
    lambda snap, need: _by_bucket(snap, need, descending=True), _most_free_order,
    lambda d: (-d.free.get(GPU, 0), d.nodes[0]), tree=False)
slurm_tree: Placer = _ordered_placer(
    lambda snap, need: _by_bucket(snap, need, descending=False), _index_order,
    lambda d: (d.free.get(GPU, 0), d.nodes[0]), tree=True)
