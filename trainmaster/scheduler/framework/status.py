"""The one result type every plugin returns, modelled on kube-scheduler's ``framework.Status``."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Code(enum.IntEnum):
    """What a plugin says, and what the runtime does about it."""

    SUCCESS = 0
    """Accepted. The runtime goes on to the next plugin, then to the next extension point."""

    ERROR = 1
    """Internal error (bad input, broken invariant). The runtime aborts this gang's cycle,
    forgets every pod it assumed for it and leaves the gang queued; the message is a bug
    report, not an unschedulable reason for the user."""

    UNSCHEDULABLE = 2
    """Does not fit *now* (e.g. not enough free GPUs on the node). The runtime tries other
    nodes and domains; if the gang fits nowhere it stays queued and is retried next cycle,
    when pods may have finished. Counts towards starvation (see ``GangScheduler``)."""

    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    """Can never fit however much is freed (node selector, affinity, taint, cordon, a gang
    larger than any allowed domain). The runtime drops the node for this pod signature
    for the whole snapshot (the placement core caches it) and never reserves capacity
    for a gang rejected with this code."""

    WAIT = 4
    """The gang is not complete yet (pre-filter, permit, or ``place_gang`` for a gang with
    fewer members than ``min_member``). The runtime neither places nor binds it and keeps
    it queued until its members arrive; waiting members never count as starving. This
    core places gangs whole, so a ``WAIT`` at permit after placement means the gang
    changed concurrently: the runtime forgets everything it assumed for it."""

    SKIP = 5
    """The plugin has nothing to say about this pod (e.g. coscheduling for a pod without
    a gang). The runtime treats it as success and skips the plugin for this pod."""


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's answer: a ``Code``, human-readable reasons and the plugin's name."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    def is_success(self) -> bool:
        """``SUCCESS`` or ``SKIP``: the runtime may proceed."""
        return self.code in (Code.SUCCESS, Code.SKIP)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    @classmethod
    def success(cls, plugin: str = "") -> Status:
        return cls(Code.SUCCESS, (), plugin)

    @classmethod
    def of(cls, code: Code, plugin: str, *reasons: str) -> Status:
        return cls(code, reasons, plugin)


SUCCESS = Status()
