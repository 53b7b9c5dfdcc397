"""The ecosystem's workload controllers beside a local control plane: JobSet, and Kueue in
front of trainmaster-scheduler (docs/interop.md).

Each runs as a host process of the cluster (recorded, so `cluster down` stops it), the
binary built from its pinned release (the toolchain's `jobset` and `kueue` families), with:

* the release's CRDs, applied and waited for;
* its own identity: a ServiceAccount in its namespace bound to the release's own
  ClusterRole (renamed; Kueue also to its Secrets Role in its namespace), and a kubeconfig
  holding that account's token; no admin rights;
* its webhooks served on loopback (``_webhooks.py``), registered only once its readiness
  endpoint says the webhook server is up and every webhook's path answers (JobSet's
  server listens, and reports ready, before a goroutine registers its handlers: a JobSet
  created in between met a 404 from the webhook), and deleted again by ``stop``;
* no leader election (one replica), metrics off, health probes on a loopback port.

JobSet's pod webhooks are not registered: for an exclusive topology they hold a Job's
pods back until its first pod is bound (the default scheduler's leader/follower
placement), which a gang scheduler that binds a JobSet whole would wait on forever.
trainmaster-scheduler reads the exclusive-topology annotation itself (scheduler
runtime/jobsets.py).
"""

from __future__ import annotations

import contextlib
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainmaster.api import APP_MANAGED_BY_LABEL, APP_NAME_LABEL
from trainmaster.cluster import _identity, _processes
from trainmaster.cluster._control_plane import attach_process
from trainmaster.cluster._network_crds import wait_established
from trainmaster.cluster._processes import ClusterError
from trainmaster.cluster._state import ClusterRecord
from trainmaster.cluster._webhooks import loopback_webhooks, serving_certificate, webhook_path
from trainmaster.kubeclient import ApiError, SyncKube
from trainmaster.toolchain import RECIPES, family_dir, is_built

KUEUE_FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")
"""Kueue's integrations run here: plain Jobs and JobSets (their webhooks only)."""


@dataclass(frozen=True)
class Controller:
    """A started workload controller: its process and the webhook configurations it
    registered (deleted by ``stop`` before the process goes)."""

    name: str
    pid: int
    log: Path
    webhooks: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class _Release:
    family: str
    namespace: str
    account: str
    webhook_groups: tuple[str, ...]
    namespace_rules: tuple[dict[str, Any], ...] = ()
    """A Role's rules in its own namespace, as the release's kustomization grants them."""


JOBSET = _Release("jobset", "jobset-system", "jobset-controller", ("jobset.x-k8s.io",))
KUEUE = _Release("kueue", "kueue-system", "kueue-controller",
                 ("batch", "jobset.x-k8s.io", "kueue.x-k8s.io"),
                 # Kueue's manager-secrets-role (config/components/rbac): it watches the
                 # Secrets of its own namespace (MultiKueue's kubeconfigs), nowhere else.
                 ({"apiGroups": [""], "resources": ["secrets"],
                   "verbs": ["get", "list", "update", "watch"]},))


def _folder(family: str) -> Path:
    if not is_built(family):
        raise ClusterError(f"{family} {RECIPES[family].version} is not built yet; run "
                           f"`trainmaster tools build {family}` first")
    return family_dir(family)


def _crds(kube: SyncKube, folder: Path) -> list[str]:
    names = []
    for path in sorted((folder / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                kube.apply(doc)
                names.append(doc["metadata"]["name"])
    wait_established(kube, names, 60)
    return names


def _identity_documents(release: _Release, folder: Path) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, the release's ClusterRole (renamed) and its binding."""
    role_name = f"trainmaster-{release.family}-controller"
    roles = [d for d in yaml.safe_load_all((folder / "rbac" / "role.yaml").read_text())
             if d and d.get("kind") == "ClusterRole"]
    if len(roles) != 1:
        raise ClusterError(f"{folder / 'rbac/role.yaml'}: expected one ClusterRole")
    labels = {APP_NAME_LABEL: release.family,
              APP_MANAGED_BY_LABEL: "trainmaster"}
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": release.namespace, "labels": labels}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": release.account, "namespace": release.namespace,
                      "labels": labels}},
        {**roles[0], "metadata": {"name": role_name, "labels": labels}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": role_name, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": role_name},
         "subjects": [{"kind": "ServiceAccount", "name": release.account,
                       "namespace": release.namespace}]},
        *_namespace_role(release, role_name, labels),
    ]


def _namespace_role(release: _Release, name: str, labels: dict[str, str]
                    ) -> list[dict[str, Any]]:
    if not release.namespace_rules:
        return []
    meta = {"name": name, "namespace": release.namespace, "labels": labels}
    return [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
         "rules": list(release.namespace_rules)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": release.account,
                       "namespace": release.namespace}]},
    ]


def _ready(port: int) -> bool:
    """The controller's readiness probe (plain HTTP on loopback): 200 once its webhook
    server serves, with the certificate in place."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
        return int(resp.status) == 200


def _serves(url: str, context: ssl.SSLContext) -> bool:
    """Whether the webhook server has a handler at ``url``'s path: an empty review gets
    an answer (an error review, or a 400) from a handler, a 404 where none is yet."""
    request = urllib.request.Request(url, data=b"{}",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=2, context=context):
            return True
    except urllib.error.HTTPError as exc:
        return exc.code != 404


def _start(state_dir: Path, release: _Release, config: dict[str, Any],
           extra_args: list[str]) -> Controller:
    record = ClusterRecord.load(state_dir)
    if record is None:
        raise ClusterError(f"no local cluster at {state_dir}")
    folder = _folder(release.family)
    kubeconfig = Path(record.kubeconfig)
    home = state_dir / release.family
    webhook_port, health_port = _processes.free_port(), _processes.free_port()
    ca = serving_certificate(home / "certs", release.family)
    config_path = home / "config.yaml"
    config_path.write_text(yaml.safe_dump({
        **config,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(home / "certs")},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
    }, sort_keys=False))
    with SyncKube.connect(kubeconfig) as kube:
        try:
            _crds(kube, folder)
        except ApiError as exc:
            raise ClusterError(f"applying {release.family}'s CRDs failed: {exc}") from None
    own = _identity.install(kubeconfig, _identity_documents(release, folder),
                            namespace=release.namespace, account=release.account,
                            out=home / "kubeconfig")
    entry = attach_process(state_dir, release.family,
                           [str(folder / release.family), f"--config={config_path}",
                            *extra_args], env={"KUBECONFIG": str(own)})
    log = Path(entry.log)
    hooks = loopback_webhooks(folder / "webhook" / "manifests.yaml",
                              f"trainmaster-{release.family}", webhook_port, ca,
                              release.webhook_groups)
    urls = [hook["clientConfig"]["url"] for config in hooks for hook in config["webhooks"]]
    context = ssl.create_default_context(cadata=ca.decode())
    try:
        _processes.wait_until(
            lambda: (_process_ready(entry.pid, health_port, log)
                     and all(_serves(url, context) for url in urls)),
            f"{release.family} controller and its webhooks", 120, None, log)
        with SyncKube.connect(kubeconfig) as kube:
            for hook in hooks:
                kube.apply(hook)
    except BaseException:
        _processes.stop(entry.pid)
        raise
    return Controller(release.family, entry.pid, log, tuple(hooks))


def _process_ready(pid: int, health_port: int, log: Path) -> bool:
    if not _processes.alive(pid):
        raise ClusterError(f"the controller exited; last lines of {log}:\n"
                           f"{_processes.log_tail(log)}")
    return _ready(health_port)


def start_jobset(state_dir: Path) -> Controller:
    """JobSet's controller on the cluster of ``state_dir`` (its CRD and webhooks too)."""
    return _start(state_dir, JOBSET, {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration"}, [])


KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")
"""Where Kueue v0.17.0 reads its metrics certificate when its own certificate management is
off: a fixed path (cmd/kueue/main.go), not a setting. It exits when the files are missing,
even with metrics off."""


def _kueue_metrics_certificate() -> None:
    """A certificate at Kueue's fixed metrics path, unless one is there (another cluster's,
    or the machine's own): metrics are off here, so it is read and never served."""
    if not (KUEUE_METRICS_CERTS / "tls.crt").exists():
        serving_certificate(KUEUE_METRICS_CERTS, "kueue-metrics")


def start_kueue(state_dir: Path) -> Controller:
    """Kueue's controller manager on the cluster of ``state_dir``, managing Jobs and JobSets
    that carry a queue label (its CRDs and webhooks too). Its visibility API server (an
    aggregated API) is off: it would need a Service and an APIService here."""
    _kueue_metrics_certificate()
    return _start(state_dir, KUEUE, {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
        "namespace": KUEUE.namespace,
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
    }, ["--feature-gates=VisibilityOnDemand=false"])


def stop(state_dir: Path, controller: Controller) -> None:
    """Delete the controller's webhook configurations (so nothing waits on a webhook that
    no longer answers), then stop its process and drop it from the cluster's record."""
    record = ClusterRecord.load(state_dir)
    if record is not None:
        with SyncKube.connect(Path(record.kubeconfig)) as kube:
            for hook in controller.webhooks:
                kube.delete(webhook_path(hook), missing_ok=True)
    _processes.stop(controller.pid)
    if record is not None:
        record.processes = [p for p in record.processes if p.pid != controller.pid]
        record.save()


@contextlib.contextmanager
def running(state_dir: Path, family: str) -> Iterator[Controller]:
    """``start_jobset`` / ``start_kueue`` for the length of a ``with`` block."""
    starts = {"jobset": start_jobset, "kueue": start_kueue}
    controller = starts[family](state_dir)
    try:
        yield controller
    finally:
        stop(state_dir, controller)
