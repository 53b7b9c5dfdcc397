"""What a failing real-node test prints: the pods of a namespace, their containers' states
and log tails, and the namespace's events."""

from __future__ import annotations

from kubernetes import client


def describe_namespace(core: client.CoreV1Api, ns: str) -> str:
    """Pods, their states and the namespace's events: what a failure message needs."""
    lines = []
    for pod in core.list_namespaced_pod(ns).items:
        states = [(s.name, s.restart_count, s.state.to_dict() if s.state else None)
                  for s in pod.status.container_statuses or []]
        lines.append(f"{pod.metadata.name} {pod.status.phase} {pod.spec.node_name} {states}")
        for s in pod.status.container_statuses or []:
            try:
                log = core.read_namespaced_pod_log(pod.metadata.name, ns, container=s.name,
                                                   tail_lines=30)
                lines.append(f"--- log {pod.metadata.name}/{s.name}:\n{log}")
            except client.ApiException as exc:
                lines.append(f"--- no log {pod.metadata.name}: {exc.reason}")
    for ev in core.list_namespaced_event(ns).items:
        lines.append(f"event {ev.involved_object.name} {ev.reason}: {ev.message}")
    return "\n".join(lines)
