"""Kubernetes API clients from a kubeconfig, configured once for the whole package."""

from __future__ import annotations

import os
from pathlib import Path

import kubernetes
import kubernetes_asyncio


def default_kubeconfig() -> Path:
    """$KUBECONFIG, else the only local trainmaster cluster's, else ~/.kube/config."""
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env.split(os.pathsep)[0])
    from trainmaster.cluster._state import known_clusters

    clusters = known_clusters()
    if len(clusters) == 1 and (clusters[0] / "kubeconfig").exists():
        return clusters[0] / "kubeconfig"
    return Path.home() / ".kube" / "config"


def sync_client(kubeconfig: Path | None = None, pool: int = 16) -> kubernetes.client.ApiClient:
    cfg = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(
        config_file=str(kubeconfig or default_kubeconfig()), client_configuration=cfg
    )
    cfg.connection_pool_maxsize = pool
    return kubernetes.client.ApiClient(cfg)


async def async_client(
    kubeconfig: Path | None = None, pool: int = 64
) -> kubernetes_asyncio.client.ApiClient:
    cfg = kubernetes_asyncio.client.Configuration()
    await kubernetes_asyncio.config.load_kube_config(
        config_file=str(kubeconfig or default_kubeconfig()), client_configuration=cfg
    )
    cfg.connection_pool_maxsize = pool
    return kubernetes_asyncio.client.ApiClient(cfg)
