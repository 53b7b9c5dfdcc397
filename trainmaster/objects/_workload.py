"""The workloads of trainmaster's own image (the scheduler, the operator, the UI, the NIC
agent): one container running a trainmaster command at the `restricted` Pod Security
standard, in a pod of its own ServiceAccount, under a Deployment or a DaemonSet.

Each builder keeps the field order the workloads always rendered, and inserts the dicts
it is given as they are (a dict used twice renders as a YAML anchor and its alias), so a
workload built here renders exactly as it did when each wrote out its own.
"""

from __future__ import annotations

from typing import Any

from trainmaster.objects._security import restricted_container, restricted_pod
from trainmaster.spec import ClusterSpec


def system_container(spec: ClusterSpec, name: str, command: list[str], *,
                     ports: list[dict[str, Any]], cpu: str, memory: str, memory_limit: str,
                     env: list[dict[str, Any]] | None = None,
                     probes: dict[str, Any] | None = None,
                     volume_mounts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The container: trainmaster's image running `command`, requesting `cpu` and
    `memory`, its memory limited to `memory_limit`; `probes` are its readinessProbe /
    livenessProbe entries. `env` and `volume_mounts` appear only when given."""
    container: dict[str, Any] = {
        "name": name,
        "image": spec.image.reference,
        "imagePullPolicy": spec.image.pull_policy,
        "command": command,
    }
    if env is not None:
        container["env"] = env
    container["ports"] = ports
    container.update(probes or {})
    container["resources"] = {
        "requests": {"cpu": cpu, "memory": memory},
        "limits": {"memory": memory_limit},
    }
    container["securityContext"] = restricted_container()
    if volume_mounts is not None:
        container["volumeMounts"] = volume_mounts
    return container


def system_pod(account: str, container: dict[str, Any], *, placement: dict[str, Any],
               priority_class: str | None = None,
               volumes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The pod spec: ServiceAccount `account`, the `restricted` pod securityContext, the
    pod-spec fields of `placement` (nodeSelector, tolerations, ...) and one container."""
    pod: dict[str, Any] = {"serviceAccountName": account, "securityContext": restricted_pod()}
    if priority_class is not None:
        pod["priorityClassName"] = priority_class
    pod.update(placement)
    pod["containers"] = [container]
    if volumes is not None:
        pod["volumes"] = volumes
    return pod


def system_workload(kind: str, name: str, namespace: str, labels: dict[str, str],
                    selector: dict[str, str], pod: dict[str, Any], *,
                    replicas: int | None = None,
                    strategy: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Deployment or DaemonSet (`kind`) of `pod`, its pods labelled `labels` and
    selected by `selector`; `replicas` and `strategy` appear only when given."""
    workload_spec: dict[str, Any] = {}
    if replicas is not None:
        workload_spec["replicas"] = replicas
    workload_spec["selector"] = {"matchLabels": selector}
    if strategy is not None:
        workload_spec["strategy"] = strategy
    workload_spec["template"] = {"metadata": {"labels": labels}, "spec": pod}
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": workload_spec,
    }
