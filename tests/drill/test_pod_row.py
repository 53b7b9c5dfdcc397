"""The demo's pod table counts a pod's sidecars as `kubectl get pods` does (the checkpoint
mirror of a mirrored job is one: an init container with restartPolicy Always)."""

from __future__ import annotations

from typing import Any

from trainmaster.drill import pod_row


def _pod(init: list[dict[str, Any]], init_status: list[dict[str, Any]],
         status: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": "lm-r0-0-abc"},
            "spec": {"containers": [{"name": "trainer"}], "initContainers": init,
                     "nodeName": "leaf-0-node-0", "serviceAccountName": "lm-trainer"},
            "status": {"phase": "Running", "podIP": "10.244.0.6",
                       "containerStatuses": status, "initContainerStatuses": init_status}}


def test_a_sidecar_counts_in_ready_and_restarts_and_a_finished_init_container_does_not(
) -> None:
    pod = _pod([{"name": "launcher"}, {"name": "checkpoint-fetch"},
                {"name": "checkpoint-mirror", "restartPolicy": "Always"}],
               [{"name": "launcher", "ready": False, "restartCount": 0},
                {"name": "checkpoint-fetch", "ready": False, "restartCount": 0},
                {"name": "checkpoint-mirror", "ready": True, "restartCount": 1}],
               [{"name": "trainer", "ready": True, "restartCount": 0}])
    assert pod_row("trainmaster", pod) == (
        "trainmaster", "lm-r0-0-abc", "2/2", "Running", "1", "10.244.0.6", "leaf-0-node-0",
        "lm-trainer")


def test_a_pod_without_sidecars_and_a_waiting_container() -> None:
    pod = _pod([{"name": "launcher"}], [],
               [{"name": "trainer", "ready": False, "restartCount": 0,
                 "state": {"waiting": {"reason": "ContainerCreating"}}}])
    assert pod_row("trainmaster", pod)[2:5] == ("0/1", "ContainerCreating", "0")
