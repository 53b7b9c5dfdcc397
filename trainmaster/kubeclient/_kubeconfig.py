"""Which cluster a client talks to: one rule for every trainmaster command and component.

1. the kubeconfig given explicitly (a ``--kubeconfig`` flag or argument);
2. ``$KUBECONFIG`` (its first file);
3. the in-cluster service account, when ``KUBERNETES_SERVICE_HOST`` is set (in a pod);
4. the kubeconfig of the only local trainmaster cluster (``trainmaster cluster up``);
5. ``~/.kube/config``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._fastconfig import KubeConfigError, Unsupported, load_incluster, load_kubeconfig

if TYPE_CHECKING:
    import kubernetes

log = logging.getLogger(__name__)

IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"

_context: str | None = None
"""The kubeconfig context a command line chose (``--context``); None: the file's
current-context. Process-wide like ``$KUBECONFIG``: a CLI process talks to one cluster."""


def select_context(name: str | None) -> None:
    """Use this context of the chosen kubeconfig instead of its current-context."""
    global _context
    _context = name


def choose_kubeconfig(explicit: Path | None = None) -> Path | None:
    """The kubeconfig file the rule picks; None means the in-cluster service account."""
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if env:
        return Path(env)
    if os.environ.get(IN_CLUSTER_ENV):
        return None
    from trainmaster.cluster._state import known_clusters  # a file read, no cluster code

    clusters = known_clusters()
    if len(clusters) == 1 and (clusters[0] / "kubeconfig").exists():
        return clusters[0] / "kubeconfig"
    return Path.home() / ".kube" / "config"


async def load_configuration(explicit: Path | None = None) -> Any:
    """The server, TLS and credentials by the rule: a ``KubeConfig`` from the small
    loader for the common kubeconfig shapes (no kubernetes_asyncio import, ~6 s), else
    kubernetes_asyncio's ``Configuration`` (auth-provider, exec plugins, ...). Both carry
    the attributes ``Kube`` reads. Failures raise ``KubeConfigError``."""
    path = choose_kubeconfig(explicit)
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
