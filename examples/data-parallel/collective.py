"""A real all-reduce for N processes over plain TCP, the part of torch.distributed this
example needs: rank 0 listens on MASTER_ADDR:MASTER_PORT, every other rank connects to it,
and an all-reduce is a reduce to rank 0 followed by a broadcast of the sum. Summation runs
in rank order, so every run of the same steps produces bit-identical results (which is
what lets the resume test compare losses exactly).

Like gloo and NCCL, the gang bootstraps over MASTER_ADDR (the pod network) and then moves
its data to the interface GLOO_SOCKET_IFNAME names (`trainmaster launch` sets it to the
pod's rail interfaces): rank 0 listens on its address there and tells the others over the
bootstrap connections, and each connects from its own address on that interface. Without
GLOO_SOCKET_IFNAME (or with no address on it) the data stays on the bootstrap connections.

Any rank that dies breaks its socket; the others then fail with ConnectionError at the next
collective, which ends the whole gang, as NCCL or gloo would.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import time
from collections.abc import Mapping

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


def interface_address(name: str) -> str | None:
    """The IPv4 address of interface `name`, or None (no such interface, or no address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            raw = fcntl.ioctl(sock.fileno(), 0x8915,  # SIOCGIFADDR
                              struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(raw[20:24])


def data_address(env: Mapping[str, str] | None = None) -> str | None:
    """This rank's address on the first interface GLOO_SOCKET_IFNAME names."""
    env = os.environ if env is None else env
    names = [n for n in env.get("GLOO_SOCKET_IFNAME", "").split(",") if n]
    return interface_address(names[0]) if names else None


class Group:
    """One process's membership of the gang: rank, world size and its sockets."""

    def __init__(self, rank: int, world: int, addr: str, port: int,
                 timeout: float = 300.0, data_addr: str | None = None) -> None:
        self.rank, self.world = rank, world
        self.peers: dict[int, socket.socket] = {}
        self.data_addr: str | None = None
        """Where rank 0 serves the collective, once moved off the bootstrap connections."""
        if world == 1:
            return
        deadline = time.monotonic() + timeout
        if rank == 0:
            self._accept(addr, port, deadline)
        else:
            self._connect(addr, port, deadline)
        self._move_data(data_addr, deadline)

    def _move_data(self, local: str | None, deadline: float) -> None:
        """Rank 0 says over the bootstrap connections where its data listener is (or that it
        has none); the others connect to it from `local`; the data connections replace the
        bootstrap ones."""
        if self.rank == 0:
            server = socket.create_server((local, 0)) if local else None
            where = f"{local}:{server.getsockname()[1]}" if server else ""
            for peer in sorted(self.peers):
                _send(self.peers[peer], where.encode())
            if server is None:
                return
            bootstrap, self.peers = self.peers, {}
            server.settimeout(max(1.0, deadline - time.monotonic()))
            with server:
                while len(self.peers) < self.world - 1:
                    conn, _ = server.accept()
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    (peer,) = struct.unpack("!I", _recv_exact(conn, 4))
                    self.peers[peer] = conn
            self.data_addr = local
        else:
            where = _recv(self.peers[0]).decode()
            if not where:
                return
            host, port = where.rsplit(":", 1)
            conn = socket.create_connection((host, int(port)), timeout=10,
                                            source_address=(local, 0) if local else None)
            conn.settimeout(None)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.sendall(struct.pack("!I", self.rank))
            bootstrap, self.peers = self.peers, {0: conn}
            self.data_addr = host
        for sock in bootstrap.values():
            sock.close()

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
