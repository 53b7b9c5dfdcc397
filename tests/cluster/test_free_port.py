"""Ports for the control plane's servers come from outside the kernel's ephemeral range, where
no outgoing connection can take them between the check and the server's bind (a CI run lost
kube-apiserver to "address already in use" on a bind(0) port)."""

from __future__ import annotations

import socket

from trainmaster.cluster import free_port
from trainmaster.cluster._processes import _ephemeral_range


def test_ports_are_outside_the_ephemeral_range_and_bindable() -> None:
    low, high = _ephemeral_range()
    for _ in range(50):
        port = free_port()
        assert not low <= port <= high
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_listening_port_is_never_returned() -> None:
    held = []
    try:
        for _ in range(20):
            sock = socket.socket()
            sock.bind(("127.0.0.1", free_port()))
            sock.listen()
            held.append(sock)
        taken = {s.getsockname()[1] for s in held}
        assert all(free_port() not in taken for _ in range(200))
    finally:
        for sock in held:
            sock.close()
