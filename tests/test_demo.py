"""The README's main job works end to end: a cluster with 3 real nodes, the committed demo
stack deployed by `trainmaster pulumi up` (the real engine), the scheduler and the operator
as pods on the real nodes, the headline job (examples/transformer in the torch image, under
torchrun) training on the real nodes from the node-local cache of the demo's S3 dataset,
its loss falling, a worker killed and restarted in place by torchrun at its checkpoint;
every node a reader of the dataset may use reports it ready, no warm-up pod is Pending
(issue 43); and `cluster down` stopping everything."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from ipaddress import ip_address, ip_network
from pathlib import Path

import pytest
from kubernetes import client

from tests.helpers import ROOT
from trainmaster.api import JOB_LABEL
from trainmaster.kubeclient import generated_client
from trainmaster.spec import load_spec

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.image]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _cold_node_cache() -> None:
    """The node cache is a host folder (cache.path) that outlives clusters: an earlier
    real-node test may have filled it with the same dataset, and a warm-up that finds it
    complete reads nothing over the storage network, which the demo's bytes then show."""
    spec = load_spec(ROOT / "stacks" / "demo" / "cluster.yaml")
    for dataset in spec.cache.datasets:
        shutil.rmtree(Path(spec.cache.path) / dataset.name, ignore_errors=True)


def test_demo_runs_and_down_stops_everything(tmp_path: Path) -> None:
    _cold_node_cache()
    env = {**os.environ, "TRAINMASTER_HOME": str(tmp_path)}
    env.pop("KUBECONFIG", None)
    state = tmp_path / "clusters" / "dev"
    try:
        proc = subprocess.run([sys.executable, "-m", "trainmaster", "demo"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=1500)
        # Kept with pytest's temporary folders (the last three runs): what the demo printed.
        (tmp_path / "demo.stdout").write_text(proc.stdout)
        (tmp_path / "demo.stderr").write_text(proc.stderr)
        assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
        out = proc.stdout
        print(out, proc.stderr[-600:], sep="\n", flush=True)  # what the demo showed (-s)
        assert "lm: restarted in place by torchrun and resumed at its checkpointed step" \
            in proc.stderr, proc.stderr[-3000:]
        # torchrun restarted the workers: the same pods and attempt, no container restart.
        assert re.search(r"torchrun restarted the workers in place: the same pods, attempt 0, "
                         r"no container restarted \(torchrun restart [1-9]", out), out
        resumed = re.search(r"resumed at step (\d+) \(\"resumed from "
                            r"/checkpoints/lm/step-(\d+) at step", out)
        newest = re.search(r"when the workers resumed: step (\d+)", out)
        assert resumed and newest, out
        assert resumed.group(1) == resumed.group(2) == newest.group(1)
        # The loss falls: rank 0's first logged loss against its last before the kill.
        before = re.search(r"Loss before the kill \(rank 0\): (.*)\n", out)
        assert before, out
        seen = [float(v) for v in re.findall(r"step \d+ ([\d.]+)", before.group(1))]
        assert len(seen) >= 2 and seen[-1] < seen[0] - 0.5, before.group(0)
        # The dataset is ready on every node a reader may use: the real nodes (lm) and the
        # simulated GPU nodes (gpt-small), and no warm-up pod is Pending.
        ready = re.search(r"dataset tinystories: ready on (\d+) of the (\d+) nodes its "
                          r"readers may use; 0 warm-up pods Pending", out)
        assert ready and ready.group(1) == ready.group(2), out
        for node in ("leaf-0-node-0", "leaf-0-node-1", "leaf-0-node-2"):
            assert re.search(rf"  {node} +ready +\(readers: lm\)", out), out
        assert re.search(r"  leaf-1-node-\d +ready +\(readers: gpt-small\)", out), out
        # The controllers run as pods on the real nodes under their own ServiceAccounts.
        for name in ("trainmaster-scheduler", "dev-operator"):
            assert re.search(rf"trainmaster-system +{name}-\S+ +1/1 +Running +\d+ +10\.244\.\S+ "
                             rf"+leaf-0-node-[012] +{name}\n", out), out
        # 2/2: the trainer and the checkpoint-mirror sidecar (jobs[].checkpoint.mirror).
        assert len(re.findall(r"trainmaster +lm-r0-[01]-\S+ +2/2 +Running +0 .* "
                              r"leaf-0-node-[012] +lm-trainer", out)) == 4, out
        # The stack came from the real Pulumi engine: its summary, and its field manager
        # on what it applied.
        assert re.search(r"Deployed by trainmaster pulumi up --stack demo: \d+ create", out), out
        assert "trainmaster cluster monitoring" in proc.stderr
        record = json.loads((state / "cluster.json").read_text())
        apps = client.AppsV1Api(generated_client(Path(record["kubeconfig"])))
        deployment = apps.read_namespaced_deployment("trainmaster-scheduler",
                                                     "trainmaster-system")
        managers = {(f.manager, f.operation) for f in deployment.metadata.managed_fields}
        assert any(m.startswith("pulumi-kubernetes") for m, _ in managers), managers
        assert not any(m == "trainmaster" for m, _ in managers), managers
        assert record["real_nodes"] == ["leaf-0-node-0", "leaf-0-node-1", "leaf-0-node-2"]
        # Read again from the API (issue 43 on the real nodes): both carry the dataset's
        # state `ready`, and no warm-up pod of it waits.
        core = client.CoreV1Api(generated_client(Path(record["kubeconfig"])))
        for node in record["real_nodes"]:
            labels = core.read_node(node).metadata.labels
            assert labels.get("dataset.trainmaster.io/tinystories") == "ready", labels
        warmups = core.list_namespaced_pod(
            "trainmaster", label_selector="trainmaster.io/dataset=tinystories").items
        assert not [p.metadata.name for p in warmups if p.status.phase == "Pending"]
        _check_network_status(core, record["real_nodes"])
        _check_traffic(out)
        _check_storage(out, record["real_nodes"])
        pids = [p["pid"] for p in record["processes"]]
    finally:
        down = subprocess.run([sys.executable, "-m", "trainmaster", "cluster", "down",
                               "--name", "dev"], env=env, capture_output=True, text=True,
                              timeout=300)
    assert down.returncode == 0, down.stderr
    assert not any(_alive(pid) for pid in pids)


NETWORK_STATUS = "k8s.v1.cni.cncf.io/network-status"


def _check_network_status(core: client.CoreV1Api, real_nodes: list[str]) -> None:
    """Multus attached each of lm's pods to every rail and the storage network, as its
    networks annotation asks, with addresses of the demo spec's subnets (its
    network-status, which Multus writes)."""
    networks = load_spec(ROOT / "stacks" / "demo" / "cluster.yaml").networks
    assert networks.storage is not None
    subnets = [*(r.subnet for r in networks.compute.rails), networks.storage.subnet]
    pods = [p for p in core.list_namespaced_pod(
        "trainmaster", label_selector=f"{JOB_LABEL}=lm").items
        if p.status.phase == "Running"]
    assert len(pods) == 2 and {p.spec.node_name for p in pods} <= set(real_nodes), pods
    for pod in pods:
        status = json.loads(pod.metadata.annotations[NETWORK_STATUS])
        attached = [s for s in status if not s.get("default")]
        assert [s["interface"] for s in attached] == [
            *(f"net{i + 1}" for i in range(len(subnets) - 1)), "storage0"], status
        for entry, subnet in zip(attached, subnets, strict=True):
            assert [ip_address(a) in ip_network(subnet) for a in entry["ips"]] == [True], entry


DATASET_BYTES = 8 * (64 << 10)
"""A floor on tinystories' bytes as the demo serves them (trainmaster.drill.story_shards:
8 shards of at least 64 KiB)."""


def _check_storage(out: str, nodes: list[str]) -> None:
    """The real nodes' storage interfaces together received at least the dataset: the
    warm-ups read it from the S3 server over their storage0 (docs/real-nodes.md; the nodes
    share the host's cache folder, so one node's warm-up may find it complete and copy
    nothing)."""
    assert "Bytes through each real node's storage interface" in out, out
    rows = {m.group(1): int(m.group(2).replace(",", ""))
            for m in re.finditer(r"^  (\S+) +tm\d+n\d+st +rx +([\d,]+) B  tx", out, re.M)}
    assert set(rows) == set(nodes), rows
    assert sum(rows.values()) >= DATASET_BYTES, rows


GRADIENT_BYTES = (64 + 1) * 8
"""A floor on the all-reduce's bytes each way per step: examples/data-parallel's 64
features and loss in float64; examples/transformer's gradients are far more."""
RAILS = ("net1", "net2", "net3", "net4")


MIRROR_ROW = r"^  step (\d+) +([\d,]+) B$"
"""A checkpoint the demo found mirrored on the S3 server (trainmaster.cli._demo.mirror_lines)."""


def _check_traffic(out: str) -> None:
    """One rank's bytes per interface: the all-reduce on the rails (at least the gradients'
    payload each way every step; gloo spreads it over every rail the launcher names in
    GLOO_SOCKET_IFNAME), the checkpoints on the storage network (every gang pod's mirror
    sidecar uploads each completed one, so the rank sent at least the smallest of those
    the demo found mirrored, which are older than the newest), the pod network only
    control."""
    step = re.search(r"Bytes through each interface of one rank \(\S+\) since its pod "
                     r"started, at step (\d+)", out)
    assert step, out
    rows = {m.group(1): (int(m.group(2).replace(",", "")), int(m.group(3).replace(",", "")))
            for m in re.finditer(r"^  (\w+) +.*rx +([\d,]+) B  tx +([\d,]+) B$", out, re.M)}
    assert {"eth0", *RAILS, "storage0"} <= set(rows), rows
    steps = int(step.group(1))
    rails = [sum(direction) for direction in zip(*(rows[r] for r in RAILS), strict=True)]
    assert min(rails) >= GRADIENT_BYTES * (steps - 1), (steps, rows)
    assert re.search(r"Checkpoints of lm mirrored to s3://checkpoints/lm over the storage "
                     r"network: \d+ complete", out), out
    mirrored = [int(m.group(2).replace(",", "")) for m in re.finditer(MIRROR_ROW, out, re.M)]
    assert len(mirrored) >= 2, out
    assert rows["storage0"][1] >= min(mirrored), (mirrored, rows)
    assert sum(rows["eth0"]) < min(mirrored), (mirrored, rows)
    assert sum(rows["eth0"]) < sum(rails), rows
