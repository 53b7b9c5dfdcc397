"""A small kubeconfig / in-cluster loader for the common cases, without kubernetes_asyncio.

Why: importing kubernetes_asyncio costs about 6 s (its client package imports ~700 model
modules), which the scheduler paid at every start and fail-over only to read a kubeconfig.
This loader reads what the project's own client needs (server, TLS, bearer token) from
the common kubeconfig shapes; anything else (auth-provider, exec plugins, basic auth,
proxies) raises ``Unsupported`` and the caller falls back to kubernetes_asyncio, so no
kubeconfig that worked before stops working.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainmaster.api import IN_CLUSTER_ENV
from trainmaster.errors import TrainmasterError

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")

_HANDLED_USER_KEYS = {
    "client-certificate", "client-certificate-data", "client-key", "client-key-data",
    "token", "tokenFile",
}
_HANDLED_CLUSTER_KEYS = {
    "server", "certificate-authority", "certificate-authority-data",
    "insecure-skip-tls-verify", "tls-server-name", "extensions",
}


class KubeConfigError(TrainmasterError):
    """A kubeconfig (or the in-cluster service account) that cannot be used: exit 2 in
    the CLI, like any file the user named that cannot be read."""

    exit_code = 2


class Unsupported(Exception):
    """A kubeconfig shape this loader leaves to kubernetes_asyncio (a signal to fall
    back, not a failure)."""


@dataclass
class KubeConfig:
    """What ``Kube`` reads of a kubernetes_asyncio ``Configuration``, same names."""

    host: str
    ssl_ca_cert: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    connection_pool_maxsize: int | None = None
    token: str | None = None
    token_file: str | None = None
    username: str | None = None
    # Set when the token is re-read from a file (rotated SA tokens): Kube then asks
    # auth_settings() on every request instead of caching the header.
    refresh_api_key_hook: Any = None
    _token_cache: tuple[float, str] = field(default=(-1.0, ""), repr=False)

    def _current_token(self) -> str | None:
        if self.token_file is None:
            return self.token
        try:
            mtime = os.stat(self.token_file).st_mtime
            if mtime != self._token_cache[0]:
                self._token_cache = (mtime, Path(self.token_file).read_text().strip())
        except OSError as err:
            raise KubeConfigError(f"cannot read token file {self.token_file}: {err}") from err
        return self._token_cache[1]

    async def auth_settings(self) -> dict[str, dict[str, str]]:
        token = self._current_token()
        if not token:
            return {}
        return {"BearerToken": {"in": "header", "key": "authorization",
                                "value": f"Bearer {token}"}}

    def get_basic_auth_token(self) -> str:
        raise Unsupported("basic auth")  # never reached: username is never set here


_temp_files: list[str] = []


def _remove_temp_files() -> None:
    for name in _temp_files:
        with contextlib.suppress(OSError):
            os.unlink(name)


atexit.register(_remove_temp_files)


def _data_file(data: str, what: str) -> str:
    """A ``*-data`` field (base64) as a private temporary file: ssl wants file names."""
    try:
        raw = base64.b64decode(data, validate=False)
    except ValueError as err:
        raise KubeConfigError(f"{what} is not valid base64: {err}") from err
    fd, name = tempfile.mkstemp(prefix="trainmaster-kube-")
    with os.fdopen(fd, "wb") as out:
        out.write(raw)
    _temp_files.append(name)
    return name


def _file(value: str, base: Path, what: str) -> str:
    path = Path(os.path.expanduser(value))
    if not path.is_absolute():
        path = base / path  # kubeconfig paths are relative to the kubeconfig's directory
    if not path.exists():
        raise KubeConfigError(f"{what} file {path} does not exist")
    return str(path)


def _named(items: Any, name: str, kind: str, path: Path) -> dict[str, Any]:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            body = item.get(kind)
            return body if isinstance(body, dict) else {}
    raise KubeConfigError(f"{path}: {kind} {name!r} is not defined in {kind}s")


def load_kubeconfig(path: Path, context: str | None = None) -> KubeConfig:
    """The kubeconfig's (current or given) context; ``Unsupported`` for shapes left to
    kubernetes_asyncio; ``KubeConfigError`` for a missing file or an unknown name."""
    if not path.exists():
        raise KubeConfigError(f"kubeconfig {path} does not exist")
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as err:
        raise KubeConfigError(f"cannot read kubeconfig {path}: {err.strerror or err}") from err
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "not YAML"
        raise KubeConfigError(f"kubeconfig {path} is not valid YAML{where}: {problem}") from err
    if not isinstance(doc, dict):
        raise KubeConfigError(f"kubeconfig {path} is not a YAML mapping")
    name = context or doc.get("current-context")
    if not name:
        raise KubeConfigError(f"{path}: no current-context set and no context given")
    ctx = _named(doc.get("contexts"), name, "context", path)
    cluster = _named(doc.get("clusters"), ctx.get("cluster", ""), "cluster", path)
    user = _named(doc.get("users"), ctx["user"], "user", path) if ctx.get("user") else {}
    extra = (set(user) - _HANDLED_USER_KEYS) | (set(cluster) - _HANDLED_CLUSTER_KEYS)
    if extra:
        raise Unsupported(", ".join(sorted(extra)))
    server = cluster.get("server")
    if not server:
        raise KubeConfigError(f"{path}: cluster {ctx.get('cluster')!r} has no server")
    base = path.parent
    cfg = KubeConfig(host=str(server).rstrip("/"),
                     verify_ssl=not cluster.get("insecure-skip-tls-verify", False),
                     tls_server_name=cluster.get("tls-server-name"))
    if "certificate-authority-data" in cluster:
        cfg.ssl_ca_cert = _data_file(cluster["certificate-authority-data"],
                                     "certificate-authority-data")
    elif "certificate-authority" in cluster:
        cfg.ssl_ca_cert = _file(cluster["certificate-authority"], base, "certificate-authority")
    if "client-certificate-data" in user:
        cfg.cert_file = _data_file(user["client-certificate-data"], "client-certificate-data")
    elif "client-certificate" in user:
        cfg.cert_file = _file(user["client-certificate"], base, "client-certificate")
    if "client-key-data" in user:
        cfg.key_file = _data_file(user["client-key-data"], "client-key-data")
    elif "client-key" in user:
        cfg.key_file = _file(user["client-key"], base, "client-key")
    if user.get("token"):
        cfg.token = str(user["token"])
    elif user.get("tokenFile"):
        cfg.token_file = _file(user["tokenFile"], base, "tokenFile")
        cfg.refresh_api_key_hook = True
    return cfg


def load_incluster(sa_dir: Path = SA_DIR) -> KubeConfig:
    """The pod's service account: $KUBERNETES_SERVICE_HOST/PORT, its token (re-read when
    kubelet rotates it) and CA."""
    host = os.environ.get(IN_CLUSTER_ENV, "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubeConfigError("KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT not set")
    token, ca = sa_dir / "token", sa_dir / "ca.crt"
    for f in (token, ca):
        if not f.exists():
            raise KubeConfigError(f"service account file {f} does not exist")
    if ":" in host:
        host = f"[{host}]"  # IPv6
    cfg = KubeConfig(host=f"https://{host}:{port}", ssl_ca_cert=str(ca), token_file=str(token))
    cfg.refresh_api_key_hook = True
    if not cfg._current_token():
        raise KubeConfigError(f"service account token {token} is empty")
    return cfg
