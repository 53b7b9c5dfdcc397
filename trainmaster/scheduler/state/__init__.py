"""The cluster state (the live cache the cycle places against) and its indexes.

``ClusterState`` (``cluster_state.py``: the pod state machine, node changes, the read
API) is assembled from ``aggregates.py`` (domain and GPU-bucket sums) and
``filter_index.py`` (static-filter indexes and cached answers); ``views.py`` holds the
value types it hands out. ``blocked.py`` keeps a cycle's reserved nodes, and
``fragmentation.py`` reports how scattered free GPUs are.
"""

from .blocked import BlockCache, BlockedNodes
from .cluster_state import ClusterState
from .fragmentation import FragmentationReport, fragmentation_report
from .views import DomainView, Eligibility, LiveDomain, NodeColumns, OvercommitError, PodState

__all__ = [
    "BlockCache",
    "BlockedNodes",
    "ClusterState",
    "DomainView",
    "Eligibility",
    "FragmentationReport",
    "LiveDomain",
    "NodeColumns",
    "OvercommitError",
    "PodState",
    "fragmentation_report",
]
