"""Synthetic jobs spread over the simulation's declared queues (``--queue-mix``).

With queues configured (``--spec`` or ``--queues``) every synthetic job goes to one of
them, never to an undeclared ``default``. The share of jobs per queue is the mix: by
default each queue's ``nominalQuota`` (a team submits in proportion to what it bought)
when every queue has a positive one, else equal; ``--queue-mix a=3,b=1`` sets it (queues
left out get none). A job goes only to a queue that can ever hold it (its ceiling:
quota, cohort, borrowing limit): the weights are renormalised over those, and the
generator draws no size above the largest ceiling of the mix. The draw has a seed of its
own, so the sizes, durations and arrivals of a seed do not depend on the queues.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import random
from collections.abc import Mapping, Sequence

from ._jobs import Job, WorkloadError
from ._queues import QueueConfig


def default_mix(config: QueueConfig) -> dict[str, float]:
    quotas = [q.nominal_quota for q in config.queues]
    if all(q is not None and q > 0 for q in quotas):
        return {q.name: float(q.nominal_quota or 0) for q in config.queues}
    return {q.name: 1.0 for q in config.queues}


def parse_queue_mix(text: str, config: QueueConfig) -> dict[str, float]:
    """``name=weight,...`` over the declared queues. Raises ValueError (a usage error)
    naming the bad part and what is allowed."""
    names = [q.name for q in config.queues]
    allowed = ", ".join(names)
    mix: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        name, sep, raw = part.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not name:
            raise ValueError(f"--queue-mix: {part!r} is not name=weight (e.g. "
                             f"{names[0]}=1)")
        if name not in names:
            raise ValueError(f"--queue-mix: {name!r} is not a queue of {config.source}: "
                             f"use {allowed}")
        if name in mix:
            raise ValueError(f"--queue-mix: {name!r} is given twice")
        try:
            weight = float(raw)
        except ValueError:
            weight = math.nan
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"--queue-mix: the weight of {name!r} must be a number >= 0, "
                             f"got {raw!r}")
        mix[name] = weight
    if not any(w > 0 for w in mix.values()):
        raise ValueError("--queue-mix: give at least one queue a weight above 0")
    return mix


def largest_job(config: QueueConfig, mix: Mapping[str, float]) -> int | None:
    """The most GPUs a queue of the mix can ever hold (None: no limit)."""
    caps = [config.ceiling(name) for name, w in mix.items() if w > 0]
    return None if any(c is None for c in caps) else max(c for c in caps if c is not None)


def assign_queues(jobs: Sequence[Job], config: QueueConfig, mix: Mapping[str, float],
                  seed: int) -> list[Job]:
    """Each job in a queue of the mix that can hold it, drawn by weight."""
    rng = random.Random(f"queues-{seed}")
    ceilings = {name: config.ceiling(name) for name in mix}
    choices: dict[int, tuple[list[str], list[float]]] = {}
    out = []
    for job in jobs:
        if job.gpus not in choices:
            names = [n for n, w in mix.items() if w > 0
                     and (ceilings[n] is None or (ceilings[n] or 0) >= job.gpus)]
            if not names:
                raise WorkloadError(f"{job.where()}: needs {job.gpus} GPUs, and no queue of "
                                    f"the mix can hold that many")
            choices[job.gpus] = (names, list(itertools.accumulate(mix[n] for n in names)))
        names, cumulative = choices[job.gpus]
        pick = bisect.bisect_right(cumulative, rng.random() * cumulative[-1])
        out.append(dataclasses.replace(job, queue=names[min(pick, len(names) - 1)]))
    return out
