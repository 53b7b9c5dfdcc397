"""Where the launcher's reports go. The contract with the operator is two fields of the
TrainingJob's status, written with a JSON merge patch (so nothing else is touched):

    status.lastHeartbeat   RFC 3339 time of the last sign of progress
    status.lastCheckpoint  {path, step, time} of the newest complete checkpoint

Reporting never stops training: a failed report is logged and retried on the next tick.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from trainmaster.objects import TRAININGJOB_GROUP, TRAININGJOB_PLURAL, TRAININGJOB_VERSION


def rfc3339(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Sink(Protocol):
    def heartbeat(self, when: datetime) -> bool: ...

    def checkpoint(self, path: str, step: int, when: datetime) -> bool: ...


def heartbeat_patch(when: datetime) -> dict[str, Any]:
    return {"status": {"lastHeartbeat": rfc3339(when)}}


def checkpoint_patch(path: str, step: int, when: datetime) -> dict[str, Any]:
    stamp = rfc3339(when)
    # A completed checkpoint is progress too: it moves the heartbeat along with it.
    return {"status": {"lastCheckpoint": {"path": path, "step": step, "time": stamp},
                       "lastHeartbeat": stamp}}


class ApiSink:
    """Patches the TrainingJob's status subresource (RBAC: patch trainingjobs/status)."""

    def __init__(self, namespace: str, name: str, kubeconfig: Path | None = None) -> None:
        self.namespace = namespace
        self.name = name
        self._kubeconfig = kubeconfig
        self._api: Any = None

    def _custom(self) -> Any:
        from kubernetes import client, config

        if self._api is None:
            if self._kubeconfig is None and _in_cluster():
                cfg = client.Configuration()
                config.load_incluster_config(client_configuration=cfg)
                api = client.ApiClient(cfg)
            else:
                from trainmaster.kube import sync_client

                api = sync_client(self._kubeconfig, pool=2)
            self._api = client.CustomObjectsApi(api)
        return self._api

    def _patch(self, body: dict[str, Any], what: str) -> bool:
        try:
            self._custom().patch_namespaced_custom_object_status(
                TRAININGJOB_GROUP, TRAININGJOB_VERSION, self.namespace, TRAININGJOB_PLURAL,
                self.name, body, _content_type="application/merge-patch+json",
                _request_timeout=10,
            )
        except Exception as exc:  # reporting must never take training down
            print(f"trainmaster launch: could not report {what} to trainingjob "
                  f"{self.namespace}/{self.name}: {exc}", file=sys.stderr, flush=True)
            return False
        return True

    def heartbeat(self, when: datetime) -> bool:
        return self._patch(heartbeat_patch(when), "a heartbeat")

    def checkpoint(self, path: str, step: int, when: datetime) -> bool:
        return self._patch(checkpoint_patch(path, step, when), f"checkpoint {path}")


def _in_cluster() -> bool:
    import os

    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not os.environ.get("KUBECONFIG")
