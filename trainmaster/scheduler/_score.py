"""Score extension point: best-fit bin packing on the scarce resource."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ._model import CPU, GPU


def primary_resource(requests: Mapping[str, int]) -> str:
    """The resource packing optimises: GPUs if the pod wants any, else CPU."""
    return GPU if requests.get(GPU, 0) > 0 else CPU


def best_fit_score(requests: Mapping[str, int], free: Mapping[str, int]) -> int:
    """Higher is better: minus what is left of the primary resource after placing.

    The tightest node that still fits wins, so partly used nodes fill up first and
    empty nodes stay empty for large jobs.
    """
    resource = primary_resource(requests)
    return requests.get(resource, 0) - free.get(resource, 0)


class BestFit:
    """Score plugin wrapping ``best_fit_score``. Ties go to the node name (lowest first)."""

    NAME: ClassVar[str] = "BestFit"

    def score(
        self, requests: Mapping[str, int], free: Mapping[str, int], allocatable: Mapping[str, int]
    ) -> int:
        return best_fit_score(requests, free)
