"""Where the launcher's reports go. The contract with the operator is two fields of the
TrainingJob's status, written with a JSON merge patch (so nothing else is touched):

    status.lastHeartbeat   RFC 3339 time of the last sign of progress
    status.lastCheckpoint  {path, step, time} of the newest complete checkpoint
    status.resumedFrom     {path, step, attempt, time}: the gang resumed from a newer
                           checkpoint on disk than the operator's resumeFrom (see _resume)
    status.lastRestart     {seconds, attempt, time}: an attempt that resumed from a
                           checkpoint took `seconds` from the launcher's start to its first
                           training step (the checkpoint loaded); the operator copies it
                           to the PodGroup for preemption's price of a restart

Reporting never stops training: a failed report is logged and retried on the next tick.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from trainmaster.api import format_time
from trainmaster.launch._incluster import in_cluster, patch_status

if TYPE_CHECKING:
    from trainmaster.kubeclient import SyncKube


class Sink(Protocol):
    def heartbeat(self, when: datetime) -> bool: ...

    def checkpoint(self, path: str, step: int, when: datetime) -> bool: ...

    def resumed(self, path: str, step: int, attempt: int, when: datetime) -> bool: ...

    def restarted(self, seconds: float, attempt: int, when: datetime) -> bool: ...


def heartbeat_patch(when: datetime) -> dict[str, Any]:
    return {"status": {"lastHeartbeat": format_time(when)}}


def checkpoint_patch(path: str, step: int, when: datetime) -> dict[str, Any]:
    stamp = format_time(when)
    # A completed checkpoint is progress too: it moves the heartbeat along with it.
    return {"status": {"lastCheckpoint": {"path": path, "step": step, "time": stamp},
                       "lastHeartbeat": stamp}}


def resumed_patch(path: str, step: int, attempt: int, when: datetime) -> dict[str, Any]:
    stamp = format_time(when)
    return {"status": {"resumedFrom": {"path": path, "step": step, "attempt": attempt,
                                       "time": stamp}}}


def restarted_patch(seconds: float, attempt: int, when: datetime) -> dict[str, Any]:
    return {"status": {"lastRestart": {"seconds": round(seconds, 1), "attempt": attempt,
                                       "time": format_time(when)}}}


class ApiSink:
    """Patches the TrainingJob's status subresource (RBAC: patch trainingjobs/status): in a
    pod through its service account (standard library only, so the launcher bundle needs
    nothing from the training image but Python), elsewhere through trainmaster's client
    and a kubeconfig."""

    def __init__(self, namespace: str, name: str, kubeconfig: Path | None = None) -> None:
        self.namespace = namespace
        self.name = name
        self._kubeconfig = kubeconfig
        self._api: SyncKube | None = None

    def _kube(self) -> SyncKube:
        if self._api is None:  # connected on first use: a launcher may never report
            from trainmaster.kubeclient import SyncKube

            self._api = SyncKube.connect(self._kubeconfig, pool=2)
        return self._api

    def _patch(self, body: dict[str, Any], what: str) -> bool:
        try:
            if self._kubeconfig is None and in_cluster():
                patch_status(self.namespace, self.name, body)
                return True
            from trainmaster.kubeclient import trainingjob_path

            kube = self._kube()
            kube.run(kube.kube.request(
                "PATCH", trainingjob_path(self.namespace, self.name, "status"), body=body,
                content_type="application/merge-patch+json", timeout=10))
        except Exception as exc:  # reporting must never take training down
            print(f"trainmaster launch: could not report {what} to trainingjob "
                  f"{self.namespace}/{self.name}: {exc}", file=sys.stderr, flush=True)
            return False
        return True

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    def heartbeat(self, when: datetime) -> bool:
        return self._patch(heartbeat_patch(when), "a heartbeat")

    def checkpoint(self, path: str, step: int, when: datetime) -> bool:
        return self._patch(checkpoint_patch(path, step, when), f"checkpoint {path}")

    def resumed(self, path: str, step: int, attempt: int, when: datetime) -> bool:
        return self._patch(resumed_patch(path, step, attempt, when), f"resuming from {path}")

    def restarted(self, seconds: float, attempt: int, when: datetime) -> bool:
        return self._patch(restarted_patch(seconds, attempt, when),
                           f"a restart of {seconds:.1f}s")
