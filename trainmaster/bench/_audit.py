"""The bench cluster's API server audit log, narrowed to Bindings and Lease writes: when
the API server answered each, by its own clock (microseconds; one host, so the same
clock as the benchmark's ``time.time()``).

Why: a watch of 10,000 pods lags seconds behind a burst of binds, and a scheduler's own
log of a bind's answer waits for its event loop; the audit log's ``stageTimestamp`` of
``ResponseComplete`` is when the write was done.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import yaml

POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted", "Panic"],
    "rules": [
        {"level": "Metadata", "verbs": ["create"],
         "resources": [{"group": "", "resources": ["pods/binding"]}]},
        # The Lease's body names the holder a write gives it to.
        {"level": "Request", "verbs": ["create", "update"],
         "resources": [{"group": "coordination.k8s.io", "resources": ["leases"]}]},
        {"level": "None"},
    ],
}


@dataclass(frozen=True, slots=True)
class AuditLog:
    path: Path

    @classmethod
    def prepare(cls, folder: Path) -> tuple[AuditLog, list[str]]:
        """The log in ``folder`` and the kube-apiserver flags that write it."""
        policy = folder / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(POLICY, sort_keys=False))
        log = cls(folder / "audit.log")
        return log, [f"--audit-policy-file={policy}", f"--audit-log-path={log.path}",
                     "--audit-log-mode=blocking", "--audit-log-format=json"]

    def _events(self) -> list[dict[str, object]]:
        try:
            lines = self.path.read_text().splitlines()
        except OSError:
            return []
        events = []
        for line in lines:
            try:
                events.append(json.loads(line))
            except ValueError:  # the line being written
                continue
        return events

    def lease_taken(self, holder: str, namespace: str, after: float) -> float | None:
        """When the API server stored the first Lease write of ``namespace`` that gives
        it to ``holder``, at or after ``after`` (Unix seconds)."""
        for event in self._events():
            ref = event.get("objectRef") or {}
            if not isinstance(ref, dict) or ref.get("resource") != "leases":
                continue
            if ref.get("namespace") != namespace or not _succeeded(event):
                continue
            body = event.get("requestObject") or {}
            spec = body.get("spec") if isinstance(body, dict) else None
            if not isinstance(spec, dict) or spec.get("holderIdentity") != holder:
                continue
            at = _done_at(event)
            if at >= after:
                return at
        return None

    def first_bind(self, namespace: str, after: float) -> float | None:
        """When the API server stored the first Binding of ``namespace`` after ``after``."""
        times = [_done_at(e) for e in self._events()
                 if isinstance(ref := e.get("objectRef"), dict)
                 and ref.get("subresource") == "binding" and ref.get("namespace") == namespace
                 and _succeeded(e)]
        later = [t for t in times if t > after]
        return min(later) if later else None


def _succeeded(event: dict[str, object]) -> bool:
    status = event.get("responseStatus") or {}
    code = status.get("code") if isinstance(status, dict) else None
    return isinstance(code, int) and 200 <= code < 300


def _done_at(event: dict[str, object]) -> float:
    return datetime.fromisoformat(str(event["stageTimestamp"]).replace("Z", "+00:00")
                                  ).timestamp()
