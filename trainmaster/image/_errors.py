"""The image builder's error."""

from __future__ import annotations

from trainmaster.errors import TrainmasterError


class ImageError(TrainmasterError):
    """The image could not be built: a missing tool, a failed step (with its log)."""
