"""Checkpoints over the storage network, measured on two real nodes (issue 37, "Traffic
where the spec says": "checkpoints plus dataset reads on the storage network").

stacks/dev as `ckpt`, its job dp-example alone on the real nodes, no dataset (so nothing but
checkpoints uses the storage network), each checkpoint padded to PAD bytes
(`checkpointPadBytes`), and `checkpoint.mirror` to `s3://checkpoints/dp-example` on the
S3 server (versitygw) that listens on the host's address on the storage network
(`serve_s3_dataset`, the demo's). The test reads the running rank 0's own counters
(/proc/<pid>/net/dev of its pod) around the mirror's uploads:

- its `storage0` sent at least the bytes of every checkpoint but one uploaded in that
  time (one may have been in flight when the window opened);
- its `eth0` carried less than one checkpoint in that time (control only: the launcher's
  reports, DNS; an upload over the pod network would carry whole ones).

Then the job is deleted, the checkpoint volume's host folder emptied (standing in for
nodes that do not share the volume), and the job applied again: its gang pods' fetch
brings the newest mirrored checkpoint over `storage0` (rank 0's `storage0` received at
least its bytes), and rank 0 resumes from it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.cluster.realkit import dev_stack, log
from trainmaster.apply import apply_spec
from trainmaster.cluster import storage_server_address
from trainmaster.datacache import CheckpointStore, Mirrored
from trainmaster.drill import (
    RealStack,
    job_pods,
    pod_log,
    rank_traffic,
    serve_s3_dataset,
    wait_training,
)
from trainmaster.kubeclient import ApiError, SyncKube, trainingjob_path
from trainmaster.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.image]

PAD = 4 << 20
"""Bytes of padding per checkpoint: far above what the control traffic of the window is."""
UPLOADS = 5
URL = "s3://checkpoints/dp-example"
ENDPOINT = "http://datasets.trainmaster.svc.cluster.local:7070"


def _edit(doc: dict[str, Any]) -> None:
    [job] = [j for j in doc["jobs"] if j["name"] == "dp-example"]
    job["datasets"] = []
    job["hyperParameters"].update(trainSteps=100000, checkpointPadBytes=PAD)
    job["checkpoint"]["mirror"] = {"url": URL, "endpoint": ENDPOINT,
                                   "credentialsSecret": "datasets-s3"}
    doc["jobs"] = [job]


def _rank0(pods: list[dict[str, Any]]) -> dict[str, Any]:
    [pod] = [p for p in pods if p["metadata"]["annotations"].get(
        "batch.kubernetes.io/job-completion-index") == "0"]
    return pod


def _counts(stack: RealStack, pod: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {t.interface: (t.rx, t.tx) for t in rank_traffic(stack.nodes, pod)}


def _measure_uploads(stack: RealStack, store: CheckpointStore, kube: SyncKube) -> None:
    attempt, pods = wait_training(stack, kube, log, timeout=400)
    rank0 = _rank0(pods)
    seen = {m.entry for m in store.mirrored()}
    before = _counts(stack, rank0)
    uploaded: dict[str, Mirrored] = {}

    def uploads() -> bool:
        for m in store.mirrored():
            if m.entry not in seen:
                uploaded[m.entry] = m
        return len(uploaded) >= UPLOADS

    wait_until(uploads, f"{UPLOADS} checkpoints mirrored", 180, 0.5)
    after = _counts(stack, rank0)
    delta = {n: (after[n][0] - before[n][0], after[n][1] - before[n][1]) for n in before}
    for name, (rx, tx) in delta.items():
        log(f"rank 0 {name:9} rx {rx:>12,} B  tx {tx:>12,} B  (during {len(uploaded)} uploads)")
    sizes = sorted(m.size for m in uploaded.values())
    log(f"attempt {attempt}: uploaded {sorted(uploaded)}, {sum(sizes):,} B")
    assert all(s >= PAD for s in sizes), sizes
    assert delta["storage0"][1] >= sum(sizes[1:]), (delta, sizes)
    assert sum(delta["eth0"]) < PAD, delta


def _restart_elsewhere(stack: RealStack, store: CheckpointStore, kube: SyncKube) -> None:
    ns, name = stack.namespace, stack.job.name
    kube.delete(trainingjob_path(ns, name))

    def gone() -> bool:
        try:
            kube.get(trainingjob_path(ns, name))
        except ApiError as exc:
            if exc.not_found:
                return not job_pods(kube, ns, name)
            raise
        return False

    wait_until(gone, f"{name} and its pods gone", 180, 1)
    newest = store.mirrored()[0]
    log(f"newest mirrored: {newest.entry} ({newest.size:,} B); emptying {stack.checkpoints}")
    for entry in stack.checkpoints.iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    apply_spec(stack.kubeconfig, stack.spec, log)
    attempt, pods = wait_training(stack, kube, log, timeout=400,
                                  after_checkpoint=newest.step)
    rank0 = _rank0(pods)
    trainer = pod_log(stack.nodes, ns, rank0["metadata"]["name"])
    assert trainer is not None and stack.job.checkpoint is not None
    assert trainer.resumed(0) == (f"{stack.job.checkpoint.path}/{newest.entry}",
                                  newest.step), trainer.lines[:5]
    # Every pod fetches; the real nodes share the volume's host folder, so one may find
    # the other's copy placed (or placed while it fetched): at least one fetched it.
    fetchers = []
    for pod in pods:
        fetch = pod_log(stack.nodes, ns, pod["metadata"]["name"], "checkpoint-fetch")
        assert fetch is not None
        said = [ln.text for ln in fetch.lines if "checkpoints fetch:" in ln.text]
        counts = _counts(stack, pod)
        log(f"attempt {attempt}: {pod['metadata']['name']}: {said}; storage0 rx "
            f"{counts['storage0'][0]:,} B, eth0 rx {counts['eth0'][0]:,} B")
        assert len(said) == 1, said
        if said[0] == (f"checkpoints fetch: fetched {newest.entry} (step {newest.step}, "
                       f"{newest.size} bytes) from {URL}"):
            fetchers.append(pod)
            assert counts["storage0"][0] >= newest.size, counts
            assert counts["eth0"][0] < newest.size, counts
    assert fetchers, "no pod of the gang fetched the checkpoint"


def test_checkpoints_travel_over_the_storage_network(trainmaster_home: Path,
                                                     tmp_path: Path) -> None:
    with dev_stack("ckpt", 2, tmp_path, _edit) as stack:
        assert stack.namespace == "trainmaster" and stack.record.net_slot is not None
        address = storage_server_address(stack.spec, stack.record.net_slot)
        server = serve_s3_dataset(stack.record, stack.namespace, "datasets", "datasets-s3",
                                  "checkpoints", {})
        assert urlsplit(server.endpoint).hostname == address  # not the pod network's bridge
        store = CheckpointStore(URL, server.client())
        with SyncKube.connect(stack.kubeconfig) as kube:
            _measure_uploads(stack, store, kube)
            _restart_elsewhere(stack, store, kube)
