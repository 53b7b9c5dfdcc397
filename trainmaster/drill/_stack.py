"""A local cluster with real nodes, the stack deployed on it as pods: where the demo, the
realnode drill test and `bench recovery --real` start.

1. `cluster up --real-nodes N` for the spec's topology;
2. build the trainmaster image (cached by its inputs) and load it into every real node;
3. a checkpoint volume: a PersistentVolume on a host folder that every real node mounts
   (the nodes share this host, so the folder is an honest stand-in for shared storage)
   and the claim the spec's jobs name;
4. the spec's objects, with trainmaster's controllers and the jobs that run the trainmaster
   image placed on the real nodes (select their label, tolerate their taint); the other
   jobs stay on kwok's nodes. Either a committed Pulumi stack whose spec already says so
   (`make demo`: stacks/demo, deployed by the real Pulumi engine, `deploy_stack`), or any
   spec, placed in memory and server-side applied (the drill tests, `bench recovery`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainmaster import cluster
from trainmaster.api import APP_MANAGED_BY_LABEL, APP_PART_OF_LABEL, NODE_READY, REAL_NODE_LABEL
from trainmaster.apply import apply_spec
from trainmaster.cluster import ClusterError, NodeLayout, layouts
from trainmaster.image import Progress
from trainmaster.kubeclient import SyncKube, pod_path, trainingjob_path
from trainmaster.polling import WaitTimeout, wait_until
from trainmaster.spec import ClusterSpec, Job, load_spec

Report = Callable[[str], None]
ON_REAL_NODES: dict[str, Any] = {
    "nodeSelector": {REAL_NODE_LABEL: "true"},
    "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
}


@dataclass(frozen=True)
class RealStack:
    record: cluster.ClusterRecord
    spec: ClusterSpec
    spec_path: Path
    """The spec as deployed: the Pulumi stack's, or the placed copy in the state folder."""
    job: Job
    """The training job that really runs (the first on the real nodes with a checkpoint)."""
    checkpoints: Path
    """The host folder behind the checkpoint volume (the job's checkpoint path in its pods)."""
    started: bool
    """This call started the cluster (False: it was running already)."""
    deployed: str = ""
    """How the objects got there: the engine's summary of `pulumi up`, or `apply`."""

    @property
    def kubeconfig(self) -> Path:
        return Path(self.record.kubeconfig)

    @property
    def state_dir(self) -> Path:
        return Path(self.record.state_dir)

    @property
    def namespace(self) -> str:
        return self.spec.metadata.namespace

    @property
    def nodes(self) -> list[NodeLayout]:
        assert self.record.net_slot is not None
        return layouts(self.state_dir, self.record.net_slot, self.record.real_nodes)


def source_root() -> Path:
    """The trainmaster tree this code runs from (the image is built from it)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise ClusterError(
            f"{root} is not a trainmaster source tree (no pyproject.toml): run the demo from "
            "a clone (`make demo`), which builds the image from its sources")
    return root


class _BuildSteps(Progress):
    """An image build's steps as report lines (a cold build takes minutes)."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def step(self, index: int, name: str, detail: str) -> None:
        self.report(f"building the image: step {index}/5 {name}: {detail}")


def placed_on_real_nodes(doc: dict[str, Any], images: str | Collection[str]
                         ) -> tuple[dict[str, Any], list[str]]:
    """The spec document with trainmaster's controllers and every job that runs one of
    `images` on the real nodes; and those jobs' names."""
    wanted = {images} if isinstance(images, str) else set(images)
    out = copy.deepcopy(doc)
    out["system"] = copy.deepcopy(ON_REAL_NODES)
    # The NIC agent watches the real nodes' rail interfaces (their annotation
    # trainmaster.io/nic-netdevs), which Prometheus scrapes with the rest; it tolerates
    # every taint already.
    monitoring = out.setdefault("monitoring", {})
    monitoring.setdefault("nicAgent", {})["nodeSelector"] = copy.deepcopy(
        ON_REAL_NODES["nodeSelector"])
    moved = []
    for job in out.get("jobs") or []:
        if job.get("image") in wanted:
            job.update(copy.deepcopy(ON_REAL_NODES))
            moved.append(str(job["name"]))
    return out, moved


def _wait(check: Callable[[], Any], what: str, timeout: float, every: float = 0.5) -> Any:
    try:
        return wait_until(check, what, timeout, every)
    except WaitTimeout:
        raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}") from None


def host_volume(kube: SyncKube, spec: ClusterSpec, claim: str, folder: Path) -> None:
    """A hostPath PersistentVolume on `folder` (which every real node of this host sees),
    bound to the claim `claim` in the spec's namespace: a job's checkpoint volume, or a
    dataset's source volume (`cache.datasets[].volume`)."""
    ns = spec.metadata.namespace
    folder.mkdir(parents=True, exist_ok=True)
    labels = {APP_MANAGED_BY_LABEL: "trainmaster-local-cluster",
              APP_PART_OF_LABEL: spec.metadata.name}
    # The namespace by name only: the stack's own Namespace object (applied next, by
    # `pulumi up` under Pulumi's field manager) owns its labels; labelling it here made
    # Pulumi's server-side apply fail with a field conflict.
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    kube.apply({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": f"{ns}-{claim}", "labels": labels},
        "spec": {
            "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
            "hostPath": {"path": str(folder), "type": "Directory"},
            "claimRef": {"namespace": ns, "name": claim},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": REAL_NODE_LABEL, "operator": "In", "values": ["true"]}]}]}},
        },
    })
    kube.apply({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "namespace": ns, "labels": labels},
        "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "",
                 "volumeName": f"{ns}-{claim}", "resources": {"requests": {"storage": "10Gi"}}},
    })


def pulumi_stack_spec(project_dir: Path, stack: str) -> Path:
    """The spec file a committed Pulumi stack deploys (its `trainmaster:spec` config)."""
    config_file = project_dir / "stacks" / f"Pulumi.{stack}.yaml"
    if not config_file.is_file():
        raise ClusterError(f"no Pulumi stack {stack!r}: {config_file} does not exist")
    config = (yaml.safe_load(config_file.read_text()) or {}).get("config") or {}
    spec = config.get("trainmaster:spec")
    if not isinstance(spec, str):
        raise ClusterError(f"{config_file}: no `trainmaster:spec` in its config")
    return project_dir / spec


def deploy_stack(project_dir: Path, stack: str, kubeconfig: Path, report: Report) -> str:
    """`trainmaster pulumi up --stack STACK --yes --refresh` on the cluster of `kubeconfig`:
    the real engine and Kubernetes provider, so the objects carry Pulumi's field manager.
    --refresh first reads the cluster: a stack whose earlier cluster was stopped has state
    that this new cluster does not match. Returns the engine's change summary."""
    from trainmaster import engine

    env = engine.engine_env()
    env["KUBECONFIG"] = str(kubeconfig)
    op = engine.parse_operation("up", ["--stack", stack, "--yes", "--refresh",
                                       "--color", "never", "--suppress-outputs"])
    started = time.monotonic()
    try:
        result = engine.run_operation(op, project_dir, env,
                                      on_output=lambda line: report(f"pulumi up: {line}"),
                                      on_error=lambda line: report(f"pulumi up: {line}"))
    except engine.EngineError as exc:
        raise ClusterError(str(exc)) from None
    counts = ", ".join(f"{n} {kind}" for kind, n in sorted(result.changes.items()))
    return (f"trainmaster pulumi up --stack {stack}: {counts} in "
            f"{time.monotonic() - started:.0f}s")


def _on_real(image: str, job_images: Collection[str] | None) -> set[str]:
    from trainmaster.image import torch_reference

    on_real = set(job_images) if job_images is not None else {image}
    unknown = on_real - {image, torch_reference(image)}
    if unknown:
        raise ClusterError(f"no image is built here for {', '.join(sorted(unknown))}: the "
                           f"real nodes can run {image} and {torch_reference(image)}")
    return on_real


def build_stack_images(spec_path: Path, job_images: Collection[str] | None,
                       report: Report) -> list[Path]:
    """Build (or find cached) the images the real nodes need: the trainmaster image (the
    controllers' and the warm-ups'), and the torch image when a job placed on the real
    nodes runs it. Returns their archives."""
    from trainmaster.image import build_image, build_torch_image, torch_reference

    image = load_spec(spec_path).image.reference
    on_real = _on_real(image, job_images)
    doc, moved = placed_on_real_nodes(yaml.safe_load(spec_path.read_text()), on_real)
    report(f"building the image {image} (cached by its inputs)")
    archives = [build_image(source_root(), image, _BuildSteps(report)).archive]
    if torch_reference(image) in {j.get("image") for j in doc.get("jobs") or []
                                  if j.get("name") in moved}:
        report(f"building the image {torch_reference(image)} (the torch layer cached by "
               "torch's pins, under the trainmaster layer)")
        started = time.monotonic()
        torch_built = build_torch_image(source_root(), torch_reference(image),
                                        _BuildSteps(report))
        report(f"{torch_built.reference}: {'cached' if torch_built.cached else 'built'} in "
               f"{time.monotonic() - started:.0f}s, {torch_built.archive_bytes / 1e9:.2f} GB")
        archives.append(torch_built.archive)
    return archives


def start_real_stack(spec_path: Path, real_nodes: int = 2,
                     report: Report = lambda _: None, pulumi_stack: str | None = None,
                     monitoring: bool = False, job_images: Collection[str] | None = None
                     ) -> RealStack:
    """Everything in this module's docstring; `cluster down` stops all of it.

    With `pulumi_stack`, `spec_path` is that stack's spec (placement written in) and the
    Pulumi engine deploys it; else the spec is placed in memory and applied. `monitoring`:
    `cluster up --monitoring` (Prometheus operator, Prometheus, Alertmanager on the nodes).
    `job_images`: the images whose jobs run on the real nodes (default: the trainmaster
    image; the demo's is its torch image, built and loaded too).
    """
    spec = load_spec(spec_path)
    image = spec.image.reference
    on_real = _on_real(image, job_images)
    doc, moved = placed_on_real_nodes(yaml.safe_load(spec_path.read_text()), on_real)
    if pulumi_stack is not None and doc != yaml.safe_load(spec_path.read_text()):
        raise ClusterError(
            f"{spec_path}: the stack {pulumi_stack} does not place trainmaster's controllers "
            f"and its jobs of {', '.join(sorted(on_real))} on the real nodes; see "
            "stacks/demo/cluster.yaml")
    archives = build_stack_images(spec_path, job_images, report)
    result = cluster.up(spec_path, real_nodes=real_nodes, report=report,
                        monitoring=monitoring)
    try:
        return _deploy(result, spec_path, doc, moved, on_real, archives, pulumi_stack, report)
    except BaseException:
        # A failure after `cluster up` (an image archive gone from the shared cache, a
        # Pulumi error) must not leave the cluster this call started running.
        if not result.already_running:
            cluster.down_state_dir(Path(result.record.state_dir))
        raise


def _deploy(result: cluster.UpResult, spec_path: Path, doc: dict[str, Any], moved: list[str],
            on_real: set[str], archives: list[Path], pulumi_stack: str | None,
            report: Report) -> RealStack:
    """`start_real_stack` after `cluster up`: the images, the volume and the objects."""
    record = result.record
    if not record.real_nodes:
        raise ClusterError(
            f"cluster {record.name} is already running without real nodes: stop it with "
            "`trainmaster cluster down`, then run this again")
    state_dir = Path(record.state_dir)
    placed = spec_path
    if pulumi_stack is None:
        placed = state_dir / "spec-on-real-nodes.yaml"
        placed.write_text(yaml.safe_dump(doc, sort_keys=False))
    spec = load_spec(placed)
    real_jobs = [j for j in spec.jobs if j.name in moved and j.checkpoint is not None]
    if not real_jobs:
        raise ClusterError(
            f"{spec_path}: no job runs {', '.join(sorted(on_real))} with a checkpoint, so "
            "nothing can "
            "train on the real nodes; add one (see examples/data-parallel)")
    job = real_jobs[0]
    assert job.checkpoint is not None
    for archive in archives:
        report(f"loading {archive.name} into {', '.join(record.real_nodes)}")
        started = time.monotonic()
        cluster.import_image(state_dir, archive)
        report(f"loaded {archive.name} into {len(record.real_nodes)} nodes in "
               f"{time.monotonic() - started:.0f}s")
    folder = state_dir / "volumes" / job.checkpoint.volume
    with SyncKube.connect(Path(record.kubeconfig)) as kube:
        report(f"checkpoint volume {job.checkpoint.volume}: host folder {folder}, shared by "
               "the real nodes")
        host_volume(kube, spec, job.checkpoint.volume, folder)
    if pulumi_stack is not None:
        report(f"deploying the stack with `trainmaster pulumi up --stack {pulumi_stack}`")
        deployed = deploy_stack(source_root(), pulumi_stack, Path(record.kubeconfig), report)
    else:
        report("applying the stack (the objects `trainmaster pulumi up` registers)")
        started = time.monotonic()
        applied = apply_spec(Path(record.kubeconfig), spec, report)
        deployed = (f"trainmaster apply: {len(applied)} objects in "
                    f"{time.monotonic() - started:.0f}s")
    report(deployed)
    return RealStack(record, spec, placed, job, folder, not result.already_running, deployed)


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == NODE_READY and c.get("status") == "True"
        for c in status.get("conditions") or [])


def wait_controllers(stack: RealStack, report: Report, timeout: float = 240) -> None:
    """trainmaster-scheduler and the operator Running and Ready on the real nodes."""
    system = f"{stack.namespace}-system"
    names = (stack.spec.scheduler.name, f"{stack.spec.metadata.name}-operator")
    with SyncKube.connect(stack.kubeconfig) as kube:
        def ready() -> bool:
            pods = kube.list(pod_path(system))
            up = [p for p in pods if _ready(p)
                  and (p["spec"].get("nodeName") or "") in stack.record.real_nodes]
            report(f"controllers: {len(up)} of {len(pods)} pods Running and Ready on real nodes")
            return all(any(p["metadata"]["name"].startswith(n + "-") for p in up) for n in names)
        _wait(ready, "trainmaster-scheduler and the operator to run on the real nodes", timeout)


def wait_prometheus(stack: RealStack, timeout: float = 300) -> cluster.Endpoints:
    """The monitoring stack's Prometheus and Alertmanager, once Prometheus answers."""
    def answering() -> cluster.Endpoints | None:
        try:
            api = cluster.endpoints(stack.kubeconfig, stack.spec.monitoring.scrape_namespace)
            api.prom("/api/v1/status/buildinfo")
            return api
        except ClusterError:
            return None

    found: cluster.Endpoints = _wait(answering, "Prometheus to answer", timeout, 3)
    return found


def job_pods(kube: SyncKube, ns: str, job: str, attempt: int | None = None
             ) -> list[dict[str, Any]]:
    from trainmaster.api import ATTEMPT_LABEL, JOB_LABEL
    selector = f"{JOB_LABEL}={job}" + (f",{ATTEMPT_LABEL}={attempt}" if attempt is not None
                                       else "")
    return kube.list(pod_path(ns), selector)


def job_status(kube: SyncKube, ns: str, job: str) -> dict[str, Any]:
    status: dict[str, Any] = kube.get(trainingjob_path(ns, job)).get("status") or {}
    return status


def pod_row(ns: str, pod: dict[str, Any]) -> tuple[str, ...]:
    """One pod as `kubectl get pods -o wide` shows it: its sidecars (init containers with
    `restartPolicy: Always`, e.g. the checkpoint mirror) count in READY and RESTARTS."""
    status = pod.get("status") or {}
    sidecars = {c["name"] for c in pod["spec"].get("initContainers") or []
                if c.get("restartPolicy") == "Always"}
    containers = [*(status.get("containerStatuses") or []),
                  *(c for c in status.get("initContainerStatuses") or []
                    if c.get("name") in sidecars)]
    ready = sum(1 for c in containers if c.get("ready"))
    waiting = [c["state"]["waiting"].get("reason", "") for c in containers
               if "waiting" in (c.get("state") or {})]
    return (ns, pod["metadata"]["name"],
            f"{ready}/{len(pod['spec']['containers']) + len(sidecars)}",
            waiting[0] if waiting else status.get("phase", "-"),
            str(sum(int(c.get("restartCount", 0)) for c in containers)),
            status.get("podIP") or "<none>", pod["spec"].get("nodeName") or "<none>",
            pod["spec"].get("serviceAccountName") or "default")


def pods_table(kubeconfig: Path, namespaces: list[str]) -> str:
    """What `kubectl get pods -o wide` shows, plus each pod's ServiceAccount."""
    rows: list[tuple[str, ...]] = [("NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "IP",
                                     "NODE", "SERVICEACCOUNT")]
    with SyncKube.connect(kubeconfig) as kube:
        for ns in namespaces:
            for pod in sorted(kube.list(pod_path(ns)), key=lambda p: p["metadata"]["name"]):
                rows.append(pod_row(ns, pod))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)

