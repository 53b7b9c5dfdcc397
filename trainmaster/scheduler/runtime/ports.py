"""The runtime's ports: what a host of the scheduling cycle provides.

The deployed scheduler plugs in the wall clock, the Binding API and pod deletion; the
simulator plugs in virtual time, an instant start and an instant eviction. The cycle
(``cycle.py``) and ``GangScheduler`` see only these.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..framework.model import Gang
from ..framework.results import Placement
from ..plugins.preemption import Victim

Clock = Callable[[], float]
"""Seconds, monotonic (``time.monotonic`` in the runtime, virtual time in the simulator)."""


class BindPort(Protocol):
    def bind(self, placement: Placement) -> None:
        """Start binding a placed gang (its pods are ``Assumed`` in the cluster state):
        the runtime's binder task, or the simulator's instant start."""
        ...


class EvictPort(Protocol):
    def evict(self, victims: Sequence[Victim], preemptor: Gang) -> None:
        """Evict whole gangs for ``preemptor``: the runtime's graceful deletes, or the
        simulator's instant stop."""
        ...
