"""What users see: why a gang waits, and where it went.

An unschedulable gang sets ``PodScheduled=False, reason=Unschedulable`` with the core's
message on each of its pods (``kubectl get pods`` / ``describe`` show it) and gets one
``FailedScheduling`` Event on its PodGroup (on the pod for a lone pod). A placed gang
gets one ``Scheduled`` Event there. A gang in a namespace the scheduler does not serve
is never placed: its pods get ``PodScheduled=False, reason=NamespaceNotServed`` and a
``NamespaceNotServed`` Warning each (and its PodGroup one), since a user who finds a pod
pending looks at the pod first. A gang in a team's namespace whose queue label names no
LocalQueue there is told the same way, with reason ``LocalQueueNotFound`` (or
``ClusterQueueDoesNotExist`` when its LocalQueue points at a queue the config lacks).

Rate: the core's message names the best domain's free capacity, which changes whenever
anything is bound or finishes. Re-patching every pod of every waiting gang on each change
would turn the scheduler into the API server's heaviest writer, so a gang is reported
when its message changes and at most once per ``interval`` seconds; a message that
changed only in its figures (the same words, other numbers) at most once per
``REFRESH_SECONDS``. Live with 2,000 gangs waiting, a refill's woken gangs re-wrote about
600 pods' status with new figures between the deletions it answered (docs/benchmarks.md,
"Deep queue").

A message with new words held back by ``interval`` is not dropped: it is written when the
interval is up (``flush``, at the time ``next_due`` gives the loop), unless a newer
attempt replaced it first. Why: a gang is tried again only when an event could help it
(runtime/retry.py), so a held-back message could otherwise stay unwritten for as long as
the gang waits. Live, the pods of a 32-pod gang still said "gang is incomplete" long after
their last pod arrived, and the next refill wrote some 450 such stale reports between the
deletions it answered.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from .._keys import EVENT_FAILED_SCHEDULING, NAMESPACE_NOT_SERVED, PODGROUP_KIND
from ..framework.model import PodRequest
from ..framework.results import Placement
from .convert import PodGroupInfo
from .events import EventRecorder, ObjectRef, now_rfc3339
from .jobset_labels import JOBSET_API_VERSION, JOBSET_GANG_PREFIX, JOBSET_KIND
from .upstream_groups import GroupStatus

NOT_SERVED = NAMESPACE_NOT_SERVED
"""Reason of the Event and the PodScheduled condition of a pod in a namespace this
scheduler does not serve."""


REFRESH_SECONDS = 60.0
"""How often a waiting gang's report is re-written when only its figures changed."""
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class _Reported:
    message: str
    at: float
    since: str


@dataclass(frozen=True, slots=True)
class _HeldBack:
    """A report with new words that the interval held back: written at ``due``."""

    due: float
    write: Callable[[], None]


def not_served_message(scheduler: str, namespace: str, served: Sequence[str]) -> str:
    """What a pod in an unserved namespace is told: why, and the field that changes it."""
    return (f"namespace {namespace} is not served by {scheduler}, which binds pods only in "
            f"{', '.join(served)}: add {namespace} to the cluster spec's "
            "scheduler.namespaces (that renders its bind rights there), or run the pod in "
            "a served namespace")


def event_ref(group: PodGroupInfo | None, pods: Sequence[PodRequest]) -> ObjectRef:
    """What an Event about a gang is on: its PodGroup, else its (first) pod."""
    if group is not None and group.name.startswith(JOBSET_GANG_PREFIX):  # a JobSet's gang
        return ObjectRef(JOBSET_KIND, group.namespace, group.name[len(JOBSET_GANG_PREFIX):],
                         group.uid, JOBSET_API_VERSION)
    if group is not None:
        return ObjectRef(PODGROUP_KIND, group.namespace, group.ref_name, group.uid,
                         group.api_version)
    pod = pods[0]
    return ObjectRef("Pod", pod.namespace, pod.name, pod.uid)


class Reporter:
    def __init__(
        self,
        recorder: EventRecorder,
        interval: float,
        clock: Callable[[], float] = time.monotonic,
        is_pending: Callable[[str], bool] = lambda uid: True,
        group_status: GroupStatus | None = None,
    ) -> None:
        self._recorder = recorder
        self._group_status = group_status
        """Writes an upstream PodGroup's status condition next to its Event."""
        self._is_pending = is_pending
        self._interval = interval
        self._clock = clock
        self._last: dict[str, _Reported] = {}
        self._held: dict[str, _HeldBack] = {}

    def unschedulable(
        self, key: str, pods: Sequence[PodRequest], message: str, group: PodGroupInfo | None
    ) -> bool:
        """Report unless the same message was reported, or any within ``interval`` (then
        it is held back until the interval is up, ``flush``)."""
        return self._report(key, pods, message,
                            partial(self._write_unschedulable, key, pods, message, group))

    def _write_unschedulable(self, key: str, pods: Sequence[PodRequest], message: str,
                             group: PodGroupInfo | None) -> None:
        since = self._since(key)
        for pod in pods:
            self._recorder.pod_unschedulable(
                pod.namespace, pod.name, message, since, partial(self._is_pending, pod.uid)
            )
        self._recorder.event(event_ref(group, pods), "Warning", EVENT_FAILED_SCHEDULING, message)
        if self._group_status is not None:
            self._group_status.unschedulable(group, message, since)
        self._last[key] = _Reported(message, self._clock(), since)

    def refused(
        self, key: str, pods: Sequence[PodRequest], message: str, group: PodGroupInfo | None,
        reason: str = NOT_SERVED,
    ) -> bool:
        """Tell each pod (and its PodGroup) that this scheduler will not place it as it
        stands (``reason``: its namespace is not served, or it names no usable
        LocalQueue); once per message, like ``unschedulable``."""
        return self._report(key, pods, message,
                            partial(self._write_refused, key, pods, message, group, reason))

    def _write_refused(self, key: str, pods: Sequence[PodRequest], message: str,
                       group: PodGroupInfo | None, reason: str) -> None:
        since = self._since(key)
        for pod in pods:
            self._recorder.pod_unschedulable(
                pod.namespace, pod.name, message, since, partial(self._is_pending, pod.uid),
                reason=reason,
            )
            self._recorder.event(event_ref(None, [pod]), "Warning", reason, message)
        if group is not None:
            self._recorder.event(event_ref(group, pods), "Warning", reason, message)
        if self._group_status is not None and reason != NOT_SERVED:  # no rights there
            self._group_status.unschedulable(group, message, since, reason)
        self._last[key] = _Reported(message, self._clock(), since)

    def _report(self, key: str, pods: Sequence[PodRequest], message: str,
                write: Callable[[], None]) -> bool:
        """Write now if due; hold back a message with new words until the interval is up;
        drop one that only changed its figures. A newer attempt replaces what was held."""
        self._held.pop(key, None)
        if not pods:
            return False
        prev = self._last.get(key)
        if prev is not None and prev.message == message:
            return False
        if prev is not None:
            age = self._clock() - prev.at
            if _DIGITS.sub("#", prev.message) == _DIGITS.sub("#", message):  # figures only
                if age < max(self._interval, REFRESH_SECONDS):
                    return False
            elif age < self._interval:
                self._held[key] = _HeldBack(prev.at + self._interval, write)
                return False
        write()
        return True

    def next_due(self) -> float | None:
        """When the earliest held-back report is due (the loop wakes for it)."""
        return min((held.due for held in self._held.values()), default=None)

    def flush(self) -> int:
        """Write the held-back reports that are due; how many."""
        now = self._clock()
        due = [key for key, held in self._held.items() if held.due <= now]
        for key in due:
            self._held.pop(key).write()
        return len(due)

    def _since(self, key: str) -> str:
        prev = self._last.get(key)
        return prev.since if prev is not None else now_rfc3339()

    def scheduled(self, key: str, placement: Placement, group: PodGroupInfo | None) -> None:
        self._last.pop(key, None)
        self._held.pop(key, None)
        pods = [b.pod for b in placement.bindings]
        if not pods:
            return
        if group is None and len(placement.bindings) == 1:
            b = placement.bindings[0]
            message = f"Successfully assigned {b.pod.key} to {b.node}"
        else:
            nodes = len({b.node for b in placement.bindings})
            message = (
                f"Placed {len(pods)} pods on {nodes} node(s) in {placement.level} "
                f"{placement.domain}"
            )
        self._recorder.event(event_ref(group, pods), "Normal", "Scheduled", message)
        if self._group_status is not None:
            self._group_status.scheduled(group, message)

    def forget(self, key: str) -> None:
        self._last.pop(key, None)
        self._held.pop(key, None)
