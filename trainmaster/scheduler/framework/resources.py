"""Resource arithmetic every stage shares (pure functions over quantity mappings)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .model import CPU, GPU


def primary_resource(requests: Mapping[str, int]) -> str:
    """The resource packing optimises: GPUs if the pod wants any, else CPU."""
    return GPU if requests.get(GPU, 0) > 0 else CPU


def insufficient_resource(requests: Mapping[str, int], free: Mapping[str, int]) -> str | None:
    """The first requested resource (sorted by name) that ``free`` cannot cover, else None."""
    for resource in sorted(requests):
        if free.get(resource, 0) < requests[resource]:
            return resource
    return None


def fit_count(requests: Iterable[tuple[str, int]], free: Mapping[str, int]) -> int:
    """How many pods with ``requests`` (non-zero quantities) fit into ``free`` (>= 0)."""
    best = -1
    for resource, qty in requests:
        n = free.get(resource, 0) // qty
        if n <= 0:
            return 0
        if best < 0 or n < best:
            best = n
    return max(best, 0)
