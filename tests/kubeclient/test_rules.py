"""The client's rules that need no cluster: the kubeconfig choice, errors, paths, the
conflict-retry loop."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from trainmaster import objects
from trainmaster.kubeclient import (
    KNOWN_PLURALS,
    PODGROUP_API_VERSION,
    TRAININGJOB_API_VERSION,
    ApiError,
    api_path,
    choose_kubeconfig,
    is_status,
    object_path,
    pod_path,
    podgroup_path,
    retry_on_conflict,
    trainingjob_path,
)


@pytest.fixture()
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No $KUBECONFIG, not in a pod, an empty trainmaster home, and a fake $HOME."""
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("TRAINMASTER_HOME", str(tmp_path / "tm"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def _local_cluster(home: Path, name: str) -> Path:
    state = home / "tm" / "clusters" / name
    state.mkdir(parents=True)
    (state / "cluster.json").write_text("{}")
    (state / "kubeconfig").write_text("")
    return state / "kubeconfig"


def test_the_kubeconfig_rule_goes_argument_env_in_cluster_local_cluster_home(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home_config = clean_env / "home" / ".kube" / "config"
    assert choose_kubeconfig() == home_config
    local = _local_cluster(clean_env, "dev")
    assert choose_kubeconfig() == local
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert choose_kubeconfig() is None  # in a pod: the service account
    monkeypatch.setenv("KUBECONFIG", f"/a/config{os.pathsep}/b/config")
    assert choose_kubeconfig() == Path("/a/config")  # the first of $KUBECONFIG
    assert choose_kubeconfig(Path("/explicit")) == Path("/explicit")


def test_two_local_clusters_are_no_default(clean_env: Path) -> None:
    _local_cluster(clean_env, "a")
    _local_cluster(clean_env, "b")
    assert choose_kubeconfig() == clean_env / "home" / ".kube" / "config"


@pytest.mark.parametrize(("status", "transient", "conflict"), [
    (0, True, False), (429, True, False), (500, True, False), (503, True, False),
    (409, False, True), (404, False, False), (422, False, False), (410, False, False),
])
def test_api_errors_say_whether_a_retry_may_help(status: int, transient: bool,
                                                 conflict: bool) -> None:
    err = ApiError(status, "why")
    assert (err.transient, err.conflict, err.not_found) == (transient, conflict, status == 404)
    assert is_status(err, status) and not is_status(ValueError(), status)
    assert str(err) == f"{status} why"


def test_paths_name_one_thing_each() -> None:
    assert pod_path() == "/api/v1/pods"
    assert pod_path("ns", "p", "binding") == "/api/v1/namespaces/ns/pods/p/binding"
    assert podgroup_path("ns") == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/podgroups"
    assert trainingjob_path("ns", "j", "status") == \
        "/apis/trainmaster.io/v1alpha1/namespaces/ns/trainingjobs/j/status"
    assert api_path("v1", "nodes", None, "n") == "/api/v1/nodes/n"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "x"}}
    assert object_path(cm) == "/api/v1/namespaces/x/configmaps/c"


def test_the_known_names_agree_with_trainmaster_objects() -> None:
    assert f"{objects.TRAININGJOB_GROUP}/{objects.TRAININGJOB_VERSION}" == \
        TRAININGJOB_API_VERSION
    assert f"{objects.PODGROUP_GROUP}/{objects.PODGROUP_VERSION}" == PODGROUP_API_VERSION
    assert KNOWN_PLURALS[(TRAININGJOB_API_VERSION, "TrainingJob")] == objects.TRAININGJOB_PLURAL
    assert KNOWN_PLURALS[(PODGROUP_API_VERSION, "PodGroup")] == objects.PODGROUP_PLURAL


def test_retry_on_conflict_reads_again_until_the_write_lands() -> None:
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ApiError(409, "the object has been modified")
        return "written"

    assert asyncio.run(retry_on_conflict(attempt)) == "written"
    assert len(calls) == 3


def test_retry_on_conflict_gives_up_and_passes_other_errors_at_once() -> None:
    calls: list[int] = []

    async def always(status: int) -> None:
        calls.append(1)
        raise ApiError(status, "no")

    with pytest.raises(ApiError) as conflict:
        asyncio.run(retry_on_conflict(lambda: always(409), attempts=4))
    assert conflict.value.conflict and len(calls) == 4
    calls.clear()
    with pytest.raises(ApiError) as other:
        asyncio.run(retry_on_conflict(lambda: always(422)))
    assert other.value.status == 422 and len(calls) == 1
