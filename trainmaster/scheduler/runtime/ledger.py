"""Publishing the queue ledger: the GPUs the scheduler has admitted per queue.

The ledger (``QueueLedger``) is what admission decides by: every bound or assumed pod
charged to its queue (its label, else its PodGroup's, else the default queue). Others
(``trainmaster status``, dashboards) must show the same numbers, not recount pods by a
label some pods lack, so the leader writes it to a ConfigMap of its own namespace
(``queue_ledger_name``), in the shape of Kueue's ClusterQueue status (``flavorsUsage``:
``total`` and ``borrowed`` per resource, one flavor; GPUs first, then every other
resource the queue holds, in base units: millicores, bytes), by server-side apply with
its own field manager.

Writes go through the report writer (off the bind path) and coalesce: at most one is
queued, and it writes the newest ledger when it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from trainmaster.api import (
    APP_COMPONENT_LABEL,
    APP_NAME_LABEL,
    APP_PART_OF_LABEL,
    GPU_RESOURCE,
    QUEUE_LEDGER_COMPONENT,
    QUEUE_LEDGER_KEY,
    queue_ledger_name,
)
from trainmaster.kubeclient import Kube

from ..plugins.quota import QueueUsage
from .events import ApiWriter, now_rfc3339

FLAVOR = "default"
"""The one resource flavor: the scheduler does not tell GPU models apart in quotas."""


def ledger_document(usage: Sequence[QueueUsage]) -> list[dict[str, Any]]:
    """The queues' entries as published (Kueue's ClusterQueue status names)."""
    return [
        {
            "name": q.name,
            **({"cohort": q.cohort} if q.cohort is not None else {}),
            **({"nominalQuota": q.nominal_quota} if q.nominal_quota is not None else {}),
            "flavorsUsage": [{"name": FLAVOR, "resources": [
                {"name": GPU_RESOURCE, "total": q.in_use, "borrowed": q.borrowed},
                *({"name": r, "total": total, "borrowed": borrowed}
                  for r, total, borrowed in q.resources)]}],
        }
        for q in usage
    ]


class LedgerPublisher:
    def __init__(self, api: Kube, writer: ApiWriter, scheduler_name: str,
                 namespace: str) -> None:
        self._api = api
        self._writer = writer
        self._scheduler = scheduler_name
        self._namespace = namespace
        self._latest: list[dict[str, Any]] | None = None
        self._published: list[dict[str, Any]] | None = None
        self._queued = False
        self.writes = 0

    @property
    def path(self) -> str:
        name = queue_ledger_name(self._scheduler)
        return f"/api/v1/namespaces/{self._namespace}/configmaps/{name}"

    def update(self, usage: Sequence[QueueUsage]) -> None:
        """Publish ``usage`` unless it is what was last published."""
        doc = ledger_document(usage)
        self._latest = doc
        if doc == self._published or self._queued:
            return
        self._queued = True
        self._writer.submit(self._write)

    def configmap(self, doc: list[dict[str, Any]]) -> dict[str, Any]:
        body = {"scheduler": self._scheduler, "observedTime": now_rfc3339(), "queues": doc}
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": queue_ledger_name(self._scheduler),
                "namespace": self._namespace,
                "labels": {APP_NAME_LABEL: self._scheduler,
                           APP_COMPONENT_LABEL: QUEUE_LEDGER_COMPONENT,
                           APP_PART_OF_LABEL: "trainmaster"},
            },
            "data": {QUEUE_LEDGER_KEY: yaml.safe_dump(body, sort_keys=False)},
        }

    async def _write(self) -> None:
        self._queued = False
        doc = self._latest
        if doc is None or doc == self._published:
            return
        await self._api.request(
            "PATCH", self.path, params={"fieldManager": self._scheduler, "force": "true"},
            body=self.configmap(doc), content_type="application/apply-patch+yaml")
        self._published = doc
        self.writes += 1
