"""The queues' usage history, kept across leaders.

With a usage half-life (``admissionFairSharing.usageHalfLifeSeconds``) fair sharing
orders queues by their decayed average usage, which lives in the leader's memory. So that
a restart or a failover does not forget it, the leader writes it every
``usageHistoryIntervalSeconds`` (30 s by default) to the data key ``history.yaml`` of its
queue-ledger ConfigMap (``queue_ledger_name``: the one ConfigMap it may read and change),
by server-side apply under a field manager of its own, so the ledger's writes and these
never remove each other's key. A new leader reads it before its first cycle and lets the
saved averages decay from the time they were saved toward the usage it sees now. What
happens between the last write and the old leader's end is lost (at most one interval).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import yaml

from trainmaster.api import queue_ledger_name
from trainmaster.kubeclient import ApiError, Kube

from ..plugins.quota import QueueLedger

log = logging.getLogger(__name__)

HISTORY_KEY = "history.yaml"
"""The ledger ConfigMap's data key that holds the decayed usage."""


def history_document(scheduler: str, averages: dict[str, dict[str, float]],
                     saved: float) -> dict[str, Any]:
    """What is written: the averages and the wall-clock time (Unix seconds) they held."""
    return {"scheduler": scheduler, "savedAt": round(saved, 3),
            "queues": {q: {r: round(v, 6) for r, v in a.items()} for q, a in averages.items()}}


def parse_history(text: str) -> tuple[dict[str, dict[str, float]], float] | None:
    """(averages, saved-at) from ``HISTORY_KEY``; None if it is not a history document."""
    try:
        doc = yaml.safe_load(text)
        queues = {str(q): {str(r): float(v) for r, v in (a or {}).items()}
                  for q, a in (doc.get("queues") or {}).items()}
        return queues, float(doc["savedAt"])
    except (yaml.YAMLError, AttributeError, KeyError, TypeError, ValueError):
        return None


class UsageHistory:
    def __init__(self, api: Kube, ledger: QueueLedger, scheduler: str, namespace: str,
                 interval: float, wall: Callable[[], float] = time.time) -> None:
        self._api = api
        self._ledger = ledger
        self._scheduler = scheduler
        self._namespace = namespace
        self._interval = interval
        self._wall = wall
        self.writes = 0

    @property
    def enabled(self) -> bool:
        return bool(self._ledger.fair.usage_half_life and self._ledger.nodes)

    @property
    def path(self) -> str:
        return (f"/api/v1/namespaces/{self._namespace}/configmaps/"
                f"{queue_ledger_name(self._scheduler)}")

    async def load(self) -> list[str]:
        """Restore what the previous leader saved (before the first cycle); the queues
        restored. A missing or unreadable history only costs the ordering it held."""
        if not self.enabled:
            return []
        try:
            cm = await self._api.get(self.path)
        except ApiError as err:
            if not err.not_found:
                log.warning("could not read the usage history (%s): starting without it",
                            err)
            return []
        parsed = parse_history(((cm.get("data") or {}).get(HISTORY_KEY)) or "")
        if parsed is None:
            return []
        averages, saved = parsed
        restored = self._ledger.restore(averages, self._wall() - saved)
        log.info("usage history of %s loaded (saved %.0f s ago)", ", ".join(restored) or
                 "no queue", self._wall() - saved)
        return restored

    async def save(self) -> None:
        """Write the averages now."""
        doc = history_document(self._scheduler, self._ledger.history(), self._wall())
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": queue_ledger_name(self._scheduler),
                             "namespace": self._namespace},
                "data": {HISTORY_KEY: yaml.safe_dump(doc, sort_keys=True)}}
        await self._api.request(
            "PATCH", self.path,
            params={"fieldManager": f"{self._scheduler}-history", "force": "true"},
            body=body, content_type="application/apply-patch+yaml")
        self.writes += 1

    async def run(self) -> None:
        """Save every interval while leading (cancelled when it stops leading)."""
        while self.enabled:
            await asyncio.sleep(self._interval)
            try:
                await self.save()
            except ApiError as err:  # the next interval tries again
                log.warning("could not write the usage history: %s", err)
