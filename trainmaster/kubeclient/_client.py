"""The async raw-JSON client every trainmaster component uses (scheduler, operator, bench,
apply, status, the demo).

Why not the generated API classes: they turn every object into model instances, which
costs about a millisecond per pod in Python, and the scheduler reads a handful of fields
of thousands of pods per second. Kubeconfig and in-cluster config come from a small
loader (``_fastconfig``; kubernetes_asyncio only for the shapes it leaves out);
requests and watch streams are plain JSON dicts, and every failure is one ``ApiError``.

Every call except reads and watches waits for a token of the client-side rate limit
(``qps`` / ``burst``), so a component stays a polite API client however many writes it
has queued.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import aiohttp

from trainmaster.api import FIELD_MANAGER

from ._errors import ApiError
from ._http import HttpError, HttpPool
from ._kubeconfig import load_configuration
from ._paths import KNOWN_PLURALS, api_path, object_path
from ._ratelimit import TokenBucket

JSON = dict[str, Any]

SKIPPED = "SKIPPED"

_PATCH_TYPES = {
    "strategic": "application/strategic-merge-patch+json",
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}


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


class Kube:
    """Raw JSON requests and watch streams against one API server."""

    def __init__(self, cfg: Any, limiter: TokenBucket | None = None,
                 user_agent: str = "trainmaster") -> None:
        """``cfg``: a ``KubeConfig`` or a kubernetes_asyncio ``Configuration``."""
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
        self._user_agent = user_agent
        self._resources: dict[tuple[str, str], tuple[str, bool]] = {}

    @classmethod
    async def connect(
        cls,
        kubeconfig: Path | None = None,
        *,
        pool: int = 64,
        qps: float | None = None,
        burst: int | None = None,
        user_agent: str = "trainmaster",
    ) -> Kube:
        """A client by the kubeconfig rule (``choose_kubeconfig``). ``qps=None``: no
        client-side rate limit; else a token bucket of ``qps`` with ``burst``."""
        cfg = await load_configuration(kubeconfig)
        cfg.connection_pool_maxsize = pool
        limiter = None if qps is None else TokenBucket(qps, burst or max(1, int(qps)))
        return cls(cfg, limiter, user_agent)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
        await self._session.close()

    async def __aenter__(self) -> Kube:
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

    async def get_text(self, path: str, timeout: float = 30.0) -> str:
        """A non-JSON answer as text (the API server's own ``/metrics``); ``ApiError``
        on a failed call."""
        headers = await self._headers(None)
        try:
            async with self._session.get(
                self._host + path,
                headers={**headers, "Accept": "text/plain"},
                timeout=aiohttp.ClientTimeout(total=timeout),
                server_hostname=self._server_hostname,
                proxy=self._proxy,
            ) as resp:
                raw = await resp.read()
                status, reason = resp.status, resp.reason or ""
        except (TimeoutError, aiohttp.ClientError, OSError) as err:
            raise ApiError(0, f"{type(err).__name__}: {err}") from err
        if status >= 400:
            _decode(status, reason, raw)  # raises, with the server's message
        return raw.decode(errors="replace")

    async def post(self, path: str, body: Any) -> JSON:
        return await self.request("POST", path, body=body)

    async def put(self, path: str, body: Any) -> JSON:
        return await self.request("PUT", path, body=body)

    async def patch(self, path: str, body: Any, patch_type: str = "merge") -> JSON:
        """``patch_type``: merge (JSON merge patch), strategic, json or apply."""
        return await self.request("PATCH", path, body=body, content_type=_PATCH_TYPES[patch_type])

    async def list(self, path: str, selector: str | None = None,
                   params: Mapping[str, str] | None = None) -> list[JSON]:
        """The items of a collection (one page: no ``limit``), by label ``selector``."""
        query = {**(params or {}), **({"labelSelector": selector} if selector else {})}
        return list((await self.get(path, query or None)).get("items") or [])

    async def delete(
        self,
        path: str,
        body: Any = None,
        *,
        propagation: str | None = None,
        grace: int | None = None,
        missing_ok: bool = False,
    ) -> bool:
        """Delete; False (instead of a 404 ``ApiError``) when ``missing_ok`` and it was
        already gone. ``propagation`` and ``grace`` go into the DeleteOptions body."""
        if propagation is not None or grace is not None:
            body = {"kind": "DeleteOptions", "apiVersion": "v1", **(body or {})}
            if propagation is not None:
                body["propagationPolicy"] = propagation
            if grace is not None:
                body["gracePeriodSeconds"] = grace
        try:
            await self.request("DELETE", path, body=body)
        except ApiError as err:
            if missing_ok and err.not_found:
                return False
            raise
        return True

    async def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """``(plural, namespaced)`` of a kind, by discovery (cached; see ``rediscover``)."""
        key = (api_version, kind)
        if key not in self._resources:
            prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
            try:
                listing = await self.get(prefix)
            except ApiError as err:
                if not err.not_found:
                    raise
                listing = {}
            for res in listing.get("resources") or ():
                if "/" not in res.get("name", ""):
                    found = (str(res["name"]), bool(res.get("namespaced")))
                    self._resources[(api_version, str(res.get("kind")))] = found
            if key not in self._resources:
                raise ApiError(404, f"the API server does not serve {api_version} {kind} "
                               "(is its CRD installed?)")
        return self._resources[key]

    def rediscover(self) -> None:
        """Forget what discovery found, e.g. after new CRDs were established."""
        self._resources.clear()

    async def apply(self, obj: JSON, *, force: bool = True, dry_run: bool = False) -> JSON:
        """Server-side apply as FIELD_MANAGER. ``force``: what we declare wins over hand
        edits of the same fields (drift); fields other managers own are left alone.
        ``dry_run``: the server validates, admits and returns the result, stores nothing."""
        key = (obj["apiVersion"], obj["kind"])
        if key in KNOWN_PLURALS:
            path = object_path(obj)
        else:
            plural, namespaced = await self.resource(*key)
            meta = obj["metadata"]
            path = api_path(key[0], plural, meta.get("namespace") if namespaced else None,
                            meta["name"])
        params = {"fieldManager": FIELD_MANAGER, **({"force": "true"} if force else {}),
                  **({"dryRun": "All"} if dry_run else {})}
        return await self.request("PATCH", path, params=params, body=obj,
                                  content_type=_PATCH_TYPES["apply"])

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
