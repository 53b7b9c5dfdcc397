"""``--compare KEY=VALUE``: the same workload run twice, as configured and with one setting
changed, and the difference of every figure (changed minus base).

Keys (the spec's names; ``QUEUE`` is a declared queue):

* ``scheduler.preemption`` (true/false), ``scheduler.fairSharing.enable`` (true/false);
* ``scheduler.queues.QUEUE.nominalQuota`` (GPUs), ``.borrowingLimit`` (GPUs),
  ``.preemption`` (true/false), ``.fairSharing.weight`` (number);
* ``checkpointMinutes`` (the ``--checkpoint-minutes`` of the changed run).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainmaster.scheduler import QueueSpec

from ._faults import FaultModel
from ._queues import QueueConfig

QUEUE_KEYS = ("nominalQuota", "borrowingLimit", "preemption", "fairSharing.weight")
KEYS = ("scheduler.preemption", "scheduler.fairSharing.enable",
        *(f"scheduler.queues.QUEUE.{k}" for k in QUEUE_KEYS), "checkpointMinutes")


@dataclass(frozen=True, slots=True)
class Change:
    key: str
    value: bool | int | float
    queue: str | None = None
    """For ``scheduler.queues.QUEUE.*``."""

    @property
    def label(self) -> str:
        value = str(self.value).lower() if isinstance(self.value, bool) else self.value
        return f"{self.key}={value}"


def _bool(key: str, text: str) -> bool:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise ValueError(f"--compare {key}: the value must be true or false, got {text!r}")


def _count(key: str, text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"--compare {key}: the value must be a whole number >= 0, got {text!r}")
    return int(text)


def _number(key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"--compare {key}: the value must be a number >= 0, got {text!r}")
    return value


def parse_change(text: str, queues: QueueConfig) -> Change:
    """``KEY=VALUE`` -> Change. Raises ValueError (a usage error) naming the key and the
    allowed keys, or the bad value."""
    key, sep, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    allowed = ", ".join(KEYS)
    if not sep or not key or not raw:
        raise ValueError(f"--compare takes KEY=VALUE (e.g. scheduler.preemption=false), got "
                         f"{text!r}; keys: {allowed}")
    if key == "checkpointMinutes":
        return Change(key, _number(key, raw))
    if key.startswith("scheduler.") and not queues.configured:
        raise ValueError(f"--compare {key}: the run has no queues to change: give --spec, "
                         "or --queues with --nodes")
    if key in ("scheduler.preemption", "scheduler.fairSharing.enable"):
        return Change(key, _bool(key, raw))
    parts = key.split(".", 3)
    if len(parts) == 4 and parts[:2] == ["scheduler", "queues"] and parts[3] in QUEUE_KEYS:
        queue, setting = parts[2], parts[3]
        names = [q.name for q in queues.queues]
        if queue not in names:
            raise ValueError(f"--compare {key}: {queue!r} is not a queue of {queues.source}: "
                             f"use one of {', '.join(names)}")
        spec = queues.spec(queue)
        if setting == "borrowingLimit" and spec is not None and spec.cohort is None:
            raise ValueError(f"--compare {key}: queue {queue!r} has no cohort to borrow from")
        value: bool | int | float = (
            _bool(key, raw) if setting == "preemption"
            else _number(key, raw) if setting == "fairSharing.weight" else _count(key, raw))
        return Change(key, value, queue)
    raise ValueError(f"--compare: unknown key {key!r}; the keys are {allowed} (QUEUE: one "
                     "of the declared queues)")


def changed_queues(queues: QueueConfig, change: Change) -> QueueConfig:
    if change.key == "scheduler.preemption":
        return dataclasses.replace(queues, preemption=bool(change.value))
    if change.key == "scheduler.fairSharing.enable":
        return dataclasses.replace(queues, fair=dataclasses.replace(
            queues.fair, enable=bool(change.value)))
    if change.queue is None:
        return queues
    setting = change.key.split(".", 3)[3]

    def changed(q: QueueSpec) -> QueueSpec:
        if setting == "nominalQuota":
            return dataclasses.replace(q, nominal_quota=int(change.value))
        if setting == "borrowingLimit":
            return dataclasses.replace(q, borrowing_limit=int(change.value))
        if setting == "preemption":
            return dataclasses.replace(q, preemption=bool(change.value))
        return dataclasses.replace(q, weight=float(change.value))

    specs = tuple(changed(q) if q.name == change.queue else q for q in queues.queues)
    return dataclasses.replace(queues, queues=specs)


def changed_faults(faults: FaultModel, change: Change) -> FaultModel:
    if change.key == "checkpointMinutes":
        return dataclasses.replace(faults, checkpoint_minutes=float(change.value))
    return faults


def difference(base: Mapping[str, Any], changed: Mapping[str, Any]) -> dict[str, Any]:
    """``changed - base`` for every number of a result (None where either is None), the
    queues matched by name; names and other text are kept."""
    out: dict[str, Any] = {}
    for key, new in changed.items():
        old = base.get(key)
        if key == "queues" and isinstance(new, list) and isinstance(old, list):
            olds = {q["queue"]: q for q in old}
            out[key] = [difference(olds.get(q["queue"], {}), q) for q in new]
        elif isinstance(new, dict) and isinstance(old, dict):
            out[key] = difference(old, new)
        elif isinstance(new, (bool, str)):
            out[key] = new
        elif isinstance(new, int | float) and isinstance(old, int | float) \
                and not isinstance(old, bool):
            delta = new - old
            out[key] = round(delta, 4) if isinstance(delta, float) else delta
        elif key in ("policy", "queue"):
            out[key] = new
        else:
            out[key] = None
    return out
