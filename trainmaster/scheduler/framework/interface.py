"""Extension-point contracts: what a plugin must provide (protocols only, no registry).

Modelled on kube-scheduler's ``framework/interface.go``: one protocol per extension point,
each with the plugin's ``NAME``. A plugin implements only the points it needs; a
``Profile`` (``registry.py``) lists the plugins per point. For one gang the cycle calls:

* queue sort: ``queue_key`` (priority, then age, then name) orders the queue; admission
  (``Admission``, the queue quotas) may hold a gang before anything else runs.
* pre-filter: once per gang (its first pod); non-success skips the gang this cycle.
* filter: per pod and node. Filters are *static*: they read only the pod spec and the
  node spec, never usage, so the cluster state evaluates each once per (cache key, node)
  and caches the answer until the next node change. A filter that can answer whole
  groups of nodes from the state's node indexes says so (``IndexedFilter``). Resource fit
  is not a filter plugin: the placement core's capacity accounting applies it.
* domain choice: at each topology rank the domains that could hold the gang are tried in
  the order ``DomainChoicePlugin.order_domains`` gives (default: the tightest first).
* pre-score and score: ``pre_score`` once per gang attempt (it may write what its
  ``score`` needs into the ``CycleState``, or answer SKIP to sit this gang out); then
  ``score`` per candidate node, seeing the node and the gang. A profile has several score
  plugins, each with a weight; the nodes inside the chosen domain are ordered by the
  weighted sum, higher first, ties by node name.
* reserve: the runtime assumes every pod in the cluster state, then calls reserve
  plugins; any failure unreserves (reverse order) and forgets the whole gang.
* permit: per pod after reserve; anything but SUCCESS/SKIP unreserves the whole gang.
* post-filter: for a gang the cycle could not place for capacity (``Code.UNSCHEDULABLE``),
  e.g. preemption: SUCCESS means capacity is being freed for it (reasons say how).
* bind: the runtime's binder (or the simulator's) binds what was reserved
  (``runtime/ports.py``).

Which ``Code`` means what to the runtime is documented on ``Code`` (``status.py``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import ClassVar, Protocol, runtime_checkable

from .model import Gang, NodeInfo, NodeSelectorRequirement, PodRequest, Taint
from .results import Placement
from .status import Status

CORDONED_REASON = "node(s) were unschedulable"
"""Why a cordoned node is out, whatever the filters say (the cluster state's answer)."""

LEAST_FREE_GPUS = "least-free-gpus"
"""A score plugin's ``INDEX`` when its order is exactly the cluster state's free-GPU
index order (least free GPUs first, then name): the placement may then walk that index
and stop at the first fitting node instead of scoring every node."""


class CycleState:
    """Data the plugins share during one gang's placement attempt, by key (as
    kube-scheduler's ``CycleState``): a plugin writes in ``pre_score`` what its
    ``score`` reads per node. A new one per attempt; nothing outlives it."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data: dict[str, object] = {}

    def write(self, key: str, value: object) -> None:
        self._data[key] = value

    def read(self, key: str) -> object:
        """The value under ``key``; ``KeyError`` if no plugin wrote it this attempt."""
        return self._data[key]


@runtime_checkable
class Plugin(Protocol):
    NAME: ClassVar[str]


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    def pre_filter(self, pod: PodRequest) -> Status: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """A static node filter. Its cache key is part of the contract because the state
    caches answers per key: two pods with equal keys must get the same answer on every
    node, so the key must cover every pod field ``filter`` reads."""

    STATIC: ClassVar[bool]
    """Must be True: the answer depends on the pod spec and node spec only."""

    def applies(self, pod: PodRequest) -> bool:
        """False only if ``filter`` passes every node for ``pod`` (the state skips it)."""
        ...

    def cache_key(self, pod: PodRequest) -> Hashable:
        """Everything in ``pod`` that ``filter`` reads (``None`` if it reads nothing)."""
        ...

    def filter(self, pod: PodRequest, node: NodeInfo) -> Status: ...


class NodeIndex(Protocol):
    """The cluster state's inverted node indexes (node indices), read-only: what an
    ``IndexedFilter`` answers from."""

    @property
    def all_nodes(self) -> AbstractSet[int]: ...

    @property
    def taint_groups(self) -> Mapping[tuple[Taint, ...], AbstractSet[int]]:
        """Nodes per exact taint list (the empty list included)."""
        ...

    def with_label(self, key: str, value: str) -> AbstractSet[int]: ...

    def matching(self, requirement: NodeSelectorRequirement) -> AbstractSet[int]:
        """Nodes whose labels match one node-affinity requirement."""
        ...


@runtime_checkable
class IndexedFilter(FilterPlugin, Protocol):
    """A filter capability: ``rejected_groups`` returns sets of nodes on which ``filter``
    answers alike and that hold every node it may reject (the state then asks ``filter``
    once per set). The state uses it only when the class that defines ``filter`` also
    defines ``rejected_groups``: a subclass that reads more of the node is asked node by
    node."""

    def rejected_groups(self, pod: PodRequest, index: NodeIndex) -> list[AbstractSet[int]]: ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    def pre_score(self, state: CycleState, gang: Gang) -> Status:
        """Once per gang attempt, before any ``score``: SUCCESS, or SKIP if this plugin
        has nothing to say about the gang (its ``score`` is then not called)."""
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(
        self,
        state: CycleState,
        gang: Gang,
        node: NodeInfo,
        requests: Mapping[str, int],
        free: Mapping[str, int],
    ) -> int:
        """Higher is better for putting pods with ``requests`` on ``node``, which has
        ``free`` left now (this gang's pods placed so far included)."""
        ...


class LiveDomain(Protocol):
    """A switch domain (or the cluster) as the placement reads it: live (updated by every
    assume/forget), read-only, nodes by index."""

    @property
    def level(self) -> str: ...
    @property
    def rank(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def nodes(self) -> tuple[int, ...]: ...
    @property
    def free(self) -> Mapping[str, int]: ...
    @property
    def capacity(self) -> Mapping[str, int]: ...


@runtime_checkable
class DomainChoicePlugin(Plugin, Protocol):
    def order_domains(self, domains: list[LiveDomain], primary: str) -> None:
        """Sort, in place, the domains of one rank that could hold the gang into the
        order the placement tries them (the first that packs wins). ``primary``: the
        resource the gang is packed on (GPUs if it wants any)."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    def reserve(self, pod: PodRequest, node: str) -> Status: ...

    def unreserve(self, pod: PodRequest, node: str) -> None:
        """Undo ``reserve``; must be idempotent."""
        ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    def permit(self, pod: PodRequest, node: str) -> Status: ...


class PostFilterPlugin(Protocol):
    def post_filter(self, gang: Gang) -> Status:
        """``gang`` could not be placed for capacity: SUCCESS if capacity is being freed
        for it (e.g. victims evicted; ``reasons`` say how), else why not."""
        ...


class Admission(Protocol):
    """Gang admission before placement (queue quotas): ``refusal`` says why a gang may
    not start now (None: it may); ``admitted`` is told about every gang placed, with its
    (pod, node) pairs."""

    def refusal(self, gang: Gang) -> str | None: ...

    def admitted(self, gang: Gang, placement: Placement) -> None: ...


@runtime_checkable
class OrderedAdmission(Protocol):
    """An ``Admission`` that also sees every cycle's gangs, in order, before it is asked
    about any (fair sharing admits borrowing work by the queues' shares)."""

    def cycle_start(self, gangs: Sequence[Gang]) -> None: ...

    def preemptible(self, gang: Gang) -> bool:
        """Whether a gang its quota refused may still preempt (fair sharing frees
        quota): it then fails as unschedulable, not unresolvable, and reaches the
        post-filter."""
        ...


@runtime_checkable
class ScopedAdmission(Protocol):
    """An ``Admission`` that says what its refusals wait on, so a refused gang is
    retried only when that moves (``runtime/retry.py``)."""

    def retry_scope(self, gang: Gang) -> str | None:
        """The scope whose releases may change ``gang``'s refusal (None: anything may,
        retry it at every cycle)."""
        ...

    def releases(self, scope: str) -> int:
        """A counter that moves with every release in ``scope``."""
        ...


def filter_key(pod: PodRequest, filters: Sequence[FilterPlugin]) -> Hashable:
    """Pods with equal keys get the same answer from ``filters`` on every node: each
    filter's own ``cache_key``, in order."""
    return tuple([f.cache_key(pod) for f in filters])
