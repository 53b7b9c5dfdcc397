"""Where an elastic torchrun gang's c10d rendezvous store runs, chosen so that the gang
survives the loss of any one pod.

torchrun's c10d rendezvous keeps its state in a TCPStore that the agent on the
`--rdzv-endpoint` host serves; when that agent dies, every other agent fails with it
(pytorch/pytorch#67742). So a fixed endpoint (pod 0's DNS name) ends an elastic gang when
pod 0 is lost; and a Service name that resolves to every pod is worse: torch decides "am I
the host?" by matching the endpoint's addresses against its own, so every agent would host
a store of its own (split worlds).

Instead the launcher picks the endpoint each time it starts torchrun (see `elect`): the
first pod, in index order, whose store already answers; if none answers, the lowest-index
pod whose name resolves, which hosts (`is_host=1`, explicit: no heuristics). When torchrun
then fails and the store it used no longer answers, the launcher elects again and starts
torchrun again: the survivors re-rendezvous on the next pod's store at the smaller size, and
a pod that comes back (the Job replaces it) finds that store and joins it (the gang grows).

Enabled by TRAINMASTER_RDZV_CANDIDATES (`<gang>-{index}.<job>.<ns>.svc:29400`) and
TRAINMASTER_RDZV_NODES (the gang's most pods), which an elastic torchrun job's pods get.
Standard library only (launcher bundle).
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from trainmaster.api import RDZV_CANDIDATES_ENV, RDZV_NODES_ENV, RDZV_REELECT_ENV

CANDIDATES_ENV = RDZV_CANDIDATES_ENV
NODES_ENV = RDZV_NODES_ENV
REELECT_ENV = RDZV_REELECT_ENV
"""How many times the launcher may start torchrun again on a new store (the job's
restartPolicy.maxRestarts); default 3."""


class StoreError(ValueError):
    """A bad store setting in the environment (names the variable)."""


@dataclass(frozen=True)
class StoreCandidates:
    template: str
    """`host:port` with `{index}`: pod i's store address."""
    nodes: int
    index: int
    """This pod's index (JOB_COMPLETION_INDEX)."""
    reelect: int = 3

    def address(self, index: int) -> tuple[str, int]:
        host, _, port = self.template.format(index=index).rpartition(":")
        return host, int(port)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> StoreCandidates | None:
        template = env.get(CANDIDATES_ENV, "")
        if not template:
            return None
        _, sep, port = template.format(index=0).rpartition(":")
        if not sep or not port.isdigit() or "{index}" not in template:
            raise StoreError(f"{CANDIDATES_ENV}={template!r}: expected host:port with "
                             "{index}, e.g. gang-{index}.job.ns.svc:29400")
        nodes, index = env.get(NODES_ENV, ""), env.get("JOB_COMPLETION_INDEX", "")
        if not nodes.isdigit() or int(nodes) < 1:
            raise StoreError(f"{NODES_ENV}={nodes!r}: expected the gang's most pods")
        if not index.isdigit() or int(index) >= int(nodes):
            raise StoreError(f"JOB_COMPLETION_INDEX={index!r}: expected this pod's index, "
                             f"below {NODES_ENV}={nodes}")
        reelect = env.get(REELECT_ENV, "3")
        return cls(template, int(nodes), int(index), int(reelect) if reelect.isdigit() else 3)


@dataclass(frozen=True)
class Election:
    index: int
    """The pod that hosts the store."""
    host: str
    port: int
    is_host: bool

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"


def serving(address: tuple[str, int], timeout: float = 0.5) -> bool:
    """A store answers at `address` (a TCP connection opens)."""
    try:
        with socket.create_connection(address, timeout=timeout):
            return True
    except OSError:
        return False


def resolves(host: str) -> bool:
    """`host` has an address: the pod exists (the headless Service publishes it)."""
    try:
        return bool(socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP))
    except OSError:
        return False


def elect(candidates: StoreCandidates,
          probe: Callable[[tuple[str, int]], bool] = serving,
          resolve: Callable[[str], bool] = resolves,
          lost: frozenset[int] = frozenset(),
          look_seconds: float = 0.5, deadline_seconds: float = 600.0) -> Election:
    """The store torchrun should use now. Waits (a look every `look_seconds`) while the
    pod that should host has not started its store yet. `lost`: pods whose store this pod
    lost; their names may still resolve (a DNS cache, or the Job's replacement pod, which
    takes the same name), so they host only once they answer again. After
    `deadline_seconds` (torchrun's own join timeout) this pod hosts rather than wait
    forever."""
    start = time.monotonic()
    while True:
        lowest: int | None = None
        for index in range(candidates.nodes):
            address = candidates.address(index)
            if index != candidates.index and probe(address):
                return Election(index, *address, is_host=False)
            if lowest is None and (index == candidates.index or (
                    index not in lost and resolve(address[0]))):
                lowest = index
        if lowest == candidates.index or time.monotonic() - start >= deadline_seconds:
            return Election(candidates.index, *candidates.address(candidates.index),
                            is_host=True)
        time.sleep(look_seconds)


def with_endpoint(command: list[str], election: Election) -> list[str]:
    """The torchrun command with its `--rdzv-endpoint` set to the elected store and
    `is_host` in its `--rdzv-conf` (added after `torchrun` when absent)."""
    out: list[str] = []
    conf_seen = endpoint_seen = False
    host_flag = f"is_host={int(election.is_host)}"
    for word in command:
        flag, sep, value = word.partition("=")
        if sep and flag in ("--rdzv-endpoint", "--rdzv_endpoint"):
            word, endpoint_seen = f"{flag}={election.endpoint}", True
        elif sep and flag in ("--rdzv-conf", "--rdzv_conf"):
            kept = [kv for kv in value.split(",") if kv and not kv.startswith("is_host=")]
            word, conf_seen = f"{flag}={','.join([*kept, host_flag])}", True
        out.append(word)
    extra = ([] if endpoint_seen else [f"--rdzv-endpoint={election.endpoint}"]) + \
        ([] if conf_seen else [f"--rdzv-conf={host_flag}"])
    return [out[0], *extra, *out[1:]] if extra else out


def is_torchrun(command: list[str]) -> bool:
    return bool(command) and command[0].rsplit("/", 1)[-1] == "torchrun"


def say(message: str) -> None:
    print(f"trainmaster launch: rendezvous store: {message}", file=sys.stderr, flush=True)
