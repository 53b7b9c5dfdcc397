"""The NICHealthy node condition: the status patch that sets it, and sending it.

A strategic-merge patch of status.conditions (merge key `type`), so the kubelet's own
conditions (and kwok's, on simulated nodes) stay as they are. lastTransitionTime changes
only when the status does, as the kubelet does for its conditions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from trainmaster.api import NIC_CONDITION, format_seconds
from trainmaster.kubeclient import Kube, node_path
from trainmaster.nodeagent._nic import NicVerdict


def condition_patch(
    existing: Iterable[Mapping[str, Any]], verdict: NicVerdict, now: datetime,
    condition: str = NIC_CONDITION,
) -> dict[str, Any]:
    status = "True" if verdict.healthy else "False"
    old = next((c for c in existing if c.get("type") == condition), None)
    since = old.get("lastTransitionTime") if old and old.get("status") == status else None
    return {"status": {"conditions": [{
        "type": condition,
        "status": status,
        "reason": verdict.reason,
        "message": verdict.message[:1024],
        "lastHeartbeatTime": format_seconds(now),
        "lastTransitionTime": since or format_seconds(now),
    }]}}


async def report_condition(kube: Kube, node: str, verdict: NicVerdict,
                           now: datetime | None = None,
                           current: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Set the condition on `node` (`current`: the Node as just read, else it is read);
    returns the patch sent."""
    if current is None:
        current = await kube.get(node_path(node))
    conditions = (current.get("status") or {}).get("conditions") or []
    patch = condition_patch(conditions, verdict, now or datetime.now(UTC))
    await kube.patch(node_path(node, "status"), patch, "strategic")
    return patch
