"""The README's main job works end to end: a cluster with 3 real nodes, the committed demo
stack deployed by `trainmaster pulumi up` (the real engine), the scheduler and the operator
as pods on the real nodes, the real training job killed and resumed at its checkpoint,
and `cluster down` stopping everything."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client

from tests.helpers import ROOT
from trainmaster.kubeclient import generated_client

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.image]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_demo_runs_and_down_stops_everything(tmp_path: Path) -> None:
    env = {**os.environ, "TRAINMASTER_HOME": str(tmp_path)}
    env.pop("KUBECONFIG", None)
    state = tmp_path / "clusters" / "dev"
    try:
        proc = subprocess.run([sys.executable, "-m", "trainmaster", "demo"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=1500)
        assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
        out = proc.stdout
        print(out, proc.stderr[-600:], sep="\n", flush=True)  # what the demo showed (-s)
        assert "dp-example: resumed at its checkpointed step" in proc.stderr
        resumed = re.search(r"resumed at step (\d+) \(rank 0: \"resumed from "
                            r"/checkpoints/dp-example/step-(\d+) at step", out)
        newest = re.search(r"newest checkpoint on disk when the gang died: step (\d+)", out)
        assert resumed and newest, out
        assert resumed.group(1) == resumed.group(2) == newest.group(1)
        # The controllers run as pods on the real nodes under their own ServiceAccounts.
        for name in ("trainmaster-scheduler", "dev-operator"):
            assert re.search(rf"trainmaster-system +{name}-\S+ +1/1 +Running +\d+ +10\.244\.\S+ "
                             rf"+leaf-0-node-[012] +{name}\n", out), out
        assert re.search(r"trainmaster +dp-example-r1-0-\S+ +1/1 +Running .* leaf-0-node-[012] +"
                         r"dp-example-trainer", out), out
        # The stack came from the real Pulumi engine: its summary, and its field manager
        # on what it applied.
        assert re.search(r"Deployed by trainmaster pulumi up --stack demo: \d+ create", out), out
        # The monitoring stack runs by default: the kill's alert fired and reached
        # Alertmanager, and the demo says where to see targets and the alert history.
        assert re.search(r"TrainingGangRestarted fired in Prometheus [\d.]+s after the kill, "
                         r"reached Alertmanager at [\d.]+s", out), out
        assert "trainmaster cluster monitoring" in proc.stderr
        shown = subprocess.run(
            [sys.executable, "-m", "trainmaster", "cluster", "monitoring", "--name", "dev"],
            env=env, capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert [ln for ln in shown.stdout.splitlines()
                if "TrainingGangRestarted" in ln and "still firing" in ln], shown.stdout
        record = json.loads((state / "cluster.json").read_text())
        apps = client.AppsV1Api(generated_client(Path(record["kubeconfig"])))
        deployment = apps.read_namespaced_deployment("trainmaster-scheduler",
                                                     "trainmaster-system")
        managers = {(f.manager, f.operation) for f in deployment.metadata.managed_fields}
        assert any(m.startswith("pulumi-kubernetes") for m, _ in managers), managers
        assert not any(m == "trainmaster" for m, _ in managers), managers
        assert record["real_nodes"] == ["leaf-0-node-0", "leaf-0-node-1", "leaf-0-node-2"]
        _check_traffic(out)
        pids = [p["pid"] for p in record["processes"]]
    finally:
        down = subprocess.run([sys.executable, "-m", "trainmaster", "cluster", "down",
                               "--name", "dev"], env=env, capture_output=True, text=True,
                              timeout=300)
    assert down.returncode == 0, down.stderr
    assert not any(_alive(pid) for pid in pids)


GRADIENT_BYTES = (64 + 1) * 8
"""examples/data-parallel: 64 features and the loss, float64, each way per step."""


def _check_traffic(out: str) -> None:
    """Rank 0's bytes per interface: the all-reduce on the first rail (at least the
    gradients' payload each way every step), the other rails and storage nearly idle."""
    step = re.search(r"Bytes through each interface of rank 0 \(\S+\) since its pod "
                     r"started, at step (\d+)", out)
    assert step, out
    rows = {m.group(1): (int(m.group(2).replace(",", "")), int(m.group(3).replace(",", "")))
            for m in re.finditer(r"^  (\w+) +.*rx +([\d,]+) B  tx +([\d,]+) B$", out, re.M)}
    assert {"eth0", "net1", "net2", "net3", "net4", "storage0"} <= set(rows), rows
    steps = int(step.group(1))
    rail = rows["net1"]
    assert min(rail) >= GRADIENT_BYTES * (steps - 1), (steps, rows)
    for idle in ("net2", "net3", "net4", "storage0"):
        assert sum(rows[idle]) * 10 < sum(rail), (idle, rows)
