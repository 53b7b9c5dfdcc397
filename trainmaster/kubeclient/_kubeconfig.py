"""Which cluster a client talks to: one rule for every trainmaster command and component,
kubectl's own, so that kubectl and trainmaster never silently target different clusters.

1. the kubeconfig given explicitly (a ``--kubeconfig`` flag or argument);
2. a local trainmaster cluster named explicitly (``--cluster NAME``): the kubeconfig
   `trainmaster cluster up` wrote for it;
3. ``$KUBECONFIG`` (its first file);
4. the in-cluster service account, when ``KUBERNETES_SERVICE_HOST`` is set (in a pod);
5. ``~/.kube/config`` (where `trainmaster cluster up` adds a ``trainmaster-<name>``
   context, as kind does).

``--context`` then picks a context of that file instead of its current-context.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from trainmaster.api import IN_CLUSTER_ENV

from ._fastconfig import KubeConfigError, Unsupported, load_incluster, load_kubeconfig

if TYPE_CHECKING:
    import kubernetes

log = logging.getLogger(__name__)


def in_pod(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs in a pod (the kubelet sets ``$KUBERNETES_SERVICE_HOST``):
    the in-cluster rule every command's kubeconfig choice follows."""
    return bool((os.environ if environ is None else environ).get(IN_CLUSTER_ENV))


_context: str | None = None
"""The kubeconfig context a command line chose (``--context``); None: the file's
current-context. Process-wide like ``$KUBECONFIG``: a CLI process talks to one cluster."""
_cluster: str | None = None
"""The local trainmaster cluster a command line chose (``--cluster NAME``)."""


def select_context(name: str | None) -> None:
    """Use this context of the chosen kubeconfig instead of its current-context."""
    global _context
    _context = name


def select_cluster(name: str | None) -> None:
    """Use this local trainmaster cluster's kubeconfig (rule 2)."""
    global _cluster
    _cluster = name


def selected_cluster() -> str | None:
    """The local cluster `select_cluster` chose, if any."""
    return _cluster


def local_cluster_kubeconfig(name: str) -> Path:
    """The kubeconfig `trainmaster cluster up` wrote for the local cluster `name`."""
    from trainmaster.cluster._state import ClusterRecord, default_state_dir, known_clusters

    record = ClusterRecord.load(default_state_dir(name))
    if record is None:
        running = ", ".join(p.name for p in known_clusters()) or "none"
        raise KubeConfigError(f"--cluster {name}: no local cluster of that name (running: "
                              f"{running}); start it with `trainmaster cluster up --spec "
                              "SPEC`")
    return Path(record.kubeconfig)


def choose_kubeconfig(explicit: Path | None = None) -> Path | None:
    """The kubeconfig file the rule picks; None means the in-cluster service account."""
    if explicit is not None:
        return Path(explicit)
    if _cluster is not None:
        return local_cluster_kubeconfig(_cluster)
    env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if env:
        return Path(env)
    if in_pod():
        return None
    return Path.home() / ".kube" / "config"


@dataclass(frozen=True)
class Target:
    """The cluster a command talks to, for a line that names it."""

    kubeconfig: Path | None
    """None: the in-cluster service account."""
    context: str | None
    server: str
    why: str
    """Which step of the rule chose the kubeconfig (`--kubeconfig`, `$KUBECONFIG`, ...)."""

    def describe(self) -> str:
        where = self.server or "no server"
        if self.kubeconfig is None:
            return f"in-cluster service account, server {where}"
        if not self.server:
            return f"kubeconfig {self.kubeconfig} (from {self.why})"
        context = f"context {self.context}" if self.context else "no context"
        return f"{context}, server {where} (kubeconfig {self.kubeconfig}, from {self.why})"


def describe_target(explicit: Path | None = None, chosen_by: str | None = None) -> Target:
    """The target by the rule, read without connecting. Never raises for an unusable
    kubeconfig (the connection reports that): what cannot be read is left empty.
    ``chosen_by`` names how an explicit file was found, when not by ``--kubeconfig``."""
    if explicit is not None:
        why = chosen_by or "--kubeconfig"
    elif _cluster is not None:
        why = f"--cluster {_cluster}"
    elif os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]:
        why = "$KUBECONFIG"
    elif in_pod():
        why = "in-cluster"
    else:
        why = "~/.kube/config"
    path = choose_kubeconfig(explicit)
    if path is None:
        host, port = os.environ.get(IN_CLUSTER_ENV, ""), os.environ.get(
            "KUBERNETES_SERVICE_PORT", "443")
        return Target(None, None, f"https://{host}:{port}", why)
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        doc = None
    if not isinstance(doc, dict):
        return Target(path, _context, "", f"{why}; unreadable")
    context = _context or doc.get("current-context")
    ctx = _entry(doc.get("contexts"), context, "context")
    cluster = _entry(doc.get("clusters"), ctx.get("cluster"), "cluster")
    return Target(path, str(context) if context else None, str(cluster.get("server") or ""),
                  why)


def _entry(items: Any, name: Any, key: str) -> dict[str, Any]:
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("name") == name:
            body = item.get(key)
            return body if isinstance(body, dict) else {}
    return {}


async def load_configuration(explicit: Path | None = None) -> Any:
    """The server, TLS and credentials by the rule: a ``KubeConfig`` from the small
    loader for the common kubeconfig shapes (no kubernetes_asyncio import, ~6 s), else
    kubernetes_asyncio's ``Configuration`` (auth-provider, exec plugins, ...). Both carry
    the attributes ``Kube`` reads. Failures raise ``KubeConfigError``."""
    path = choose_kubeconfig(explicit)
    if path is not None and not path.exists() and explicit is None and _cluster is None \
            and not os.environ.get("KUBECONFIG"):
        raise KubeConfigError(
            f"no kubeconfig: {path} does not exist and $KUBECONFIG is not set; pass "
            "--kubeconfig FILE, or --cluster NAME for a local cluster (`trainmaster cluster "
            "up` also adds its context to ~/.kube/config)")
    try:
        return load_incluster() if path is None else load_kubeconfig(path, _context)
    except Unsupported as why:
        log.debug("kubeconfig %s: %s; loading it with kubernetes_asyncio", path, why)
    import kubernetes_asyncio

    cfg = kubernetes_asyncio.client.Configuration()
    try:
        if path is None:
            kubernetes_asyncio.config.load_incluster_config(client_configuration=cfg)
        else:
            await kubernetes_asyncio.config.load_kube_config(
                config_file=str(path), context=_context, client_configuration=cfg
            )
    except kubernetes_asyncio.config.ConfigException as err:
        raise KubeConfigError(str(err)) from err
    if not cfg.host:  # kubernetes_asyncio accepts a cluster without a server
        raise KubeConfigError(f"{path}: the current context's cluster has no server")
    return cfg


def load_sync_configuration(explicit: Path | None = None) -> kubernetes.client.Configuration:
    """The same choice for the generated synchronous client (kopf's login, tests)."""
    import kubernetes

    cfg = kubernetes.client.Configuration()
    path = choose_kubeconfig(explicit)
    if path is None:
        kubernetes.config.load_incluster_config(client_configuration=cfg)
    else:
        kubernetes.config.load_kube_config(config_file=str(path), context=_context,
                                           client_configuration=cfg)
    return cfg


def generated_client(explicit: Path | None = None, pool: int = 16) -> kubernetes.client.ApiClient:
    """The generated synchronous ``kubernetes`` client by the same rule: for tests that
    want its typed API classes. trainmaster's own code uses ``Kube`` / ``SyncKube``."""
    import kubernetes

    cfg = load_sync_configuration(explicit)
    cfg.connection_pool_maxsize = pool
    return kubernetes.client.ApiClient(cfg)
