"""A real all-reduce for N processes over plain TCP, the part of torch.distributed this
example needs: rank 0 listens on MASTER_ADDR:MASTER_PORT, every other rank connects to it,
and an all-reduce is a reduce to rank 0 followed by a broadcast of the sum. Summation runs
in rank order, so every run of the same steps produces bit-identical results (which is
what lets the resume test compare losses exactly).

Any rank that dies breaks its socket; the others then fail with ConnectionError at the next
collective, which ends the whole gang, as NCCL or gloo would.
"""

from __future__ import annotations

import socket
import struct
import time

import numpy as np

_HEADER = struct.Struct("!Q")


def _send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_HEADER.pack(len(payload)) + payload)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("a peer closed its connection (did a rank die?)")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket) -> bytes:
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    return _recv_exact(sock, size)


class Group:
    """One process's membership of the gang: rank, world size and its sockets."""

    def __init__(self, rank: int, world: int, addr: str, port: int,
                 timeout: float = 300.0) -> None:
        self.rank, self.world = rank, world
        self.peers: dict[int, socket.socket] = {}
        if world == 1:
            return
        deadline = time.monotonic() + timeout
        if rank == 0:
            self._accept(addr, port, deadline)
        else:
            self._connect(addr, port, deadline)

    def _accept(self, addr: str, port: int, deadline: float) -> None:
        server = None
        while server is None:
            try:  # the headless Service's name may take a moment to resolve to this pod
                server = socket.create_server((addr, port), reuse_port=False)
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        server.settimeout(max(1.0, deadline - time.monotonic()))
        with server:
            while len(self.peers) < self.world - 1:
                conn, _ = server.accept()
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                (peer,) = struct.unpack("!I", _recv_exact(conn, 4))
                self.peers[peer] = conn

    def _connect(self, addr: str, port: int, deadline: float) -> None:
        while True:
            try:
                conn = socket.create_connection((addr, port), timeout=10)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        conn.settimeout(None)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.sendall(struct.pack("!I", self.rank))
        self.peers[0] = conn

    def all_reduce_sum(self, array: np.ndarray) -> np.ndarray:
        if self.world == 1:
            return array.copy()
        array = np.ascontiguousarray(array, dtype=np.float64)
        if self.rank == 0:
            total = array.copy()
            for peer in sorted(self.peers):
                total += np.frombuffer(_recv(self.peers[peer]), dtype=np.float64).reshape(
                    array.shape)
            for peer in sorted(self.peers):
                _send(self.peers[peer], total.tobytes())
            return total
        _send(self.peers[0], array.tobytes())
        return np.frombuffer(_recv(self.peers[0]), dtype=np.float64).reshape(array.shape).copy()

    def broadcast(self, payload: bytes) -> bytes:
        """Rank 0's bytes, on every rank."""
        if self.world == 1:
            return payload
        if self.rank == 0:
            for peer in sorted(self.peers):
                _send(self.peers[peer], payload)
            return payload
        return _recv(self.peers[0])

    def close(self) -> None:
        for sock in self.peers.values():
            sock.close()
