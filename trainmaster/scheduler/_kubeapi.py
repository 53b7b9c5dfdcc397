"""A thin raw-JSON client over kubernetes_asyncio's connection (config, TLS, auth, pool).

Why not the generated API classes: they turn every object into model instances, which
costs about a millisecond per pod in Python, and the scheduler reads a handful of fields
of thousands of pods per second. kubernetes_asyncio still does what it does well
(kubeconfig and in-cluster config, TLS, token refresh, the aiohttp session); requests
and watch streams are plain JSON dicts.

Every call except watches waits for a token of the client-side rate limit (``qps`` /
``burst``), so the scheduler stays a polite API client however many binds it has queued.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
import kubernetes_asyncio

from ._http import HttpError, HttpPool
from ._ratelimit import TokenBucket

JSON = dict[str, Any]

SKIPPED = "SKIPPED"

TRANSIENT_STATUSES = frozenset({0, 408, 429, 500, 502, 503, 504})
"""0 means no HTTP answer at all (connection refused or reset, timeout)."""

_PATCH_TYPES = {
    "strategic": "application/strategic-merge-patch+json",
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
}


class ApiError(Exception):
    """A request failed: ``status`` is the HTTP status, 0 when there was no answer."""

    def __init__(self, status: int, reason: str, body: JSON | None = None) -> None:
        super().__init__(f"{status} {reason}".strip())
        self.status = status
        self.reason = reason
        self.body = body

    @property
    def transient(self) -> bool:
        """Worth retrying unchanged (overload, timeouts, connection trouble)."""
        return self.status in TRANSIENT_STATUSES


def _decode(status: int, reason: str, raw: bytes) -> JSON:
    try:
        decoded: Any = json.loads(raw) if raw else {}
    except ValueError:
        decoded = {"message": raw[:200].decode(errors="replace")}
    if status >= 400:
        body = decoded if isinstance(decoded, dict) else None
        message = body.get("message", "") if body else ""
        raise ApiError(status, message or reason, body)
    return decoded if isinstance(decoded, dict) else {"items": decoded}


def _ssl_context(cfg: Any) -> ssl.SSLContext | None:
    """TLS as kubernetes_asyncio sets it up: the kubeconfig's CA, client certificate,
    and insecure-skip-tls-verify."""
    if not cfg.host.startswith("https"):
        return None
    context = ssl.create_default_context(cafile=cfg.ssl_ca_cert)
    if cfg.cert_file:
        context.load_cert_chain(cfg.cert_file, keyfile=cfg.key_file)
    if not cfg.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def pod_path(namespace: str, name: str, sub: str = "") -> str:
    path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(name)}"
    return f"{path}/{sub}" if sub else path


class KubeApi:
    """Raw JSON requests and watch streams against one API server."""

    def __init__(self, cfg: Any, limiter: TokenBucket | None = None) -> None:
        """``cfg``: a loaded ``kubernetes_asyncio.client.Configuration``."""
        self._cfg = cfg
        self._host: str = cfg.host.rstrip("/")
        self._server_hostname: str | None = cfg.tls_server_name or None
        self._proxy: str | None = cfg.proxy or None
        self._ssl = _ssl_context(cfg)
        size = int(cfg.connection_pool_maxsize or 64)
        url = urlsplit(self._host)
        self._pool = None
        if not self._proxy and url.hostname:
            port = url.port or (443 if url.scheme == "https" else 80)
            self._pool = HttpPool(url.hostname, port, self._ssl,
                                  self._server_hostname or url.hostname, size)
        # Watches (long streams) use aiohttp. Not kubernetes_asyncio's own session: its
        # trust_env=True costs two thread-pool hops per request (netrc, proxy lookups).
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=size, ssl=self._ssl or False),
            trust_env=False,
            read_bufsize=2**21,
        )
        self._limiter = limiter
        self._auth: dict[str, str] | None = None
        self._user_agent = "trainmaster-scheduler"

    @classmethod
    async def connect(
        cls,
        kubeconfig: Path | None = None,
        *,
        pool: int = 64,
        qps: float | None = None,
        burst: int | None = None,
    ) -> KubeApi:
        """``kubeconfig`` if given, else $KUBECONFIG, else the in-cluster service account
        when running in a pod, else ~/.kube/config. ``qps=None``: no client-side limit."""
        cfg = kubernetes_asyncio.client.Configuration()
        env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
        if kubeconfig is None and not env and "KUBERNETES_SERVICE_HOST" in os.environ:
            kubernetes_asyncio.config.load_incluster_config(client_configuration=cfg)
        else:
            path = kubeconfig or Path(env or Path.home() / ".kube" / "config")
            await kubernetes_asyncio.config.load_kube_config(
                config_file=str(path), client_configuration=cfg
            )
        cfg.connection_pool_maxsize = pool
        limiter = None if qps is None else TokenBucket(qps, burst or max(1, int(qps)))
        return cls(cfg, limiter)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
        await self._session.close()

    async def __aenter__(self) -> KubeApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- plumbing ---------------------------------------------------------------------

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        if self._auth is None or self._cfg.refresh_api_key_hook is not None:
            auth: dict[str, str] = {}
            for setting in (await self._cfg.auth_settings()).values():
                if setting.get("in") == "header" and setting.get("value"):
                    auth[setting["key"]] = setting["value"]
            if not auth and self._cfg.username:
                auth["authorization"] = self._cfg.get_basic_auth_token()
            self._auth = auth
        headers = {"Accept": "application/json", "User-Agent": self._user_agent, **self._auth}
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
        limited: bool = True,
    ) -> JSON:
        """One call; the decoded JSON answer, or ``ApiError``."""
        if limited and self._limiter is not None:
            await self._limiter.acquire()
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = await self._headers(content_type if data is not None else None)
        if self._pool is not None:
            target = path + ("?" + urlencode(params) if params else "")
            lines = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode()
            try:
                response = await self._pool.request(method, target, lines, data, timeout)
            except HttpError as err:
                raise ApiError(0, str(err)) from err
            return _decode(response.status, response.reason, response.body)
        try:
            async with self._session.request(
                method,
                self._host + path,
                params=params,
                data=data,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=timeout),
                server_hostname=self._server_hostname,
                proxy=self._proxy,
            ) as resp:
                raw = await resp.read()
                status = resp.status
                reason = resp.reason or ""
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
            raise ApiError(0, f"{type(err).__name__}: {err}") from err
        return _decode(status, reason, raw)

    async def warm(self, connections: int) -> int:
        """Open connections for the coming binds while other work is in flight."""
        return 0 if self._pool is None else await self._pool.warm(connections)

    async def get(self, path: str, params: Mapping[str, str] | None = None) -> JSON:
        return await self.request("GET", path, params=params, limited=False)

    async def post(self, path: str, body: Any) -> JSON:
        return await self.request("POST", path, body=body)

    async def put(self, path: str, body: Any) -> JSON:
        return await self.request("PUT", path, body=body)

    async def patch(self, path: str, body: Any, patch_type: str = "strategic") -> JSON:
        return await self.request("PATCH", path, body=body, content_type=_PATCH_TYPES[patch_type])

    async def delete(self, path: str, body: Any = None) -> JSON:
        return await self.request("DELETE", path, body=body)

    async def watch(
        self,
        path: str,
        params: Mapping[str, str],
        timeout_seconds: int = 300,
        skip: Callable[[bytes], str | None] | None = None,
    ) -> AsyncIterator[tuple[str, JSON]]:
        """``(type, object)`` per watch event until the server ends the stream.

        An ``ERROR`` event (e.g. 410 Gone: the resource version is too old) is raised
        as ``ApiError``; so is a connection that fails or stalls past the timeout.
        ``skip(line)`` may look at an event's raw JSON first: if it returns a resource
        version, the event is not decoded and comes out as ``("SKIPPED", {metadata:
        {resourceVersion}})`` (decoding is most of a watch's CPU).
        """
        query = {**params, "watch": "true", "timeoutSeconds": str(timeout_seconds),
                 "allowWatchBookmarks": "true"}
        headers = await self._headers(None)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=timeout_seconds + 30)
        try:
            async with self._session.get(
                self._host + path,
                params=query,
                headers=headers,
                timeout=timeout,
                server_hostname=self._server_hostname,
                proxy=self._proxy,
            ) as resp:
                if resp.status >= 400:
                    raw = await resp.read()
                    try:
                        message = json.loads(raw).get("message", "")
                    except ValueError:
                        message = raw[:200].decode(errors="replace")
                    raise ApiError(resp.status, message or resp.reason or "")
                async for line in resp.content:
                    if not line.strip():
                        continue
                    if skip is not None:
                        version = skip(line)
                        if version is not None:
                            yield SKIPPED, {"metadata": {"resourceVersion": version}}
                            continue
                    event = json.loads(line)
                    kind = event.get("type", "")
                    obj = event.get("object") or {}
                    if kind == "ERROR":
                        raise ApiError(int(obj.get("code") or 500), obj.get("message", ""), obj)
                    yield kind, obj
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as err:
            raise ApiError(0, f"watch {path}: {type(err).__name__}: {err}") from err
