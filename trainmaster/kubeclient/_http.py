"""A small keep-alive HTTP/1.1 client for the many small API calls (the scheduler's binds).

Why not aiohttp for these: profiling the benchmark showed about 1.2 ms of client CPU per
Binding call through aiohttp (URL objects, header multidicts, timers, tracing hooks),
as much CPU as the API server itself spends on a bind, on a machine where both share two
cores. A request here is one formatted header block and a read of the status line,
headers and a Content-Length or chunked body, over TLS connections kept open and
reused. Watches (long streams) still go through aiohttp.

A request that fails on a pooled connection before any answer arrived is sent once more
on a fresh connection: the server may have closed it while it sat idle, and not only
after a request. A connection opened ahead (``warm``) and never used is closed by the
API server once its wait for a first request header runs out (Go's ReadHeaderTimeout,
32 s in kube-apiserver); taking one of those for a bind or an eviction without the
retry failed the call. That is safe for
every call trainmaster makes: a repeated bind answers 409 "already assigned" (which
the binder recognises as its own), lease and status writes carry a resourceVersion,
applies and patches are idempotent, and a repeated named create answers 409.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass


class HttpError(Exception):
    """No (complete) HTTP answer: connection refused or reset, timeout, bad framing."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    reason: str
    body: bytes


class _Conn:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class HttpPool:
    """Up to ``size`` connections to ``host:port``; requests beyond wait for one."""

    def __init__(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
        size: int,
    ) -> None:
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self._server_hostname = server_hostname if ssl_context is not None else None
        self._idle: list[_Conn] = []
        self._size = size
        self._slots = asyncio.Semaphore(size)
        self._host_header = f"Host: {host}:{port}\r\n".encode()
        self._closed = False

    async def _connect(self) -> _Conn:
        reader, writer = await asyncio.open_connection(
            self._host, self._port, ssl=self._ssl, server_hostname=self._server_hostname,
            limit=2**22,
        )
        return _Conn(reader, writer)

    async def warm(self, count: int) -> int:
        """Open up to ``count`` connections ahead of a burst (TLS handshakes are the
        costliest part of a first request); returns how many opened."""
        count = min(count, self._size - len(self._idle))

        async def one() -> _Conn | None:
            async with self._slots:
                try:
                    async with asyncio.timeout(10):
                        return await self._connect()
                except (OSError, TimeoutError):
                    return None

        conns = [c for c in await asyncio.gather(*(one() for _ in range(count))) if c]
        self._idle.extend(conns)
        return len(conns)

    async def request(
        self,
        method: str,
        target: str,
        headers: bytes,
        body: bytes | None,
        timeout: float,
    ) -> Response:
        """``headers``: ready "Name: value\\r\\n" lines (no Host, no Content-Length)."""
        head = b"".join((
            f"{method} {target} HTTP/1.1\r\n".encode(),
            self._host_header,
            headers,
            f"Content-Length: {len(body)}\r\n\r\n".encode() if body is not None else b"\r\n",
        ))
        payload = head + body if body is not None else head
        async with self._slots:
            for fresh in (False, True):
                conn = self._idle.pop() if self._idle and not fresh else None
                pooled = conn is not None  # warmed or used before: it may have been closed
                try:
                    # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a
                    # cancellation (trainmaster/tasks.py says when).
                    if conn is None:
                        async with asyncio.timeout(timeout):
                            conn = await self._connect()
                    conn.writer.write(payload)
                    async with asyncio.timeout(timeout):
                        response, keep = await self._read(conn, pooled)
                except _StaleConnection:
                    if conn is not None:
                        conn.close()
                    continue  # the server had closed it: once more on a new one
                except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError,
                        asyncio.LimitOverrunError) as err:
                    if conn is not None:
                        conn.close()
                    raise HttpError(f"{type(err).__name__}: {err}") from err
                except BaseException:
                    if conn is not None:
                        conn.close()
                    raise
                if keep and not self._closed:
                    self._idle.append(conn)
                else:
                    conn.close()
                return response
            raise HttpError("connection closed by the server")

    async def _read(self, conn: _Conn, pooled: bool) -> tuple[Response, bool]:
        reader = conn.reader
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError) as err:
            got = err.partial if isinstance(err, asyncio.IncompleteReadError) else b""
            if pooled and not got:
                raise _StaleConnection from err
            raise
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        status = int(parts[1])
        reason = parts[2] if len(parts) > 2 else ""
        length = -1
        chunked = False
        keep = True
        for line in lines[1:]:
            name, _, value = line.partition(":")
            lname = name.strip().lower()
            if lname == "content-length":
                length = int(value)
            elif lname == "transfer-encoding":
                chunked = "chunked" in value.lower()
            elif lname == "connection":
                keep = "close" not in value.lower()
        if status in (204, 304) or 100 <= status < 200:
            return Response(status, reason, b""), keep  # no body by definition
        if chunked:
            chunks = []
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
            body = b"".join(chunks)
        elif length >= 0:
            body = await reader.readexactly(length)
        else:
            body = await reader.read()
            keep = False
        return Response(status, reason, body), keep

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class _StaleConnection(Exception):
    pass
