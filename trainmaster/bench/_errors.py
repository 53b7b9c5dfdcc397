"""The benchmarks' one error: options that cannot work, a cluster that does not answer."""

from __future__ import annotations

from trainmaster.errors import TrainmasterError


class BenchError(TrainmasterError):
    """A benchmark cannot run as asked (unknown contender, pods that cannot fit, a world
    that did not come up): reported as `error: ...`, exit 1."""
