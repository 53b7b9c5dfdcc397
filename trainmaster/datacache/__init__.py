"""The node-local dataset cache as one node sees it: `trainmaster cache warm` fills
`<cache>/<dataset>` from the dataset's source, marks it complete, and evicts the least
recently used datasets when the cache would go over its capacity."""

from trainmaster.datacache._sources import SourceError, fetch
from trainmaster.datacache._store import MARKER, CacheStore, CapacityError, Held
from trainmaster.datacache._warm import WarmResult, warm

__all__ = [
    "MARKER",
    "CacheStore",
    "CapacityError",
    "Held",
    "SourceError",
    "WarmResult",
    "fetch",
    "warm",
]
