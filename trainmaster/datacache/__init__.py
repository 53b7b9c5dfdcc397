"""The node-local dataset cache as one node sees it: `trainmaster cache warm` fills
`<cache>/<dataset>` from the dataset's source, marks it complete, and evicts the least
recently used datasets when the cache would go over its capacity."""

from trainmaster.datacache._checkpoint_mirror import (
    CheckpointStore,
    Fetched,
    Mirror,
    Mirrored,
    fetch_newest,
)
from trainmaster.datacache._s3 import S3Error
from trainmaster.datacache._sources import SCHEMES, SourceError, fetch, unsupported
from trainmaster.datacache._store import MARKER, CacheStore, CapacityError, Held
from trainmaster.datacache._warm import WarmResult, failure_message, warm

__all__ = [
    "MARKER",
    "SCHEMES",
    "CacheStore",
    "CapacityError",
    "CheckpointStore",
    "Fetched",
    "Held",
    "Mirror",
    "Mirrored",
    "S3Error",
    "SourceError",
    "WarmResult",
    "failure_message",
    "fetch",
    "fetch_newest",
    "unsupported",
    "warm",
]
