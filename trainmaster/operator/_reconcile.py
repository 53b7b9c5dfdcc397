"""One reconcile pass for one TrainingJob: read, decide (pure), act.

Crash safety comes from the order of the acts. Every transition writes the TrainingJob's
status first, guarded by the resourceVersion the decision was made from, and only then
touches other objects; those touches are idempotent (server-side apply of objects named by
attempt, deletes that tolerate 404, fencing that checks first, Events with fixed names).
So an operator killed at any point leaves either the old status (the same fault is found
again and handled once) or the new one (the next pass carries on with that attempt and
that restart count).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from trainmaster.api import RESTARTING, parse_time
from trainmaster.kubeclient import ApiError, Kube, pod_path, trainingjob_path
from trainmaster.operator._announce import Announcer, fenced
from trainmaster.operator._datasets import WarmupFailures, datasets_waiting, holds
from trainmaster.operator._decide import decide, old_gang_wait
from trainmaster.operator._elastic import recorded_size, resize_patch, world_size
from trainmaster.operator._fence import fence
from trainmaster.operator._gang import GangObjects
from trainmaster.operator._model import Action, Cause, Decision, GangView, JobState, Key, utcnow
from trainmaster.operator._nodes import NodeBook
from trainmaster.operator._specs import InvalidJob, SpecSource, in_namespace
from trainmaster.operator._status import (
    fail_patch,
    held_since,
    hold_patch,
    invalid_spec_patch,
    observe_patch,
    restart_patch,
    resume_patch,
    start_patch,
    succeed_patch,
    suspend_patch,
    warmup_timeout_patch,
)
from trainmaster.operator._supervisor import Gone, Retry
from trainmaster.spec import ClusterSpec, Job

log = logging.getLogger(__name__)
HOLD_RECHECK_SECONDS = 10.0
"""How often a job held for its datasets looks again."""
DRAIN_RECHECK_SECONDS = 1.0
"""How often a restart waiting for the old gang's pods to finish looks again (pod
deletions also wake it)."""


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        specs: SpecSource,
        book: NodeBook,
        clock: Callable[[], datetime] = utcnow,
        warmups: WarmupFailures | None = None,
        readers: Callable[[Key, Job | None], None] | None = None,
    ) -> None:
        self.kube = kube
        self.warmups = warmups or WarmupFailures()
        # Told of each job that reads datasets (None once it ended): the warm-ups follow.
        self.readers = readers
        self.specs = specs
        self.book = book
        self.clock = clock
        self.gang = GangObjects(kube)
        self.announce = Announcer(kube)
        self._spec_by_ns: dict[tuple[str, str], ClusterSpec] = {}

    async def __call__(self, key: Key, apply: bool) -> float | None:
        try:
            body = await self.kube.get(trainingjob_path(key.namespace, key.name))
        except ApiError as exc:
            if exc.status == 404:
                self.gang.forget(key.namespace, key.name)
                raise Gone() from None
            raise
        if (body.get("metadata") or {}).get("deletionTimestamp"):
            self.gang.forget(key.namespace, key.name)
            raise Gone()  # being deleted: garbage collection removes the gang
        state = JobState.from_body(body)
        spec = await self._spec(key.namespace)
        now = self.clock()
        try:
            job = self.specs.job(spec, key.name, dict(body.get("spec") or {}))
        except InvalidJob as exc:
            patch = invalid_spec_patch(state, str(exc), now)
            if any(state.status.get(k) != v for k, v in patch.items()):
                await self._write(state, patch, guard=False)
            await self.announce.invalid_spec(body, state, str(exc), now)
            return None
        gang = await self.gang.observe(key.namespace, job, state.attempt)
        decision = decide(job, state, gang, self.book.health(), now)
        if self.readers is not None and job.datasets:
            self.readers(key, None if decision.action is Action.DONE else job)
        if decision.action not in (Action.OBSERVE, Action.DONE, Action.WAIT):
            log.info("%s/%s: %s %s", *key, decision.action.value,
                     decision.fault.describe() if decision.fault else "")
        return await self._act(body, spec, job, state, gang, decision, apply, now)

    async def _spec(self, namespace: str) -> ClusterSpec:
        version, spec = await self.specs.get()
        key = (version, namespace)
        if key not in self._spec_by_ns:
            self._spec_by_ns = {key: in_namespace(spec, namespace), **{
                k: v for k, v in self._spec_by_ns.items() if k[0] == version}}
        return self._spec_by_ns[key]

    async def _act(
        self,
        body: dict[str, Any],
        spec: ClusterSpec,
        job: Job,
        state: JobState,
        gang: GangView,
        decision: Decision,
        apply: bool,
        now: datetime,
    ) -> float | None:
        action, ns = decision.action, state.namespace
        if action is Action.DONE:
            if apply:  # first look after an operator (re)start: was the end announced?
                await self.announce.end(body, state, now)
            return None
        if action is Action.WAIT:
            await self.announce.restart(body, state, job, now)
            await self.gang.clean(ns, job, gang, state.attempt, self.book.health())
            return decision.wake_after
        if action is Action.SUSPEND:
            patch = suspend_patch(state, now)
            if patch:
                state = await self._write(state, patch)
            await self.announce.suspended(body, state, now)
            await self.gang.remove(ns, job)
            return None
        if action is Action.START:
            waiting = await datasets_waiting(self.kube, spec, job)
            if waiting is not None:
                return await self._hold(body, spec, job, state, waiting, now)
            await self._write(state, start_patch(state, now, datasets=holds(spec, job)))
            await self.gang.apply(spec, job, body, 0, None)
            return 0.0
        if action is Action.RESTART:
            return await self._restart(body, spec, job, state, gang, decision, now)
        if action is Action.SHRINK:
            return await self._shrink(body, job, state, gang, decision, now)
        if action is Action.FAIL:
            new = await self._write(state, fail_patch(state, job, decision, now))
            await self.announce.end(body, new, now)
            await self.gang.stop(ns, job, state.attempt)
            return None
        if action is Action.SUCCEED:
            new = await self._write(state, succeed_patch(state, now))
            await self.announce.end(body, new, now)
            if job.elastic is not None:
                await self.gang.stop(ns, job, state.attempt)  # its members still pending
            return None
        # OBSERVE: a healthy gang. Make its objects match (restores drift), then record.
        if state.phase == RESTARTING:
            await self.announce.restart(body, state, job, now)
        await self.announce.resumed(body, state, now)
        if state.phase == RESTARTING and not gang.job_exists:
            waited = await self._next_gang(body, spec, job, state, gang, now)
            if waited is not None:
                return waited
        elif apply or not gang.job_exists:
            await self.gang.apply(spec, job, body, state.attempt, state.resume_from)
        if gang.stale_jobs or gang.stale_pods:
            await self.gang.clean(ns, job, gang, state.attempt, self.book.health())
        checkpoint = state.last_checkpoint
        if checkpoint is not None and checkpoint.time is not None and gang.job_exists:
            await self.gang.mark_checkpoint(ns, job, state.attempt, checkpoint.time)
        restart = state.restart_seconds
        if restart is not None and gang.job_exists:
            await self.gang.mark_restart(ns, job, state.attempt, restart)
        patch = observe_patch(state, job, gang, now)
        if patch:
            state = await self._write(state, patch, guard=False)
        if job.elastic is not None:
            await self._track_size(body, state, gang, now)
        return decision.wake_after

    async def _track_size(self, body: dict[str, Any], state: JobState, gang: GangView,
                          now: datetime) -> None:
        """Record an elastic gang's world size (members running on usable nodes) and say
        when it changes outside a shrink the operator made: a member bound late or
        replaced (grow), one taken by a preemption (shrink). The first size is recorded
        once the gang first runs, without an Event."""
        size = world_size(gang, self.book.health())
        before = recorded_size(state)
        if size == before or (before is None and state.running_since is None):
            return
        why = ("a pending member was bound and started" if before is not None and size > before
               else "members left (preempted or deleted)")
        new = await self._write(state, resize_patch(state, before, size, why, now),
                                guard=False)
        if before is not None:
            await self.announce.resized(body, new, before, size, why, now)

    async def _shrink(self, body: dict[str, Any], job: Job, state: JobState, gang: GangView,
                      decision: Decision, now: datetime) -> float | None:
        """An elastic gang goes on without its lost members (the launchers re-rendezvoused
        already): the new size first (guarded, so one lost member is counted once), then
        fences, the Event, and the lost pods deleted so the Job replaces them."""
        fault, sizes = decision.fault, decision.sizes
        assert fault is not None and sizes is not None
        for node in fault.nodes:
            await self._fence(node, now)
        if recorded_size(state) != sizes[1]:  # else recorded by a pass that died after it
            state = await self._write(state, resize_patch(state, sizes[0], sizes[1],
                                                          fault.describe(), now))
        await self.announce.resized(body, state, sizes[0], sizes[1], fault.describe(), now)
        sick = self.book.health()
        lost = set(decision.lost)
        await asyncio.gather(*(
            self.kube.delete(pod_path(state.namespace, p.name),
                             grace=0 if p.node in sick else None, missing_ok=True)
            for p in gang.pods if p.name in lost))
        return 0.0

    async def _hold(self, body: dict[str, Any], spec: ClusterSpec, job: Job, state: JobState,
                    reason: str, now: datetime) -> float | None:
        """Not started: its datasets are not warm on enough nodes yet. Look again soon
        (a warm-up labels one node at a time; polling keeps this independent of them).
        A warm-up that failed shows on the job at once (condition and Event, from the
        failed pod's event); a job held past cache.warmupTimeoutMinutes fails."""
        failures = self.warmups.all_for_job(state.namespace, job)
        described = "; ".join(f.describe() for f in failures) or None
        assert spec.cache is not None  # held: the job names datasets of a warm-up cache
        limit = timedelta(minutes=spec.cache.warmup_timeout_minutes)
        waited = now - held_since(state, now)
        if waited >= limit:
            message = (f"held {waited.total_seconds() / 60:.0f} min for its datasets "
                       f"(cache.warmupTimeoutMinutes {spec.cache.warmup_timeout_minutes}): "
                       f"{reason}" + (f"; last failure: {described}" if described else ""))
            new = await self._write(state, warmup_timeout_patch(state, message, now))
            await self.announce.end(body, new, now)
            return None
        patch = hold_patch(state, reason, now, described)
        if patch:
            state = await self._write(state, patch, guard=False)
        await self.announce.waiting_for_datasets(body, state, reason, now)
        for failure in failures:
            await self.announce.warmup_failed(body, failure, now)
        left = (limit - waited).total_seconds()
        return min(HOLD_RECHECK_SECONDS, left + 0.5)

    async def _restart(
        self,
        body: dict[str, Any],
        spec: ClusterSpec,
        job: Job,
        state: JobState,
        gang: GangView,
        decision: Decision,
        now: datetime,
    ) -> float | None:
        fault = decision.fault
        assert fault is not None
        if fault.cause is Cause.NODE_UNHEALTHY:
            for node in fault.nodes:
                await self._fence(node, now)
        new = await self._write(state, restart_patch(state, decision, now))
        # From here on the restart is recorded: everything below is safe to redo, and is
        # redone by the next pass if the operator dies here.
        await self.announce.restart(body, new, job, now)
        await self.gang.clean(state.namespace, job, gang, new.attempt, self.book.health())
        if decision.backoff > 0:
            return decision.backoff
        # The new gang is created by the next pass, from a fresh look at the old pods.
        return 0.0

    async def _next_gang(self, body: dict[str, Any], spec: ClusterSpec, job: Job,
                         state: JobState, gang: GangView, now: datetime) -> float | None:
        """Create the restarted attempt's gang once the old gang has stopped (or its grace
        is up), resuming from the newest checkpoint reported by then: an old gang keeps
        training until its pods are gone and may finish one more checkpoint. Returns the
        seconds until the next look while it waits, else None."""
        history = state.status.get("restartHistory") or []
        entry = history[-1] if history and isinstance(history[-1], dict) else {}
        restarted_at = (parse_time(entry.get("time"))
                        if entry.get("newAttempt") == state.attempt else None)
        wait = old_gang_wait(gang, self.book.health(), restarted_at, now)
        if wait is not None:
            await self.gang.clean(state.namespace, job, gang, state.attempt,
                                  self.book.health())
            return min(wait, DRAIN_RECHECK_SECONDS)
        patch = resume_patch(state)
        if patch:
            # Guarded: a checkpoint reported meanwhile makes this pass decide again.
            state = await self._write(state, patch)
        await self.gang.apply(spec, job, body, state.attempt, state.resume_from)
        return None

    async def _fence(self, node: str, now: datetime) -> None:
        health = self.book.health().get(node)
        problem = health.problem if health and health.problem else "unhealthy"
        try:
            changed = await fence(self.kube, node, problem, now)
        except ApiError as exc:
            if exc.status == 404:
                return  # the node is gone: nothing will land there anyway
            raise
        if changed:
            await fenced(self.kube, node, problem, now)

    async def _write(self, state: JobState, status: dict[str, Any], guard: bool = True
                     ) -> JobState:
        """Patch .status. Guarded writes carry the resourceVersion the decision was made
        from: if the job changed meanwhile (a checkpoint was reported, another operator
        acted), the write is refused and the decision is made again from a fresh read."""
        patch: dict[str, Any] = {"status": status}
        if guard:
            patch["metadata"] = {"resourceVersion": state.resource_version}
        url = trainingjob_path(state.namespace, state.name, "status")
        try:
            result = await self.kube.patch(url, patch)
        except ApiError as exc:
            if exc.status == 409:
                raise Retry("the TrainingJob changed while deciding; deciding again", 0) from None
            raise
        return JobState.from_body(result)
