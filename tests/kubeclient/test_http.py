"""The lean HTTP/1.1 client: framing, keep-alive, and a server that closed an idle
connection (the request goes once more on a fresh one)."""

from __future__ import annotations

import asyncio

from trainmaster.kubeclient import HttpPool


async def _serve(replies: list[bytes], seen: list[bytes], close_after: int | None = None):  # type: ignore[no-untyped-def]
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served = 0
        while replies:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            seen.append(head + (await reader.readexactly(length) if length else b""))
            writer.write(replies.pop(0))
            await writer.drain()
            served += 1
            if close_after is not None and served >= close_after:
                break
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_content_length_chunked_and_keep_alive() -> None:
    replies = [
        b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
    ]
    seen: list[bytes] = []

    async def run() -> list[tuple[int, bytes]]:
        server = await _serve(replies, seen)
        port = server.sockets[0].getsockname()[1]
        pool = HttpPool("127.0.0.1", port, None, None, 4)
        out = []
        for method, body in (("POST", b'{"a":1}'), ("GET", None), ("DELETE", None)):
            response = await pool.request(method, "/x?y=1", b"Accept: application/json\r\n",
                                          body, 5)
            out.append((response.status, response.body))
        await pool.close()
        server.close()
        return out

    assert asyncio.run(run()) == [(201, b"{}"), (200, b"abcde"), (204, b"")]
    assert seen[0].startswith(b"POST /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:")
    assert seen[0].endswith(b'Content-Length: 7\r\n\r\n{"a":1}')


def test_a_connection_closed_while_idle_is_replaced() -> None:
    replies = [b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"] * 2
    seen: list[bytes] = []

    async def run() -> list[int]:
        server = await _serve(replies, seen, close_after=1)  # one answer per connection
        port = server.sockets[0].getsockname()[1]
        pool = HttpPool("127.0.0.1", port, None, None, 1)
        first = await pool.request("GET", "/", b"", None, 5)
        await asyncio.sleep(0.05)  # the server has closed the kept connection by now
        second = await pool.request("GET", "/", b"", None, 5)
        await pool.close()
        server.close()
        return [first.status, second.status]

    assert asyncio.run(run()) == [200, 200]
    assert len(seen) == 2


def test_a_warmed_connection_the_server_closed_unused_is_replaced() -> None:
    """kube-apiserver closes a connection that sends no request header within 32 s
    (ReadHeaderTimeout): a connection opened ahead by ``warm`` and first used later must
    be retried on a fresh one, as a reused one is."""
    accepted: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        if len(accepted) > 1:  # the first (warmed) connection is closed unused
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na")
            await writer.drain()
        writer.close()

    async def run() -> int:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = HttpPool("127.0.0.1", port, None, None, 1)
        assert await pool.warm(1) == 1
        await asyncio.sleep(0.05)  # the server has closed the warmed connection by now
        response = await pool.request("GET", "/", b"", None, 5)
        await pool.close()
        server.close()
        return response.status

    assert asyncio.run(run()) == 200
    assert len(accepted) == 2
