"""Dataset reads over the storage network, measured on two real nodes (issue 37, "Traffic
where the spec says").

stacks/dev as `storage`, its job dp-example reading `tinystories` and placed on the real
nodes, the node cache in a folder of the test. The S3 server (versitygw) listens on the
host's address on the storage network (trainmaster/cluster/_storage_host.py), the dataset's
Service points there, and the operator's warm-up pods get the storage network as
`storage0` (objects/_cache.py). The test reads the kernel's byte counters of the host side
of each node's interfaces around the warm-ups, and the running rank's own counters:

- the nodes' storage interfaces together received at least the dataset's bytes, and the
  storage bridge sent them (the warm-ups read every object over `storage0`; the real nodes
  share the host's cache folder, so a warm-up that finds the dataset already complete
  there copies nothing, and which node copies it is a race);
- each node's pod-network bridge sent its pods less than half the dataset's bytes in that
  time (control traffic only: the API server's watches, DNS; a read over the pod network
  would carry a whole copy);
- the rank has `storage0` in the storage subnet, and its `eth0` carried less than the
  dataset's bytes (control: rendezvous, the launcher's reports, DNS);
- after `cluster down`, no link of the slot and no routing rule of the storage address.

Checkpoints are not in these counts: dp-example does not mirror them here, and its
checkpoint volume is a hostPath (no network in its path); test_real_checkpoint_traffic.py
measures a mirrored job's checkpoints on `storage0`.
"""

from __future__ import annotations

import ipaddress
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.cluster.realkit import dev_stack, log
from trainmaster.api import DATASET_LABEL
from trainmaster.cluster import storage_server_address
from trainmaster.cluster._fabric import links, node_storage, storage_bridge
from trainmaster.cluster._storage_host import table
from trainmaster.drill import (
    RealStack,
    dataset_nodes,
    node_storage_traffic,
    rank_traffic,
    serve_s3_dataset,
    wait_training,
)
from trainmaster.kubeclient import SyncKube, pod_path
from trainmaster.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.image]

DATASET = "tinystories"  # stacks/dev's: s3://datasets/tinystories behind Service datasets
SHARDS, SHARD_BYTES = 16, 1 << 20
DATASET_BYTES = SHARDS * SHARD_BYTES


def _edit(cache: Path) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        doc["cache"].update(path=str(cache), capacity="1Gi")
        doc["cache"]["datasets"][0]["size"] = "64Mi"
        [job] = [j for j in doc["jobs"] if j["name"] == "dp-example"]
        job["datasets"] = [DATASET]
        job["hyperParameters"]["trainSteps"] = 100000
        doc["jobs"] = [job]  # the readers of tinystories: dp-example alone, on the real nodes
    return edit


def _counters(name: str) -> tuple[int, int]:
    stats = Path("/sys/class/net") / name / "statistics"
    return int((stats / "rx_bytes").read_text()), int((stats / "tx_bytes").read_text())


def _snapshot(stack: RealStack) -> dict[str, tuple[int, int]]:
    """The storage bridge, each node's pod bridge and (as the demo reads them) each node's
    storage interface."""
    slot = stack.record.net_slot
    assert slot is not None
    counts = {name: _counters(name)
              for name in [storage_bridge(slot), *(n.net.bridge for n in stack.nodes)]}
    storage = node_storage_traffic(stack.nodes)
    assert [(c.node, c.interface) for c in storage] == [
        (n.name, node_storage(slot, n.index)) for n in stack.nodes]
    return {**counts, **{c.interface: (c.rx, c.tx) for c in storage}}


def _delta(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
           ) -> dict[str, tuple[int, int]]:
    return {n: (after[n][0] - before[n][0], after[n][1] - before[n][1]) for n in before}


def _in(address: str, subnet: str) -> bool:
    return ipaddress.ip_address(address.split("/")[0]) in ipaddress.ip_network(subnet)


def _network_status(pod: dict[str, Any]) -> dict[str, list[str]]:
    raw = pod["metadata"].get("annotations", {}).get("k8s.v1.cni.cncf.io/network-status", "[]")
    return {e["interface"]: e.get("ips", []) for e in json.loads(raw)}


def _measure(stack: RealStack) -> None:
    slot, spec, ns = stack.record.net_slot, stack.spec, stack.namespace
    assert slot is not None and spec.networks.storage is not None
    subnet = spec.networks.storage.subnet
    address = storage_server_address(spec, slot)
    assert address is not None and _in(address, subnet)
    rules = subprocess.run(["ip", "rule", "show", "pref", str(table(slot))],
                           capture_output=True, text=True, check=True).stdout
    assert f"from {address} lookup {table(slot)}" in rules, rules

    before = _snapshot(stack)
    objects = {f"tinystories/shard-{i:03d}.bin": os.urandom(SHARD_BYTES) for i in range(SHARDS)}
    server = serve_s3_dataset(stack.record, ns, "datasets", "datasets-s3", "datasets", objects)
    assert urlsplit(server.endpoint).hostname == address  # not the pod network's bridge

    with SyncKube.connect(stack.kubeconfig) as kube:
        def ready() -> bool:
            found = dataset_nodes(kube, spec, DATASET)
            return bool(found.states) and all(s == "ready" for s in found.states.values())

        wait_until(ready, f"{DATASET} ready on every real node", 400, 1)
        after = _snapshot(stack)
        warmups = kube.list(pod_path(ns), f"{DATASET_LABEL}={DATASET}")
        attempt, pods = wait_training(stack, kube, log, timeout=400)

    delta = _delta(before, after)
    for name, (rx, tx) in delta.items():
        log(f"{name:12} rx {rx:>12,} B  tx {tx:>12,} B  (during the warm-ups)")
    # The real nodes share the host's cache folder: a warm-up that finds the dataset
    # complete there copies nothing, so the copy is counted over the nodes together.
    assert sum(delta[node_storage(slot, n.index)][0] for n in stack.nodes) >= DATASET_BYTES, delta
    assert delta[storage_bridge(slot)][1] >= DATASET_BYTES, delta
    for node in stack.nodes:
        # Half a copy: a dataset read over the pod network would carry a whole one.
        _, to_pods = delta[node.net.bridge]
        assert to_pods < DATASET_BYTES // 2, (node.name, delta)

    # Each real node's warm-up pod had storage0, addressed by whereabouts in the subnet.
    real = [p for p in warmups if p["spec"].get("nodeName") in stack.record.real_nodes]
    assert len(real) == len(stack.nodes), [p["metadata"]["name"] for p in warmups]
    for pod in real:
        for c in pod["status"].get("containerStatuses") or []:
            done = (c.get("state") or {}).get("terminated") or {}
            log(f"warm-up {pod['metadata']['name']} on {pod['spec']['nodeName']}: restarts "
                f"{c.get('restartCount')}, {done.get('reason')} {done.get('startedAt')} - "
                f"{done.get('finishedAt')}")
        status = _network_status(pod)
        assert set(status) == {"eth0", "storage0"}, status
        assert all(_in(ip, subnet) for ip in status["storage0"]), status

    log(f"attempt {attempt}: rank pods {[p['metadata']['name'] for p in pods]}")
    for pod in pods:
        traffic = {t.interface: t for t in rank_traffic(stack.nodes, pod)}
        for t in traffic.values():
            log(f"  {pod['metadata']['name']} {t.interface:9} {t.network:32} "
                f"rx {t.rx:>10,} B  tx {t.tx:>10,} B")
        assert all(_in(ip, subnet) for ip in traffic["storage0"].addresses), traffic
        # The rank reads the node cache (a hostPath) and checkpoints to a hostPath volume:
        # its storage0 and eth0 carry no dataset bytes.
        assert traffic["eth0"].rx + traffic["eth0"].tx < DATASET_BYTES, traffic


def test_dataset_reads_travel_over_the_storage_network(trainmaster_home: Path,
                                                       tmp_path: Path) -> None:
    cache = Path(tempfile.mkdtemp(prefix="tm-storage-cache-"))
    cache.chmod(0o755)
    slot = None
    try:
        with dev_stack("storage", 2, tmp_path, _edit(cache)) as stack:
            slot = stack.record.net_slot
            _measure(stack)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    assert slot is not None
    # `cluster down` took the address's rule and table with the fabric.
    rules = subprocess.run(["ip", "rule", "show", "pref", str(table(slot))],
                           capture_output=True, text=True, check=True).stdout
    assert rules.strip() == "", rules
    assert links(slot) == []
