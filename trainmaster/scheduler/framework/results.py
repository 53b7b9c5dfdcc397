"""What a placement attempt returns: where every member goes, or why not."""

from __future__ import annotations

from dataclasses import dataclass

from .model import PodRequest
from .status import Code


@dataclass(frozen=True, slots=True)
class Binding:
    pod: PodRequest
    node: str


@dataclass(frozen=True, slots=True)
class Placement:
    """Where every member of ``gang`` goes, inside one domain of ``level``."""

    gang: str
    level: str
    domain: str
    bindings: tuple[Binding, ...]

    def nodes_by_pod(self) -> dict[str, str]:
        """Pod key (``namespace/name``) -> node name."""
        return {b.pod.key: b.node for b in self.bindings}


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """The gang cannot be placed; nothing was placed."""

    gang: str
    reason: str
    code: Code = Code.UNSCHEDULABLE
