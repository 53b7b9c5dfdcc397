"""`cluster up / down / status`: a real control plane on loopback with simulated GPU nodes.

Over 500 lines on purpose: `up` is one ordered sequence of starts (below) whose every
step must be undone by the same module's `down` when a later one fails; kept together.

up:   etcd -> kube-apiserver -> kube-controller-manager (+ kube-scheduler unless switched
      off) -> kwok -> real nodes if asked (CoreDNS, containerd + kubelet each) -> one kwok
      Node per other spec node -> wait until every node is Ready -> kubeconfig.
      Any failure stops what already started and removes the state folder, so a failed
      `up` leaves nothing running and nothing half-made behind.
down: stop every recorded process (whole process groups), then what real nodes leave
      (containers, shims, mounts, bridges, NAT rules, cgroups), and remove the state folder.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import ssl
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainmaster.api import API_VERSION
from trainmaster.api import KUBECONFIG_STATE_EXTENSION as STATE_EXTENSION
from trainmaster.cluster import _monitoring, _network_crds, _real_nodes
from trainmaster.cluster import _processes as procs
from trainmaster.cluster._certs import write_pki
from trainmaster.cluster._gang_api import FEATURE_GATES, RUNTIME_CONFIG
from trainmaster.cluster._processes import ClusterError
from trainmaster.cluster._register import register_nodes, wait_nodes_ready
from trainmaster.cluster._sizing import ClusterSizing, cluster_sizing
from trainmaster.cluster._state import (
    ClusterRecord,
    ProcessRecord,
    default_state_dir,
    known_clusters,
    state_dir_from_kubeconfig,
)
from trainmaster.cluster._user_kubeconfig import remove_context
from trainmaster.objects import build_nodes
from trainmaster.spec import ClusterSpec, load_spec
from trainmaster.toolchain import CLUSTER_FAMILIES, RECIPES, ToolchainError, is_built, tool_path

Report = Callable[[str], None]
KWOK_DATA = Path(__file__).resolve().parent.parent / "data" / "kwok"
CONTROL_PLANE = frozenset(
    {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}
)


def _silent(_: str) -> None:
    pass


@dataclass(frozen=True)
class UpResult:
    record: ClusterRecord
    already_running: bool
    seconds: float
    steps: tuple[tuple[str, float], ...] = ()
    """Each step and the seconds it took, in order."""


class _StepTimer:
    """Passes step names on to the caller's report and remembers how long each took."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self.steps: list[tuple[str, float]] = []
        self._current: tuple[str, float] | None = None

    def __call__(self, step: str) -> None:
        self.finish()
        self._current = (step, time.monotonic())
        self._report(step)

    def finish(self) -> None:
        if self._current is not None:
            name, started = self._current
            self.steps.append((name, time.monotonic() - started))
            self._current = None


def _require_tools() -> None:
    missing = [f for f in CLUSTER_FAMILIES if not is_built(f)]
    if missing:
        names = ", ".join(f"{f} {RECIPES[f].version}" for f in missing)
        raise ToolchainError(
            f"not built yet: {names}; run `trainmaster tools build` first "
            "(the first build takes several minutes)"
        )


def _kubeconfig(
    name: str, port: int, ca: Path, token: str, user: str, state_dir: Path | None
) -> dict[str, Any]:
    cluster: dict[str, Any] = {
        "server": f"https://127.0.0.1:{port}",
        "certificate-authority": str(ca),
    }
    if state_dir is not None:
        cluster["extensions"] = [
            {
                "name": STATE_EXTENSION,
                "extension": {
                    "apiVersion": API_VERSION,
                    "kind": "LocalCluster",
                    "path": str(state_dir),
                },
            }
        ]
    context = f"trainmaster-{name}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": context,
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": user}}],
    }


def _write_yaml(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    path.chmod(0o600)


def _readyz(port: int, ca: Path, token: str) -> bool:
    ctx = ssl.create_default_context(cafile=str(ca))
    req = urllib.request.Request(
        f"https://127.0.0.1:{port}/readyz", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(req, context=ctx, timeout=2) as resp:
        return bool(resp.status == 200)


def _etcd_health(port: int) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
        return bool(resp.status == 200)


def running_record(state_dir: Path) -> ClusterRecord | None:
    """The record of a cluster whose control-plane processes are all alive, else None.
    (Attached processes such as the scheduler may come and go.)"""
    record = ClusterRecord.load(state_dir)
    core = [p for p in record.processes if p.name in CONTROL_PLANE] if record else []
    if record is not None and core and all(procs.alive(p.pid) for p in core):
        return record
    return None


def up(
    spec_path: Path,
    kubeconfig: Path | None = None,
    state_dir: Path | None = None,
    apiserver_port: int | None = None,
    kube_scheduler: bool = True,
    real_nodes: int = 0,
    report: Report = _silent,
    monitoring: bool = False,
    apiserver_args: Sequence[str] = (),
) -> UpResult:
    """``apiserver_args``: more kube-apiserver flags (a benchmark's audit log)."""
    start_time = time.monotonic()
    spec = load_spec(spec_path)
    if not 0 <= real_nodes <= min(len(spec.nodes), 16):
        raise ClusterError(
            f"--real-nodes {real_nodes}: choose 0 to {min(len(spec.nodes), 16)} "
            f"(the spec has {len(spec.nodes)} nodes; at most 16 real ones per cluster)"
        )
    if monitoring and not real_nodes:
        raise ClusterError(
            "--monitoring runs Prometheus, Alertmanager and the Prometheus operator as pods "
            "on real nodes: add --real-nodes N (N >= 1)")
    state_dir = (state_dir or default_state_dir(spec.metadata.name)).resolve()
    kubeconfig = (kubeconfig or state_dir / "kubeconfig").resolve()
    existing = running_record(state_dir)
    if existing is not None:
        return UpResult(existing, already_running=True, seconds=0.0)
    if ClusterRecord.load(state_dir) is not None:  # a stale record: processes died
        down_state_dir(state_dir)
    _require_tools()
    if real_nodes:
        from trainmaster.cluster._host import require_host

        _real_nodes.require_tools()
        require_host()
    if apiserver_port is not None and procs.port_in_use(apiserver_port):
        raise ClusterError(
            f"port {apiserver_port} on 127.0.0.1 is in use: stop what listens "
            "there or choose another with --apiserver-port"
        )
    shutil.rmtree(state_dir, ignore_errors=True)
    state_dir.mkdir(parents=True)
    record = ClusterRecord(
        name=spec.metadata.name,
        state_dir=str(state_dir),
        kubeconfig=str(kubeconfig),
        spec=str(Path(spec_path).resolve()),
        apiserver_port=apiserver_port or procs.free_port(),
        etcd_port=procs.free_port(),
        nodes=len(spec.nodes),
        real_nodes=[n.name for n in spec.nodes[:real_nodes]],
    )
    record.save()
    progress = report  # progress lines, not steps: they must not split the step timing
    report = timer = _StepTimer(report)
    simulated = [n for n in build_nodes(spec) if n["metadata"]["name"] not in record.real_nodes]
    sizing = cluster_sizing(len(simulated))
    try:
        _start_all(record, state_dir, kubeconfig, kube_scheduler, report, sizing,
                   apiserver_args)
        report("installing the network CRDs (NetworkAttachmentDefinition"
               + (", whereabouts)" if record.real_nodes else ")"))
        _network_crds.install(kubeconfig, real_nodes=bool(record.real_nodes))
        if record.real_nodes:
            _start_real_nodes(record, spec_path, state_dir, kubeconfig, report)
        if monitoring:
            start_monitoring(record, spec, report)
        report(f"registering {len(simulated)} simulated nodes")
        register_nodes(kubeconfig, simulated)
        report(f"waiting for {len(simulated)} nodes to become Ready")
        wait_nodes_ready(kubeconfig, {n["metadata"]["name"] for n in simulated},
                         timeout=sizing.ready_timeout, every=sizing.poll_seconds,
                         report=progress)
    except BaseException:
        down_state_dir(state_dir)
        if kubeconfig.parent != state_dir:
            kubeconfig.unlink(missing_ok=True)
        raise
    timer.finish()
    return UpResult(
        record,
        already_running=False,
        seconds=time.monotonic() - start_time,
        steps=tuple(timer.steps),
    )


def _start_all(
    record: ClusterRecord,
    state_dir: Path,
    kubeconfig: Path,
    kube_scheduler: bool,
    report: Report,
    sizing: ClusterSizing,
    apiserver_args: Sequence[str] = (),
) -> None:
    pki = state_dir / "pki"
    report("writing certificates")
    write_pki(pki)
    tokens = {who: secrets.token_hex(16) for who in ("admin", "controller-manager", "scheduler")}
    node_tokens = {node: secrets.token_hex(16) for node in record.real_nodes}
    (pki / "tokens.csv").write_text(
        f'{tokens["admin"]},admin,admin,"system:masters"\n'
        f"{tokens['controller-manager']},system:kube-controller-manager,kcm\n"
        f"{tokens['scheduler']},system:kube-scheduler,ksched\n"
        # Kubelets authenticate as system:node:<name>; the Node authorizer scopes them.
        + "".join(
            f'{tok},system:node:{node},node-{node},"system:nodes"\n'
            for node, tok in node_tokens.items()
        )
    )
    ca = pki / "ca.crt"
    name, port = record.name, record.apiserver_port

    def launch(proc_name: str, argv: list[str], ports: list[int]) -> Any:
        return _launch(record, proc_name, argv, ports)

    report("starting etcd")
    etcd, etcd_log = launch(
        "etcd",
        [
            str(tool_path("etcd")),
            "--name=trainmaster",
            f"--data-dir={state_dir / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{record.etcd_port}",
            f"--advertise-client-urls=http://127.0.0.1:{record.etcd_port}",
            "--listen-peer-urls=http://127.0.0.1:0",
            "--unsafe-no-fsync",
            "--quota-backend-bytes=8589934592",
            "--log-level=warn",
        ],
        [record.etcd_port],
    )
    procs.wait_until(lambda: _etcd_health(record.etcd_port), "etcd", 30, etcd, etcd_log)

    report("starting kube-apiserver")
    apiserver, api_log = launch(
        "kube-apiserver",
        [
            str(tool_path("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{record.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            f"--cert-dir={pki}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={ca}",
            f"--token-auth-file={pki / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
            f"--kubelet-client-key={pki / 'kubelet-client.key'}",
            # Real nodes' names are spec names, not host names: dial kubelets by node IP.
            "--kubelet-preferred-address-types=InternalIP",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            # A test cluster on 2 cores: let load through rather than queue it.
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=3000",
            "--max-mutating-requests-inflight=1500",
            "--v=1",
            FEATURE_GATES,
            RUNTIME_CONFIG,
            *apiserver_args,
        ],
        [port],
    )
    procs.wait_until(
        lambda: _readyz(port, ca, tokens["admin"]), "kube-apiserver", 90, apiserver, api_log
    )

    _write_yaml(kubeconfig, _kubeconfig(name, port, ca, tokens["admin"], "admin", state_dir))
    kcm_config = state_dir / "controller-manager.kubeconfig"
    _write_yaml(
        kcm_config,
        _kubeconfig(
            name, port, ca, tokens["controller-manager"], "system:kube-controller-manager", None
        ),
    )
    report("starting kube-controller-manager")
    launch(
        "kube-controller-manager",
        [
            str(tool_path("kube-controller-manager")),
            f"--kubeconfig={kcm_config}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--leader-elect=false",
            f"--root-ca-file={ca}",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            "--use-service-account-credentials=true",
            "--kube-api-qps=1000",
            "--kube-api-burst=2000",
            # kwok's Leases are longer at scale (see _sizing): judge them by their length.
            f"--node-monitor-grace-period={sizing.grace_seconds}s",
            FEATURE_GATES,
            "--v=1",
        ],
        [],
    )
    if kube_scheduler:
        sched_config = state_dir / "scheduler.kubeconfig"
        _write_yaml(
            sched_config,
            _kubeconfig(name, port, ca, tokens["scheduler"], "system:kube-scheduler", None),
        )
        report("starting kube-scheduler")
        launch(
            "kube-scheduler",
            [
                str(tool_path("kube-scheduler")),
                f"--kubeconfig={sched_config}",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--leader-elect=false",
                FEATURE_GATES,
                "--v=1",
            ],
            [],
        )

    for node, tok in node_tokens.items():
        _write_yaml(
            state_dir / "nodes" / node / "kubelet.kubeconfig",
            _kubeconfig(name, port, ca, tok, f"system:node:{node}", None),
        )

    report("starting kwok")
    kwok_port = procs.free_port()
    stages = sorted(p for p in tool_path("stages/node-initialize.yaml").parent.glob("*.yaml"))
    stages += sorted(KWOK_DATA.glob("*.yaml"))
    launch(
        "kwok",
        [
            str(tool_path("kwok")),
            f"--kubeconfig={kubeconfig}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--server-address=127.0.0.1:{kwok_port}",
            "--node-ip=10.96.0.1",
            "--cidr=10.64.0.1/10",
            f"--node-lease-duration-seconds={sizing.lease_seconds}",
            *[f"--config={stage}" for stage in stages],
        ],
        [kwok_port],
    )


def _launch(record: ClusterRecord, name: str, argv: list[str], ports: list[int]) -> Any:
    log = Path(record.state_dir) / "logs" / f"{name}.log"
    proc = procs.start(name, argv, log)
    record.processes.append(ProcessRecord(name, proc.pid, str(log), ports))
    record.save()  # recorded before we wait on it, so a crash here still cleans up
    return proc, log


def _start_real_nodes(
    record: ClusterRecord, spec_path: Path, state_dir: Path, kubeconfig: Path, report: Report
) -> None:
    from trainmaster.cluster._host import claim_slot

    for dead in reap_dead_clusters(state_dir):
        report(f"removed a dead cluster's real nodes, mounts and disk ({dead})")
    record.net_slot = claim_slot(state_dir)
    record.save()
    nodes = _real_nodes.layouts(state_dir, record.net_slot, record.real_nodes)
    spec = load_spec(spec_path)
    report(f"creating the pod network and the rails of {len(nodes)} real nodes")
    _real_nodes.prepare_network(record.net_slot, nodes, spec)
    _real_nodes.start(
        spec=spec,
        nodes=nodes,
        state_dir=state_dir,
        kubeconfig=kubeconfig,
        node_kubeconfigs={
            n: state_dir / "nodes" / n / "kubelet.kubeconfig" for n in record.real_nodes
        },
        apiserver_port=record.apiserver_port,
        launch=lambda name, argv, ports: _launch(record, name, argv, ports),
        report=report,
    )


def reap_dead_clusters(state_dir: Path) -> list[Path]:
    """Tear down every cluster that holds a real-node slot but none of whose recorded
    processes lives (a killed session, a reboot that kept /run): its containerd roots can hold
    many GB of unpacked images and its mounts outlive it. A cluster with one process down (an
    API server being restarted) is left alone. Returns their state folders."""
    from trainmaster.cluster._host import slot_holders

    def all_dead(owner: Path) -> bool:
        record = ClusterRecord.load(owner)
        return record is not None and not any(procs.alive(p.pid) for p in record.processes)

    dead = [owner for owner in slot_holders().values() if owner != state_dir and all_dead(owner)]
    for owner in dead:
        down_state_dir(owner)
    return dead


def attach_process(state_dir: Path, name: str, argv: list[str],
                   env: dict[str, str] | None = None) -> ProcessRecord:
    """Start a process that belongs to a running cluster (e.g. the scheduler) and record
    it, so that `cluster down` stops it with the control plane."""
    record = ClusterRecord.load(state_dir)
    if record is None:
        raise ClusterError(f"no local cluster at {state_dir}")
    log = state_dir / "logs" / f"{name}.log"
    proc = procs.start(name, argv, log, env={"KUBECONFIG": record.kubeconfig, **(env or {})})
    entry = ProcessRecord(name, proc.pid, str(log), [])
    record.processes.append(entry)
    record.save()
    return entry


def start_monitoring(record: ClusterRecord, spec: ClusterSpec, report: Report = _silent
                     ) -> list[str]:
    """The monitoring stack on the real nodes (cluster/_monitoring.py); returns what it
    applied. Also for a cluster that is already up (the demo's, when started without it)."""
    state_dir = Path(record.state_dir)
    archive = _monitoring.images_archive(state_dir)
    if not archive.exists():
        report("writing the monitoring images (operator, config reloader, Prometheus, "
               "Alertmanager)")
        _monitoring.write_images(archive)
    report(f"loading the monitoring images into {', '.join(record.real_nodes)}")
    import_image(state_dir, archive)
    mon = spec.monitoring
    report(f"installing the Prometheus operator's CRDs and the monitoring stack in "
           f"{mon.scrape_namespace}")
    return _monitoring.install(Path(record.kubeconfig), mon.scrape_namespace,
                               spec.metadata.name, f"{mon.scrape_interval_seconds}s")


def import_image(state_dir: Path, archive: Path) -> list[str]:
    """Load an image archive (OCI layout or docker-save tar) into every real node's
    containerd; return the nodes it went to."""
    record = ClusterRecord.load(state_dir)
    if record is None:
        raise ClusterError(f"no local cluster at {state_dir}")
    if record.net_slot is None or not record.real_nodes:
        raise ClusterError(
            f"cluster {record.name} has no real nodes to load an image into: start it with "
            "`trainmaster cluster up --real-nodes N`"
        )
    return _real_nodes.import_image(state_dir, record.net_slot, record.real_nodes, archive)


def resolve_state_dir(kubeconfig: Path | None = None, name: str | None = None) -> Path:
    """Which local cluster a command means: by kubeconfig, by name, or the only one."""
    if kubeconfig is not None:
        found = state_dir_from_kubeconfig(kubeconfig)
        if found is None:
            raise ClusterError(
                f"{kubeconfig} is not a kubeconfig written by `trainmaster "
                f"cluster up` (no {STATE_EXTENSION} extension)"
            )
        return found
    if name is not None:
        return default_state_dir(name)
    clusters = known_clusters()
    if len(clusters) == 1:
        return clusters[0]
    if not clusters:
        raise ClusterError(
            "no local cluster is running: start one with `trainmaster cluster "
            "up --spec stacks/dev/cluster.yaml`"
        )
    names = ", ".join(p.name for p in clusters)
    raise ClusterError(f"several local clusters exist ({names}): choose one with --name")


def down_state_dir(state_dir: Path) -> list[str]:
    """Stop every process of the cluster in state_dir (reverse start order); remove it."""
    record = ClusterRecord.load(state_dir)
    stopped = []
    if record is not None:
        for proc in reversed(record.processes):
            procs.stop(proc.pid)
            stopped.append(proc.name)
        if record.net_slot is not None:
            left = _real_nodes.teardown(state_dir, record.net_slot, record.real_nodes)
            if left:
                raise ClusterError(
                    f"cluster down stopped every process but could not remove: {', '.join(left)}"
                )
        kubeconfig = Path(record.kubeconfig)
        if kubeconfig.parent != state_dir and state_dir_from_kubeconfig(kubeconfig) == state_dir:
            kubeconfig.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the user's own file: best effort, as kind
            remove_context(state_dir, record.name)
    shutil.rmtree(state_dir, ignore_errors=True)
    return stopped


def down(kubeconfig: Path | None = None, name: str | None = None) -> list[str]:
    state_dir = resolve_state_dir(kubeconfig, name)
    if not state_dir.exists():
        raise ClusterError(f"no local cluster at {state_dir}")
    return down_state_dir(state_dir)
