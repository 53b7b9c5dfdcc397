"""The CLI against the real local control plane (the test session's), through the
installed entry point: a server-side dry run stores nothing; `cluster status` and
`status` answer; `--context` picks the context."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli.entry import run
from tests.conftest import LocalCluster
from tests.helpers import stack_doc, write_spec
from trainmaster.kubeclient import SyncKube, namespace_path

pytestmark = pytest.mark.integration


def test_apply_dry_run_server_checks_and_stores_nothing(local_cluster: LocalCluster,
                                                         tmp_path: Path) -> None:
    doc = stack_doc()
    doc["metadata"]["namespace"] = "dryrun-cli"
    spec = write_spec(tmp_path / "spec.yaml", doc)
    proc = run("apply", str(spec), "--dry-run=server", "--kubeconfig",
               str(local_cluster.kubeconfig))
    assert proc.returncode == 0, proc.stderr
    assert "server dry run:" in proc.stderr and "nothing was stored" in proc.stderr
    assert "checked ClusterRole/" in proc.stderr  # plain lines: stderr is not a terminal
    with SyncKube.connect(local_cluster.kubeconfig) as kube:
        for ns in ("dryrun-cli", "dryrun-cli-system"):
            assert not kube.delete(namespace_path(ns), missing_ok=True), f"{ns} was created"


def test_context_flag_selects_a_kubeconfig_context(local_cluster: LocalCluster,
                                                   tmp_path: Path) -> None:
    # A copy of the cluster's kubeconfig whose current context points nowhere: only
    # --context NAME (the real one) reaches the server.
    config = yaml.safe_load(local_cluster.kubeconfig.read_text())
    real = config["current-context"]
    config["contexts"].append({"name": "elsewhere", "context": {
        "cluster": "elsewhere", "user": config["contexts"][0]["context"]["user"]}})
    config["clusters"].append({"name": "elsewhere", "cluster": {
        "server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}})
    config["current-context"] = "elsewhere"
    for entry in config["clusters"]:  # relative files stay where they were
        for key in ("certificate-authority",):
            if key in entry["cluster"]:
                entry["cluster"][key] = str(local_cluster.kubeconfig.parent
                                            / entry["cluster"][key])
    for entry in config["users"]:
        for key in ("client-certificate", "client-key", "tokenFile"):
            if key in entry["user"]:
                entry["user"][key] = str(local_cluster.kubeconfig.parent / entry["user"][key])
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump(config))
    down = run("status", "--kubeconfig", str(kc), "--json")
    assert down.returncode == 1 and "https://127.0.0.1:1" in down.stderr, down.stderr
    up = run("status", "--kubeconfig", str(kc), "--context", real, "--json")
    assert up.returncode == 0, up.stderr
    assert yaml.safe_load(up.stdout)["switches"]


def test_cluster_status_and_status_tables_survive_a_pipe(local_cluster: LocalCluster) -> None:
    proc = run("cluster", "status", "--kubeconfig", str(local_cluster.kubeconfig))
    assert proc.returncode == 0, proc.stderr
    assert f"{local_cluster.nodes}/{local_cluster.nodes} nodes Ready" in proc.stdout
    assert "…" not in proc.stdout
    assert proc.stderr.startswith("trainmaster cluster status: context trainmaster-"), \
        proc.stderr
    assert f"(kubeconfig {local_cluster.kubeconfig}, from local cluster " in proc.stderr
    proc = run("status", "--kubeconfig", str(local_cluster.kubeconfig))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("trainmaster status: context trainmaster-"), proc.stderr
    assert "GPUs by switch" in proc.stdout and "…" not in proc.stdout


def test_cluster_up_prints_plain_progress_lines_in_a_log(tmp_path: Path) -> None:
    # stderr is a pipe here, as in CI: one line per step instead of a silent spinner.
    # The user's kubeconfig ($KUBECONFIG's first file, as kubectl and kind read it) has a
    # context of its own; `cluster up` adds its context there and makes it current.
    user = tmp_path / "user-kubeconfig"
    user.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "elsewhere",
        "clusters": [{"name": "x", "cluster": {"server": "https://elsewhere:443"}}],
        "contexts": [{"name": "elsewhere", "context": {"cluster": "x"}}]}))
    env = {"TRAINMASTER_HOME": str(tmp_path / "home"), "KUBECONFIG": str(user)}
    spec = write_spec(tmp_path / "small.yaml", {**stack_doc(), "jobs": []})
    up = run("cluster", "up", "--spec", str(spec), "--no-build", "--no-kube-scheduler",
             env=env, timeout=600)
    try:
        assert up.returncode == 0, up.stderr
        steps = [line for line in up.stderr.splitlines() if line.startswith("cluster up: ")]
        assert len(steps) >= 3, up.stderr
        assert "is up in" in up.stderr
        assert f"context trainmaster-dev is now current in {user}" in up.stderr
        # Without any flag, `status` reaches the new cluster by kubectl's rule, and says so.
        status = run("status", "--json", env=env)
        assert status.returncode == 0, status.stderr
        assert status.stderr.startswith("trainmaster status: context trainmaster-dev, server "
                                         "https://127.0.0.1:"), status.stderr
        assert f"(kubeconfig {user}, from $KUBECONFIG)" in status.stderr
        # --cluster NAME picks the local cluster whatever the kubeconfig says.
        named = run("status", "--json", "--cluster", "dev", env={**env, "KUBECONFIG": ""})
        assert named.returncode == 0, named.stderr
        assert "from --cluster dev)" in named.stderr
    finally:
        down = run("cluster", "down", "--name", "dev", env=env, timeout=300)
        assert down.returncode == 0, down.stderr
    left = yaml.safe_load(user.read_text())
    assert [c["name"] for c in left["contexts"]] == ["elsewhere"]
    assert left["current-context"] == ""
