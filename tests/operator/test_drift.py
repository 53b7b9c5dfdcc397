"""Drift: each object the operator owns, deleted or edited by hand, is restored."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conftest import LocalCluster
from tests.operator.kit import OperatorEnv, job_doc, operator_env, wait_for
from trainmaster.objects import (
    PODGROUP_GROUP,
    PODGROUP_PLURAL,
    PODGROUP_VERSION,
    build_launch_config,
)
from trainmaster.spec import Job

pytestmark = pytest.mark.integration

NODES = 2


@pytest.fixture(scope="module")
def running(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[OperatorEnv]:
    """One running job for every drift case (each case leaves it restored)."""
    with operator_env(cluster.kubeconfig, cluster.spec, tmp_path_factory.mktemp("drift")) as env:
        env.create_job(job_doc("gpt", nodes=NODES))
        env.wait_gang_running("gpt", 0, NODES)
        yield env


def _podgroup(env: OperatorEnv) -> dict[str, Any]:
    result: dict[str, Any] = env.custom.get_namespaced_custom_object(
        PODGROUP_GROUP, PODGROUP_VERSION, env.namespace, PODGROUP_PLURAL, "gpt-r0")
    return result


class Case:
    """How to read one owned object, break it, and tell that it is as declared."""

    def __init__(self, read: Callable[[OperatorEnv], Any], delete: Callable[[OperatorEnv], Any],
                 edit: Callable[[OperatorEnv], Any], ok: Callable[[OperatorEnv, Any], bool]
                 ) -> None:
        self.read, self.delete, self.edit, self.ok = read, delete, edit, ok


def _launch_script(env: OperatorEnv) -> str:
    job = Job.model_validate(job_doc("gpt", nodes=NODES))
    script: str = build_launch_config(env.spec, job)["data"]["launch.sh"]
    return script


CASES = {
    "job": Case(
        read=lambda e: e.batch.read_namespaced_job("gpt-r0", e.namespace),
        delete=lambda e: e.batch.delete_namespaced_job(
            "gpt-r0", e.namespace, propagation_policy="Background"),
        edit=lambda e: e.batch.patch_namespaced_job(
            "gpt-r0", e.namespace, {"spec": {"parallelism": 1}}),
        ok=lambda e, job: job.spec.parallelism == NODES and job.spec.completions == NODES,
    ),
    "service": Case(
        read=lambda e: e.core.read_namespaced_service("gpt", e.namespace),
        delete=lambda e: e.core.delete_namespaced_service("gpt", e.namespace),
        edit=lambda e: e.core.patch_namespaced_service(
            "gpt", e.namespace, {"spec": {"selector": {"trainmaster.io/job": "someone-else"}}}),
        ok=lambda e, svc: svc.spec.selector == {"trainmaster.io/job": "gpt"}
        and svc.spec.cluster_ip == "None",
    ),
    "configmap": Case(
        read=lambda e: e.core.read_namespaced_config_map("gpt-launch", e.namespace),
        delete=lambda e: e.core.delete_namespaced_config_map("gpt-launch", e.namespace),
        edit=lambda e: e.core.patch_namespaced_config_map(
            "gpt-launch", e.namespace, {"data": {"launch.sh": "echo hijacked"}}),
        ok=lambda e, cm: cm.data["launch.sh"] == _launch_script(e),
    ),
    "podgroup": Case(
        read=_podgroup,
        delete=lambda e: e.custom.delete_namespaced_custom_object(
            PODGROUP_GROUP, PODGROUP_VERSION, e.namespace, PODGROUP_PLURAL, "gpt-r0"),
        edit=lambda e: e.custom.patch_namespaced_custom_object(
            PODGROUP_GROUP, PODGROUP_VERSION, e.namespace, PODGROUP_PLURAL, "gpt-r0",
            {"spec": {"minMember": 1}}, _content_type="application/merge-patch+json"),
        ok=lambda e, pg: pg["spec"]["minMember"] == NODES,
    ),
}


def _uid(obj: Any) -> str:
    return str(obj["metadata"]["uid"] if isinstance(obj, dict) else obj.metadata.uid)


def _restored(env: OperatorEnv, case: Case, not_uid: str | None = None) -> Any:
    def check() -> Any:
        try:
            obj = case.read(env)
        except Exception:
            return None
        if not_uid is not None and _uid(obj) == not_uid:
            return None
        return obj if case.ok(env, obj) else None
    return wait_for(check, "the object to be restored")


@pytest.mark.parametrize("kind", sorted(CASES))
def test_an_owned_object_edited_by_hand_is_restored(running: OperatorEnv, kind: str) -> None:
    case = CASES[kind]
    _restored(running, case)
    case.edit(running)
    _restored(running, case)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_an_owned_object_deleted_by_hand_is_restored(running: OperatorEnv, kind: str) -> None:
    case = CASES[kind]
    old = _uid(_restored(running, case))
    case.delete(running)
    _restored(running, case, not_uid=old)
    # Restoring is not a restart: same attempt, no restart counted, gang running again.
    running.wait_gang_running("gpt", 0, NODES)
    status = running.status("gpt")
    assert (status["attempt"], status["restarts"]) == (0, 0)
