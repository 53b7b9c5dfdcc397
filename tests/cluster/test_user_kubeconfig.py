"""`cluster up` adds its context to the user's kubeconfig as kind does, and `cluster down`
removes it: the merge itself, on files (the CLI's lifecycle test runs it for real)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainmaster.cluster import ClusterError, ClusterRecord, add_context, remove_context
from trainmaster.kubeclient import choose_kubeconfig, describe_target


def _record(tmp_path: Path, name: str = "dev", port: int = 6443) -> ClusterRecord:
    state = tmp_path / "state" / name
    state.mkdir(parents=True)
    own = state / "kubeconfig"
    own.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": f"trainmaster-{name}",
        "clusters": [{"name": f"trainmaster-{name}", "cluster": {
            "server": f"https://127.0.0.1:{port}", "certificate-authority": "/pki/ca.crt",
            "extensions": [{"name": "trainmaster.io/state-dir", "extension": {
                "apiVersion": "trainmaster.io/v1alpha1", "kind": "LocalCluster",
                "path": str(state)}}]}}],
        "users": [{"name": "admin", "user": {"token": "secret"}}],
        "contexts": [{"name": f"trainmaster-{name}",
                      "context": {"cluster": f"trainmaster-{name}", "user": "admin"}}]}))
    return ClusterRecord(name=name, state_dir=str(state), kubeconfig=str(own), spec="",
                         apiserver_port=port, etcd_port=1, nodes=0)


@pytest.fixture()
def user_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home" / ".kube" / "config"


def test_up_adds_a_current_context_beside_the_users_own_and_down_removes_it(
        user_home: Path, tmp_path: Path) -> None:
    user_home.parent.mkdir(parents=True)
    theirs = {"apiVersion": "v1", "kind": "Config", "current-context": "prod",
              "clusters": [{"name": "prod", "cluster": {"server": "https://prod:443"}}],
              "users": [{"name": "me", "user": {"token": "t"}}],
              "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "me"}}]}
    user_home.write_text(yaml.safe_dump(theirs))
    record = _record(tmp_path)
    assert add_context(record) == (user_home, "trainmaster-dev")
    merged = yaml.safe_load(user_home.read_text())
    assert merged["current-context"] == "trainmaster-dev"
    assert [c["name"] for c in merged["contexts"]] == ["prod", "trainmaster-dev"]
    assert user_home.stat().st_mode & 0o777 == 0o600
    # kubectl's rule now reaches the local cluster through the user's own file.
    assert choose_kubeconfig() == user_home
    target = describe_target()
    assert (target.context, target.server) == ("trainmaster-dev", "https://127.0.0.1:6443")
    add_context(record)  # a second `cluster up`: still one entry of each
    again = yaml.safe_load(user_home.read_text())
    assert [c["name"] for c in again["clusters"]] == ["prod", "trainmaster-dev"]

    # Another cluster's state folder does not remove it; its own does.
    assert remove_context(tmp_path / "elsewhere", "dev") is None
    assert remove_context(Path(record.state_dir), "dev") == user_home
    left = yaml.safe_load(user_home.read_text())
    assert left == {**theirs, "current-context": ""}


def test_kubeconfig_env_is_where_the_context_goes_and_a_broken_file_is_named(
        user_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "mine.yaml"
    monkeypatch.setenv("KUBECONFIG", str(mine))
    record = _record(tmp_path)
    assert add_context(record)[0] == mine and not user_home.exists()
    mine.write_text("- not a mapping\n")
    with pytest.raises(ClusterError, match=r"is not a kubeconfig .*--no-user-context"):
        add_context(record)
