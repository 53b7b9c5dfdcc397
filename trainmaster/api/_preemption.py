"""A preemption as the scheduler records it on its ``Preempted`` Event, for readers.

The Event's message is for people, and its wording changes (a shrink of an elastic gang
reads differently from an eviction). Readers (`trainmaster ui`'s queue table) need the
figures, so the scheduler also writes them as JSON in the Event's annotation
``PREEMPTION_ANNOTATION``; ``preemption_annotations`` writes it and ``read_preemption``
reads it back: one encoding, both sides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from trainmaster.api._keys import PREEMPTION_ANNOTATION

FAIR_SHARING = "fair sharing"
RECLAIM = "reclaiming its queue's quota"
HIGHER_PRIORITY = "higher priority"


@dataclass(frozen=True)
class PreemptionRecord:
    """One victim gang of one preemption."""

    preemptor: str
    """The preemptor gang's key, ``namespace/name``."""
    priority: int
    queue: str
    """The preemptor's queue."""
    why: str
    """FAIR_SHARING, RECLAIM or HIGHER_PRIORITY."""
    gpus: int
    """GPUs freed."""
    work_lost: float
    """GPU-seconds: since the victim's last checkpoint, or its rescale (a shrink)."""
    shrink: bool = False
    """An elastic victim shrunk by ``members`` rather than evicted whole."""
    members: int = 0
    """Members evicted."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def preemption_annotations(record: PreemptionRecord) -> dict[str, str]:
    """The Event's annotations that carry ``record``."""
    return {PREEMPTION_ANNOTATION: record.to_json()}


def read_preemption(event: Mapping[str, Any]) -> PreemptionRecord | None:
    """The record of a ``Preempted`` Event (None: it has none or it does not parse)."""
    text = ((event.get("metadata") or {}).get("annotations") or {}).get(PREEMPTION_ANNOTATION)
    if not text:
        return None
    try:
        doc = json.loads(text)
        return PreemptionRecord(
            str(doc["preemptor"]), int(doc["priority"]), str(doc["queue"]), str(doc["why"]),
            int(doc["gpus"]), float(doc["work_lost"]), bool(doc.get("shrink", False)),
            int(doc.get("members", 0)))
    except (ValueError, KeyError, TypeError):
        return None
