"""The dataset cache, the launcher's metrics and the NIC agent on a real node (issue 12).

One cluster for the module: stacks/dev as `features`, with one real node (kubelet +
containerd + runc on this host) that runs everything below as pods, built and applied as
tests/cluster/test_real_recovery.py does (trainmaster.drill.start_real_stack). Its spec
differs from dev where a real node needs it:

- the cache lives in a host folder of the test; its dataset `tiny` has the source
  `file:///datasets/tiny` on the volume `tiny-source` (a hostPath PersistentVolume on a
  folder the test fills), which the warm-up pod mounts read-only at that path; the warm-up
  runs on the real node (`cache.nodeSelector`/`tolerations`);
- its dataset `tiny-s3` has the source `s3://features/tiny` on a real S3 server
  (versitygw, trainmaster.drill.serve_s3_dataset) that listens on the real node's bridge
  address (not loopback, which pods cannot reach; not the public network), reached by
  its headless Service's name, with the credentials Secret the dataset names. Until the
  test creates that Secret the warm-up pod cannot start, and the job shows why;
- dp-example (examples/data-parallel) trains on one node and names both datasets, so
  the operator holds it until the warm-ups have filled the real node's cache;
- the NIC agent reads a fake sysfs tree the test writes (`monitoring.nicAgent.sysfsPath`),
  every 2 s; the GPU exporter (whose image only a registry serves) is off;
- one scheduler replica: the node has the host's 2 CPUs.

The first gang may be refused by the kubelet (`OutOfcpu`): kube-scheduler places a
warm-up pod on the same node while trainmaster-scheduler places the gang (two
schedulers, one node); the operator then restarts the gang, as it should, and the tests
below wait for the attempt that trains. The operator creates the warm-ups, one per
(node, dataset), for the real node: dp-example selects and tolerates it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.diagnose import describe_namespace
from trainmaster.api import DATASET_LABEL, UNHEALTHY_TAINT, dataset_label
from trainmaster.drill import (
    ON_REAL_NODES,
    RealStack,
    host_volume,
    job_pods,
    job_status,
    s3_endpoint,
    serve_s3_dataset,
    start_real_stack,
    wait_controllers,
    wait_training,
)
from trainmaster.kubeclient import SyncKube, api_path, generated_client, node_path, pod_path
from trainmaster.launch import METRICS_PORT
from trainmaster.objects import build_all
from trainmaster.polling import WaitTimeout, wait_until
from trainmaster.s3server import S3Server

pytestmark = [pytest.mark.integration, pytest.mark.realnode, pytest.mark.image]

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "features"
DATASET = "tiny"
SOURCE = f"/datasets/{DATASET}"
SOURCE_CLAIM = f"{DATASET}-source"
S3_DATASET = "tiny-s3"
S3_BUCKET = "features"
S3_SOURCE = f"s3://{S3_BUCKET}/{DATASET}"
S3_SERVICE = "features-s3"
S3_SECRET = "tiny-s3-credentials"
NAMESPACE = "trainmaster"  # stacks/dev's (the default)
AGENT_INTERVAL = 2
RAIL_DEVICES = [f"mlx5_{i}" for i in range(4)]  # dev's four rails name no device


def _log(line: str) -> None:
    print(line, flush=True)


@dataclass(frozen=True)
class Features:
    stack: RealStack
    host: Path
    """The test's host folder: cache/, source/ (the dataset's volume), sys/ (fake sysfs)."""
    s3: list[S3Server] = field(default_factory=list)
    """The S3 server once a test started it (attached to the cluster: `down` stops it)."""
    s3_objects: dict[str, bytes] = field(default_factory=dict)

    @property
    def node(self) -> str:
        return self.stack.record.real_nodes[0]

    @property
    def cache(self) -> Path:
        return self.host / "cache"

    @property
    def source(self) -> Path:
        return self.host / "source"

    @property
    def sysfs(self) -> Path:
        return self.host / "sys"


def _write(path: Path, text: str | bytes) -> None:
    """Write `path` whole (rename), readable by the pods' non-root users."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(text.encode() if isinstance(text, str) else text)
    tmp.chmod(0o644)
    tmp.rename(path)


def _port_state(sysfs: Path, device: str, state: str, phys_state: str) -> None:
    """One IB port as the kernel shows it: /sys/class/infiniband/<dev>/ports/1/..."""
    port = sysfs / "class" / "infiniband" / device / "ports" / "1"
    _write(port / "state", state + "\n")
    _write(port / "phys_state", phys_state + "\n")
    _write(port / "link_layer", "InfiniBand\n")
    _write(port / "rate", "400 Gb/sec (4X NDR)\n")
    _write(port / "counters" / "link_downed", "0\n")


def _host_folder() -> Path:
    host = Path(tempfile.mkdtemp(prefix="tm-features-"))
    host.chmod(0o755)  # the NIC agent runs as a non-root user
    (host / "cache").mkdir(mode=0o755)
    data = host / "source"
    _write(data / "shard-0.bin", os.urandom(3 << 20))
    _write(data / "meta" / "vocab.txt", "".join(f"token{i}\n" for i in range(1000)))
    for device in RAIL_DEVICES:
        _port_state(host / "sys", device, "4: ACTIVE", "5: LinkUp")
    return host


def _spec_doc(host: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "stacks" / "dev" / "cluster.yaml").read_text())
    doc["metadata"]["name"] = CLUSTER  # so a `make demo` cluster of this host is left alone
    doc["scheduler"]["replicas"] = 1
    doc["cache"] = {
        "path": str(host / "cache"), "capacity": "1Gi", "warmup": True, "waitForWarmup": True,
        **ON_REAL_NODES,
        "datasets": [{"name": DATASET, "source": f"file://{SOURCE}", "size": "4Mi",
                      "volume": SOURCE_CLAIM},
                     {"name": S3_DATASET, "source": S3_SOURCE, "size": "4Mi",
                      "endpoint": s3_endpoint(S3_SERVICE, NAMESPACE),
                      "credentialsSecret": S3_SECRET}],
    }
    doc["monitoring"] = {"gpuExporter": {"enabled": False},
                         "nicAgent": {"intervalSeconds": AGENT_INTERVAL,
                                      "sysfsPath": str(host / "sys")}}
    [job] = [j for j in doc["jobs"] if j["name"] == "dp-example"]
    job.update(nodes=1, datasets=[DATASET, S3_DATASET])
    job["hyperParameters"]["trainSteps"] = 100000
    doc["jobs"] = [job]
    return doc


@pytest.fixture(scope="module")
def features(trainmaster_home: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Features]:
    from trainmaster import cluster

    host = _host_folder()
    path = tmp_path_factory.mktemp("features") / "cluster.yaml"
    path.write_text(yaml.safe_dump(_spec_doc(host), sort_keys=False))
    try:
        stack = start_real_stack(path, 1, _log)
        wait_controllers(stack, _log)
        yield Features(stack, host)
    finally:
        state_dir = cluster.default_state_dir(CLUSTER)
        if state_dir.exists():  # also when the start failed half-way
            cluster.down_state_dir(state_dir)
        shutil.rmtree(host)


def _wait(features: Features, check: Callable[[], Any], what: str, timeout: float) -> Any:
    """wait_until, failing with the pods, logs and events of both namespaces."""
    try:
        return wait_until(check, what, timeout, 0.5)
    except WaitTimeout as exc:
        core = client.CoreV1Api(generated_client(features.stack.kubeconfig))
        ns = features.stack.namespace
        raise AssertionError(f"{exc}\n{describe_namespace(core, ns)}\n"
                             f"{describe_namespace(core, f'{ns}-system')}") from None


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    conds = (obj.get("status") or obj).get("conditions") or []
    found: dict[str, Any] = next((c for c in conds if c.get("type") == kind), {})
    return found


def _events(kube: SyncKube, ns: str, kind: str, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in kube.list(api_path("v1", "events", ns))
            if e["involvedObject"].get("kind") == kind and e["involvedObject"]["name"] == name
            and e.get("reason") == reason]


def _warmup_pods(kube: SyncKube, ns: str, dataset: str = DATASET) -> list[dict[str, Any]]:
    return kube.list(pod_path(ns), f"{DATASET_LABEL}={dataset}")


def _source_volume(features: Features, kube: SyncKube) -> None:
    """The dataset's volume: its claim bound to the host folder the test filled."""
    host_volume(kube, features.stack.spec, SOURCE_CLAIM, features.source)


def _s3_source(features: Features) -> None:
    """The S3 dataset's server, bucket, Service and credentials Secret (once)."""
    if features.s3:
        return
    objects = {f"{DATASET}/shard-{i:02d}/part-{j}.bin": os.urandom(20_000 + 997 * i + j)
               for i in range(10) for j in range(4)}
    objects[f"{DATASET}/meta/vocab.txt"] = "".join(f"token{i}\n" for i in range(500)).encode()
    assert features.stack.spec.metadata.namespace == NAMESPACE
    features.s3.append(serve_s3_dataset(features.stack.record, NAMESPACE, S3_SERVICE,
                                        S3_SECRET, S3_BUCKET, objects))
    features.s3_objects.update(objects)


def test_a_job_waits_until_the_warm_up_fills_the_real_nodes_cache(features: Features) -> None:
    stack, node = features.stack, features.node
    ns, job = stack.namespace, stack.job.name
    with SyncKube.connect(stack.kubeconfig) as kube:
        # No source volume yet: the warm-up cannot run, and the operator holds the job.
        status = _wait(features, lambda: (s := job_status(kube, ns, job)).get("pendingReason")
                       and s, f"{job} held for its dataset", 120)
        assert status["pendingReason"] == (f"dataset {DATASET} warm on 0 of 1 nodes; "
                                           f"dataset {S3_DATASET} warm on 0 of 1 nodes")
        assert status["phase"] == "Pending"
        assert _condition(status, "DatasetsReady")["status"] == "False"
        assert _wait(features, lambda: _events(kube, ns, "TrainingJob", job,
                                               "WaitingForDatasets"), "WaitingForDatasets", 30)
        assert job_pods(kube, ns, job) == []
        pending = _wait(features, lambda: _warmup_pods(kube, ns), "warm-up pods", 60)
        assert all(p["status"].get("phase") == "Pending" for p in pending)
        # The operator created it for the real node (dp-example may use it) and says so.
        assert kube.get(node_path(node))["metadata"]["labels"].get(
            dataset_label(DATASET)) in ("warming", "failed")

        _s3_warm_up(features, kube)
        _source_volume(features, kube)

        def warmed() -> dict[str, Any] | None:
            done = [p for p in _warmup_pods(kube, ns)
                    if p["status"].get("phase") == "Succeeded"]
            return done[0] if done else None

        pod = _wait(features, warmed, "the warm-up pod to succeed", 180)
        assert pod["spec"]["nodeName"] == node
        # The data arrived in the node's cache on the host, whole, with its marker.
        target = features.cache / DATASET
        for original in (p for p in features.source.rglob("*") if p.is_file()):
            copy = target / original.relative_to(features.source)
            assert copy.read_bytes() == original.read_bytes(), copy
        marker = json.loads((target / ".trainmaster-complete").read_text())
        total = sum(p.stat().st_size for p in features.source.rglob("*") if p.is_file())
        assert marker["source"] == f"file://{SOURCE}" and marker["bytes"] == total
        assert not list(features.cache.glob(".partial-*"))
        [state] = pod["status"]["containerStatuses"]
        message = json.loads(state["state"]["terminated"]["message"])
        # The node's cache holds both datasets now (the S3 one was warmed first).
        assert message["dataset"] == DATASET and message["held"] == [DATASET, S3_DATASET]

        # The operator sets the node's state from that message and releases the job.
        labels = _wait(features, lambda: (lb := kube.get(node_path(node))["metadata"]["labels"])
                       .get(dataset_label(DATASET)) == "ready" and lb, "the dataset ready", 60)
        assert labels[dataset_label(S3_DATASET)] == "ready"
        ready = _wait(features, lambda: _condition(job_status(kube, ns, job), "DatasetsReady")
                      .get("status") == "True", "DatasetsReady=True", 60)
        assert ready

        def running() -> list[dict[str, Any]]:
            return [p for p in job_pods(kube, ns, job)
                    if p["status"].get("phase") == "Running"]

        pods = _wait(features, running, f"{job} running after the warm-up", 180)
        assert {p["spec"]["nodeName"] for p in pods} == {node}
        # The operator clears "starting pods" on its next status write after the pods
        # run, not at the same instant: wait for it as for everything above.
        status = _wait(features, lambda: not (s := job_status(kube, ns, job))
                       .get("pendingReason") and s, "pendingReason cleared", 60)
        assert status["phase"] in ("Running", "Succeeded"), status


def _s3_warm_up(features: Features, kube: SyncKube) -> None:
    """The S3 dataset's warm-up on the real node: first its real failure (the kubelet
    cannot start it without the credentials Secret) on the held job within 10 s, then,
    with the server up and the Secret there, the bucket's objects in the node's cache."""
    stack, node = features.stack, features.node
    ns, job = stack.namespace, stack.job.name

    def cannot_start() -> tuple[dict[str, Any], float] | None:
        for pod in _warmup_pods(kube, ns, S3_DATASET):
            for status in pod["status"].get("containerStatuses") or []:
                if (status.get("state", {}).get("waiting") or {}).get("reason") \
                        == "CreateContainerConfigError":
                    return pod, time.monotonic()
        return None

    pod, seen = _wait(features, cannot_start, "the S3 warm-up pod failing to start", 120)
    cond = _wait(features, lambda: (c := _condition(job_status(kube, ns, job),
                                                    "DatasetsReady")).get("reason")
                 == "WarmupFailed" and c, "WarmupFailed on the job", 10)
    _log(f"the job showed the warm-up failure {time.monotonic() - seen:.1f}s after the test "
         "saw it on the pod")
    assert time.monotonic() - seen <= 10
    why = f'secret "{S3_SECRET}" not found'
    assert f"warm-up of dataset {S3_DATASET} failed on node {node} " \
           f"(pod {pod['metadata']['name']}): CreateContainerConfigError" in cond["message"]
    assert why in cond["message"]
    # Each dataset's failure is its own Event (the file dataset's, unplaceable without its
    # claim, comes too): the S3 one names the missing Secret.
    events = _wait(features, lambda: [e for e in _events(kube, ns, "TrainingJob", job,
                                                         "WarmupFailed")
                                      if why in e["message"]], "the WarmupFailed Event", 10)
    assert events[0]["type"] == "Warning"

    _s3_source(features)

    def warmed() -> dict[str, Any] | None:
        done = [p for p in _warmup_pods(kube, ns, S3_DATASET)
                if p["status"].get("phase") == "Succeeded"]
        return done[0] if done else None

    done = _wait(features, warmed, "the S3 warm-up pod to succeed", 240)
    assert done["spec"]["nodeName"] == node
    target = features.cache / S3_DATASET
    for key, data in features.s3_objects.items():
        assert (target / key.removeprefix(f"{DATASET}/")).read_bytes() == data, key
    marker = json.loads((target / ".trainmaster-complete").read_text())
    assert marker["source"] == S3_SOURCE
    assert marker["bytes"] == sum(len(d) for d in features.s3_objects.values())
    _wait(features, lambda: kube.get(node_path(node))["metadata"]["labels"]
          .get(dataset_label(S3_DATASET)) == "ready", "the S3 dataset ready on the node", 60)


def _scrape(ip: str) -> dict[str, dict[str, float]]:
    """metric name -> {trainingjob label: value}, from the pod's /metrics (no proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://{ip}:{METRICS_PORT}/metrics", timeout=10) as response:
        text = response.read().decode()
    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("trainmaster_job_"):
                out.setdefault(sample.name, {})[sample.labels["trainingjob"]] = sample.value
    return out


def test_the_launcher_on_the_real_pod_serves_the_metrics_the_alerts_read(
    features: Features,
) -> None:
    stack = features.stack
    job = stack.job.name
    with SyncKube.connect(stack.kubeconfig) as kube:
        _source_volume(features, kube)  # as in the test above, if it ran alone
        _s3_source(features)
        _attempt, [pod] = wait_training(stack, kube, _log, 300)
        # The launcher reached the trainer through the init container, as rendered.
        assert [c["name"] for c in pod["spec"]["initContainers"]] == ["launcher"]
        [trainer] = [c for c in pod["spec"]["containers"] if c["name"] == "trainer"]
        assert {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"} \
            in trainer["ports"]
        # The PodMonitor Prometheus would load selects this pod and scrapes that port (as
        # rendered: this cluster runs no Prometheus operator, so apply skipped it).
        [monitor] = [o for objs in build_all(stack.spec).values() for o in objs
                     if o["kind"] == "PodMonitor"
                     and o["metadata"]["name"] == f"{CLUSTER}-training"]
        selector = monitor["spec"]["selector"]["matchLabels"]
        assert selector.items() <= pod["metadata"]["labels"].items()
        assert [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]] == ["metrics"]

        # Scraped from the host through the node's bridge, as Prometheus would scrape it.
        ip = pod["status"]["podIP"]
        first = _scrape(ip)
        names = ("trainmaster_job_step", "trainmaster_job_last_heartbeat_timestamp_seconds",
                 "trainmaster_job_checkpoint_step", "trainmaster_job_attempt")
        assert all(job in first.get(n, {}) for n in names), first
        checkpoint = first["trainmaster_job_checkpoint_step"][job]
        assert checkpoint > 0 and (stack.checkpoints / f"step-{int(checkpoint)}").is_dir()
        assert abs(first["trainmaster_job_last_heartbeat_timestamp_seconds"][job]
                   - time.time()) < 30

        def moved() -> dict[str, dict[str, float]] | None:
            now = _scrape(ip)
            later = all(now[n][job] > first[n][job] for n in (
                "trainmaster_job_step", "trainmaster_job_last_heartbeat_timestamp_seconds",
                "trainmaster_job_checkpoint_step"))
            # The step comes from the trainer's output, the checkpoint from its folder: a
            # checkpoint can be found a moment before its step's line is read (step 39
            # against checkpoint 40 under load). Wait until the step has caught up.
            caught_up = now["trainmaster_job_step"][job] \
                >= now["trainmaster_job_checkpoint_step"][job]
            return now if later and caught_up else None

        # checkpointEvery 20 steps of 0.25 s: a newer checkpoint within seconds.
        second = _wait(features, moved, "the job's metrics to move on", 60)
        steps = second["trainmaster_job_step"][job]
        assert steps >= second["trainmaster_job_checkpoint_step"][job] >= checkpoint + 20


def _nic(kube: SyncKube, node: str) -> dict[str, Any]:
    return _condition(kube.get(node_path(node)), "NICHealthy")


def _may(kube: SyncKube, user: str, verb: str, resource: str, sub: str = "") -> bool:
    review = kube.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "resourceAttributes": {
            "verb": verb, "resource": resource, "subresource": sub, "name": "any"}}})
    return bool(review["status"].get("allowed"))


def test_the_nic_agent_sets_nichealthy_on_the_real_node_and_the_operator_fences_it(
    features: Features,
) -> None:
    stack, node = features.stack, features.node
    ns = stack.namespace
    agent = f"{CLUSTER}-nic-agent"
    with SyncKube.connect(stack.kubeconfig) as kube:
        # start_real_stack places the agent on the real nodes (monitoring.nicAgent.
        # nodeSelector), where it reads the fake sysfs tree, whose RDMA ports win over the
        # node's rail interfaces (trainmaster.io/nic-netdevs).

        def agent_pod() -> dict[str, Any] | None:
            pods = [p for p in kube.list(pod_path(ns), "app.kubernetes.io/name=nic-agent")
                    if p["spec"].get("nodeName") == node
                    and p["status"].get("phase") == "Running"]
            return pods[0] if pods else None

        pod = _wait(features, agent_pod, "the NIC agent running on the real node", 120)
        assert pod["spec"]["serviceAccountName"] == agent
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        account = f"system:serviceaccount:{ns}:{agent}"
        assert _may(kube, account, "patch", "nodes", "status")
        assert not _may(kube, account, "patch", "nodes")  # its own status only, no labels

        healthy = _wait(features, lambda: (c := _nic(kube, node)).get("status") == "True" and c,
                        "NICHealthy=True", 60)
        assert healthy["reason"] == "PortsActive"
        assert healthy["message"] == "4 port(s) ACTIVE/LinkUp (InfiniBand)"
        assert not kube.get(node_path(node))["spec"].get("unschedulable")

        _port_state(features.sysfs, "mlx5_1", "1: DOWN", "3: Disabled")
        down = _wait(features, lambda: (c := _nic(kube, node)).get("status") == "False" and c,
                     "NICHealthy=False", 3 * AGENT_INTERVAL + 10)
        assert down["reason"] == "PortDown"
        assert "mlx5_1/1 DOWN/Disabled" in down["message"]

        def fenced() -> dict[str, Any] | None:
            spec = kube.get(node_path(node))["spec"]
            taints = [t for t in spec.get("taints") or [] if t["key"] == UNHEALTHY_TAINT]
            return spec if spec.get("unschedulable") and taints else None

        spec = _wait(features, fenced, "the operator to fence the node", 60)
        [taint] = [t for t in spec["taints"] if t["key"] == UNHEALTHY_TAINT]
        assert taint == {"key": UNHEALTHY_TAINT, "value": "NICHealthy", "effect": "NoSchedule"}
        assert _wait(features, lambda: _events(kube, "default", "Node", node, "Fenced"),
                     "a Fenced event on the node", 30)
