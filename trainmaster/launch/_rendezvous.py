"""The elastic launchers' rendezvous, among the ranks themselves: every launcher of an
elastic gang serves its state on the rendezvous port (TRAINMASTER_RDZV_PORT, 29400 as
torchrun's c10d store) of its pod's stable name under the job's headless Service, and
probes its peers' there. No API server, no Kubernetes rights: the NetworkPolicy that lets
the gang's pods talk to each other is all it needs.

A *round* is one membership: its number, its members (launcher indices, the leader first:
position = RANK) and the checkpoint it resumes from. The leader publishes rounds; the
others adopt the newest round they see. Who leads is computed by every launcher from its
own look: the first member of the newest round seen, while it answers; else the lowest
index that answers. Messages are one JSON line each way.
Standard library only: this runs in the launcher bundle.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

IDLE, RUNNING, FAILED, SUCCEEDED = "idle", "running", "failed", "succeeded"
"""What a launcher's training command is doing."""


@dataclass(frozen=True)
class Round:
    number: int
    members: tuple[int, ...]
    """Launcher indices, leader first: a member's position is its RANK."""
    resume: str = ""
    """The checkpoint every rank of this round resumes from ("" = the start)."""
    done: bool = False
    """The training command finished on the leader: nobody starts it again."""

    def to_json(self) -> dict[str, Any]:
        return {"number": self.number, "members": list(self.members), "resume": self.resume,
                "done": self.done}

    @classmethod
    def from_json(cls, raw: Any) -> Round | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("number"), int):
            return None
        members = tuple(int(m) for m in raw.get("members") or [])
        return cls(raw["number"], members, str(raw.get("resume") or ""),
                   bool(raw.get("done")))


def newer(a: Round | None, b: Round | None) -> Round | None:
    if a is None:
        return b
    if b is None:
        return a
    return b if (b.number, b.done) > (a.number, a.done) else a


@dataclass(frozen=True)
class PeerState:
    index: int
    child: str
    round: Round | None


def leader_of(rounds: Mapping[int, Round | None], live: set[int]) -> int:
    """The leader as seen from one look: `rounds` are the rounds each live launcher holds.
    Sticky: a round's first member keeps leading while it answers, so rank 0 (the only
    checkpoint writer) never changes hands under a running round."""
    newest: Round | None = None
    for held in rounds.values():
        newest = newer(newest, held)
    if newest is not None and newest.members and newest.members[0] in live:
        return newest.members[0]
    return min(live)


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        server: _Server = self.server  # type: ignore[assignment]
        try:
            self.rfile.readline(4096)
            self.wfile.write((json.dumps(server.state()) + "\n").encode())
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], state: Callable[[], dict[str, Any]]) -> None:
        self.state = state
        super().__init__(address, _Handler)


class Rendezvous:
    """This launcher's side: serve our state, look at the peers'."""

    def __init__(self, index: int, peers: Mapping[int, tuple[str, int]],
                 bind: tuple[str, int], connect_timeout: float = 1.0) -> None:
        self.index = index
        self.peers = dict(peers)
        self.connect_timeout = connect_timeout
        self.child = IDLE
        self.round: Round | None = None
        self._lock = threading.Lock()
        self._server = _Server(bind, self._state)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(self.peers)))

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._pool.shutdown(wait=False)

    def set(self, child: str | None = None, round_: Round | None = None) -> None:
        with self._lock:
            if child is not None:
                self.child = child
            if round_ is not None:
                self.round = round_

    def _state(self) -> dict[str, Any]:
        with self._lock:
            return {"index": self.index, "child": self.child,
                    "round": self.round.to_json() if self.round else None}

    def _ask(self, index: int) -> PeerState | None:
        try:
            with socket.create_connection(self.peers[index], self.connect_timeout) as sock:
                sock.settimeout(self.connect_timeout)
                sock.sendall(b"state\n")
                line = sock.makefile("rb").readline(65536)
            raw = json.loads(line)
        except (OSError, ValueError):
            return None  # not there (yet), or not answering: a missed heartbeat
        if not isinstance(raw, dict) or raw.get("index") != index:
            return None
        return PeerState(index, str(raw.get("child") or IDLE), Round.from_json(raw.get("round")))

    def look(self) -> dict[int, PeerState]:
        """Every peer that answers now, ourselves included (probed in parallel: one dead
        peer costs one connect timeout, not one per peer)."""
        others = [i for i in self.peers if i != self.index]
        answers = self._pool.map(self._ask, others)
        seen = {a.index: a for a in answers if a is not None}
        with self._lock:
            seen[self.index] = PeerState(self.index, self.child, self.round)
        return seen
