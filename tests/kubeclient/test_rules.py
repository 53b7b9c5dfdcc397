"""The client's rules that need no cluster: the kubeconfig choice, errors, paths, the
conflict-retry loop."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from trainmaster import objects
from trainmaster.kubeclient import (
    KNOWN_PLURALS,
    PODGROUP_API_VERSION,
    TRAININGJOB_API_VERSION,
    ApiError,
    KubeConfigError,
    api_path,
    choose_kubeconfig,
    describe_target,
    is_status,
    load_configuration,
    object_path,
    pod_path,
    podgroup_path,
    retry_on_conflict,
    select_cluster,
    select_context,
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
    kubeconfig = state / "kubeconfig"
    (state / "cluster.json").write_text(json.dumps({
        "name": name, "state_dir": str(state), "kubeconfig": str(kubeconfig), "spec": "",
        "apiserver_port": 1, "etcd_port": 2, "nodes": 0}))
    kubeconfig.write_text("")
    return kubeconfig


@pytest.fixture()
def no_cluster_selected() -> Iterator[None]:
    yield
    select_cluster(None)
    select_context(None)


def test_the_kubeconfig_rule_is_kubectls_argument_env_in_cluster_home(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home_config = clean_env / "home" / ".kube" / "config"
    assert choose_kubeconfig() == home_config
    _local_cluster(clean_env, "dev")
    # A running local cluster is never picked behind the user's back: kubectl would not.
    assert choose_kubeconfig() == home_config
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert choose_kubeconfig() is None  # in a pod: the service account
    monkeypatch.setenv("KUBECONFIG", f"/a/config{os.pathsep}/b/config")
    assert choose_kubeconfig() == Path("/a/config")  # the first of $KUBECONFIG
    assert choose_kubeconfig(Path("/explicit")) == Path("/explicit")


def test_a_local_cluster_is_chosen_by_name_before_kubeconfig_env(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, no_cluster_selected: None
) -> None:
    local = _local_cluster(clean_env, "dev")
    monkeypatch.setenv("KUBECONFIG", "/a/config")
    select_cluster("dev")
    assert choose_kubeconfig() == local
    assert choose_kubeconfig(Path("/explicit")) == Path("/explicit")
    select_cluster("nope")
    with pytest.raises(KubeConfigError, match=r"--cluster nope: no local cluster of that "
                       r"name \(running: dev\)"):
        choose_kubeconfig()


def test_the_target_names_context_server_file_and_why(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, no_cluster_selected: None
) -> None:
    kubeconfig = clean_env / "kc.yaml"
    kubeconfig.write_text(yaml.safe_dump({
        "current-context": "a",
        "clusters": [{"name": "ca", "cluster": {"server": "https://a:6443"}},
                     {"name": "cb", "cluster": {"server": "https://b:6443"}}],
        "contexts": [{"name": "a", "context": {"cluster": "ca"}},
                     {"name": "b", "context": {"cluster": "cb"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    target = describe_target()
    assert (target.context, target.server, target.why) == ("a", "https://a:6443",
                                                            "$KUBECONFIG")
    assert target.describe() == (f"context a, server https://a:6443 (kubeconfig "
                                 f"{kubeconfig}, from $KUBECONFIG)")
    select_context("b")
    assert describe_target(kubeconfig).describe() == (
        f"context b, server https://b:6443 (kubeconfig {kubeconfig}, from --kubeconfig)")
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert describe_target().describe() == "in-cluster service account, server " \
        "https://10.0.0.1:443"


def test_no_kubeconfig_at_all_says_how_to_choose_one(clean_env: Path) -> None:
    with pytest.raises(KubeConfigError, match="--cluster NAME for a local cluster"):
        asyncio.run(load_configuration())


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
