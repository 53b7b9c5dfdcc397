"""Policy name -> ``Placer``, and the cheap necessary-condition check every policy shares.

``trainmaster`` is the scheduler's own ``place_gang``. The check runs before any policy:
it only answers "cannot fit" when no policy could place the gang (fewer free slots for its
pods in the whole cluster, or no domain of its required level with enough free GPUs), so
it changes no decision; it spares the real placer's diagnostics (an O(nodes) message the
simulator never reads) for the many queue entries that are hopeless at a given moment.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from trainmaster.scheduler import (
    GPU,
    BlockedNodes,
    ClusterState,
    FilterPlugin,
    Gang,
    Placement,
    Placer,
    ScorePlugin,
    TopologyMode,
    Unschedulable,
    place_gang,
)

from ._baselines import first_fit, slurm_tree, spread

POLICIES: dict[str, Placer] = {
    "trainmaster": place_gang,
    "first-fit": first_fit,
    "spread": spread,
    "slurm-tree": slurm_tree,
}


def policy_names(choice: str) -> list[str]:
    """``all`` or a comma-separated list of names; raises ValueError naming the valid ones."""
    if choice == "all":
        return list(POLICIES)
    names = [c.strip() for c in choice.split(",") if c.strip()]
    bad = [n for n in names if n not in POLICIES]
    if bad or not names:
        raise ValueError(f"unknown policy {', '.join(bad) or repr(choice)}; "
                         f"use one of {', '.join(POLICIES)} or all")
    return names


class Guard:
    """A policy's placer behind ``hopeless``: same decisions, fewer futile searches.

    Within one cycle the reserved (blocked) nodes only grow, and no later gang may place
    on them (so their free GPUs stay as they were when blocked). Their pod slots come
    from a histogram of their free GPUs (blocked nodes per free-GPU count), so the slots
    for any pod size are a sum over at most (GPUs per node + 1) entries. For the cycle's
    ``BlockedNodes`` the histogram is the size of each GPU bucket's intersection with the
    blocked indices (set operations in C), redone only when the set has grown; for any
    other collection, the nodes are counted once as they appear. A new cycle (a new
    ``BlockedNodes``, or ``new_cycle()``) starts over."""

    def __init__(self, placer: Placer) -> None:
        self._placer = placer
        self._shapes: dict[str, tuple[Gang, int]] = {}  # gang key -> (gang, GPUs per pod)
        self.new_cycle()

    def new_cycle(self) -> None:
        self._cycle: object = None
        self._size = -1  # len(blocked) when the histogram was made
        self._seen: set[str] = set()  # for a plain collection of names
        self._hist: dict[int, int] = {}  # free GPUs -> blocked nodes with that many
        self._memo_of: object = None  # the BlockedNodes the memo below is for
        self._memo_size = -1
        self._memo_placed = -1
        self._memo: dict[int, int] = {}  # GPUs per pod -> unblocked free pod slots
        self._placed = 0  # placements this guard has handed out (the snapshot changed)

    def _blocked_slots(self, snapshot: ClusterState, blocked: Collection[str],
                       per_pod: int) -> int:
        if isinstance(blocked, BlockedNodes):
            if blocked is not self._cycle:
                self.new_cycle()
                self._cycle = blocked
            if len(blocked) != self._size:
                self._size = len(blocked)
                held = blocked.indices
                # Buckets hold schedulable nodes only, as the free slots counted against.
                self._hist = {gpus: len(held & nodes)
                              for gpus, nodes in snapshot.gpu_buckets.items() if gpus > 0}
        elif len(blocked) != len(self._seen):
            new = set(blocked).difference(self._seen)
            self._seen.update(new)
            cols, hist = snapshot.columns, self._hist
            for i in snapshot.indices(new):
                if cols.schedulable[i]:  # a cordoned node is in no bucket's slots either
                    f = max(cols.free[i].get(GPU, 0), 0)
                    hist[f] = hist.get(f, 0) + 1
        return sum((f // per_pod) * n for f, n in self._hist.items())

    def _uniform_gpus(self, gang: Gang) -> int:
        """GPUs per pod if every member asks the same (else 0), once per queued gang."""
        known = self._shapes.get(gang.key)
        if known is not None and known[0] is gang:
            return known[1]
        first = gang.members[0]
        per_pod = first.effective_requests.get(GPU, 0)
        if any(p.effective_requests != first.effective_requests for p in gang.members):
            per_pod = 0
        self._shapes[gang.key] = (gang, per_pod)
        return per_pod

    def forget(self, key: str) -> None:
        """The gang left the queue (placed): drop its cached shape."""
        self._shapes.pop(key, None)

    def hopeless(self, snapshot: ClusterState, gang: Gang, blocked: Collection[str]) -> bool:
        """True only if no placement of ``gang`` exists now. For a gang of identical GPU
        pods: fewer free pod slots on the schedulable, unblocked nodes than pods (exact
        for a gang that may use the whole cluster: every policy then places it whenever
        the slots exist), or, for a ``required`` level, no domain there with enough free
        GPUs (a necessary condition only)."""
        if (isinstance(blocked, BlockedNodes) and blocked.snapshot is snapshot
                and len(blocked.indices) >= len(snapshot.columns.nodes)):
            # Reservations cover every node: no placer may put a pod anywhere. Under
            # saturation this is most of the queue in most cycles.
            return True
        per_pod = self._uniform_gpus(gang)
        if per_pod <= 0:
            return False
        buckets = snapshot.gpu_buckets
        count = len(gang.members)
        if slots_memo := (self._memo_of is blocked and self._memo_size == len(blocked)
                          and self._memo_placed == self._placed):
            slots = self._memo.get(per_pod, -1)
        else:
            slots = -1
        if slots < 0:
            slots = sum((free // per_pod) * len(nodes) for free, nodes in buckets.items())
            if blocked and slots >= count:
                slots -= self._blocked_slots(snapshot, blocked, per_pod)
                # Free slots outside the reservations, for every gang of this pod size
                # until a placement or a new reservation (the cycle's BlockedNodes only:
                # its identity and size say it has not changed; the snapshot changes
                # within a pass only by this guard's placements).
                if isinstance(blocked, BlockedNodes):
                    if not slots_memo:
                        self._memo_of, self._memo_size = blocked, len(blocked)
                        self._memo_placed, self._memo = self._placed, {}
                    self._memo[per_pod] = slots
        if slots < count:
            return True
        if gang.topology.mode is TopologyMode.REQUIRED:
            rank = snapshot.rank(gang.topology.level)
            need = per_pod * count
            if rank == 0:
                return max(buckets, default=0) < need
            if rank <= len(snapshot.levels):
                return all(d.free.get(GPU, 0) < need for d in snapshot.live_domains(rank))
        return False

    def __call__(
        self,
        snapshot: ClusterState,
        gang: Gang,
        *,
        filters: Sequence[FilterPlugin],
        scorer: ScorePlugin,
        blocked: Collection[str],
    ) -> Placement | Unschedulable:
        if gang.members and self.hopeless(snapshot, gang, blocked):
            return Unschedulable(gang.key, "not enough free GPUs")
        found = self._placer(snapshot, gang, filters=filters, scorer=scorer, blocked=blocked)
        if isinstance(found, Placement):
            self._placed += 1  # assumed next (or undone): the buckets may change
        return found
