"""On the real control plane: the launcher of a restarted gang reports how long it took to
reach its first step, the operator adds its rank-0 pod's start and writes the sum to the
gang's PodGroup, and the scheduler's preemption prices a restart of that gang from it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tests.operator.kit import OperatorEnv, job_doc, wait_for
from tests.scheduler.builders import make_pod
from trainmaster.api import COMPLETION_INDEX_ANNOTATION, RESTART_ANNOTATION, epoch_seconds
from trainmaster.launch import ApiSink
from trainmaster.objects import PODGROUP_GROUP, PODGROUP_VERSION
from trainmaster.scheduler.plugins.preemption import Victim, priced
from trainmaster.scheduler.runtime.convert import pod_group_info

pytestmark = pytest.mark.integration


def test_a_restart_reported_by_the_launcher_prices_the_gang_in_preemption(
        env: OperatorEnv) -> None:
    env.create_job(job_doc("gpt", nodes=2))
    pods = env.wait_gang_running("gpt", 0, 2)
    env.report_checkpoint("gpt", "/checkpoints/gpt/step-100", 100)
    env.fail_pod(pods[0]["metadata"]["name"], 137)
    env.wait_gang_running("gpt", 1, 2)
    # The operator's own part: the new rank-0 pod's start to its trainer's start.
    pod_start = wait_for(lambda: (p := env.status("gpt").get("podStart") or {})
                         .get("attempt") == 1 and p, "the operator records status.podStart")
    pod = next(p for p in env.pods("gpt", 1)
               if p["metadata"]["annotations"].get(COMPLETION_INDEX_ANNOTATION) == "0")
    trainer = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "trainer")
    assert pod_start["seconds"] == (
        epoch_seconds(trainer["state"]["running"]["startedAt"])
        - epoch_seconds(pod["status"]["startTime"]))
    expected = 42.5 + pod_start["seconds"]
    # What the new gang's rank 0 launcher sends at its first step after the load.
    sink = ApiSink(env.namespace, "gpt", env.kubeconfig)
    try:
        assert sink.restarted(42.5, 1, datetime.now(UTC))
    finally:
        sink.close()
    assert env.status("gpt")["lastRestart"]["seconds"] == 42.5

    def marked() -> dict[str, Any] | None:
        group: dict[str, Any] = env.custom.get_namespaced_custom_object(
            PODGROUP_GROUP, PODGROUP_VERSION, env.namespace, "podgroups", "gpt-r1")
        annotations = group["metadata"].get("annotations") or {}
        return group if annotations.get(RESTART_ANNOTATION) == f"{expected:g}" else None

    group = wait_for(marked, "the operator marks the PodGroup with the restart seconds")
    info = pod_group_info(group)
    assert info.restart_seconds == expected
    # Two 8-GPU pods, 100 s since the checkpoint: the restart adds 16 GPUs x its seconds.
    victim = Victim(info.key, 0, tuple((make_pod(f"p{i}", gpus=8), "n") for i in range(2)))
    found = priced(victim, 5, now=1000.0, since=900.0, restart_seconds=info.restart_seconds)
    assert found is not None and found.work_lost == 16 * 100 + 16 * expected
