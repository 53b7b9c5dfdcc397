"""The runtime's ports: what a host of the scheduling cycle provides.

The deployed scheduler plugs in the wall clock, the Binding API and pod deletion; the
simulator plugs in virtual time, an instant start and an instant eviction. The cycle
(``cycle.py``) and ``GangScheduler`` see only these.
"""

from __future__ import annotations

from collections.abc import Callable

Clock = Callable[[], float]
"""Seconds, monotonic (``time.monotonic`` in the runtime, virtual time in the simulator)."""
