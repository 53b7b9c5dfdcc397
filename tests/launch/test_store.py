"""The elected c10d store of an elastic torchrun gang (trainmaster.launch._store), with real
sockets on loopback: a pod joins the first store that answers, the lowest live pod hosts,
a pod waits for a lower one that has not started its store, a lost store is skipped, and
the torchrun command gets the endpoint and an explicit is_host."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from trainmaster.cluster import free_port
from trainmaster.launch._store import (
    Election,
    StoreCandidates,
    StoreError,
    elect,
    with_endpoint,
)


@pytest.fixture
def port() -> int:
    return free_port()


def _table(port: int, index: int) -> StoreCandidates:
    """Three pods on loopback: pod i is 127.0.0.1i (all of 127/8 is this machine)."""
    return StoreCandidates(f"127.0.0.1{{index}}:{port}", 3, index)


def _at(index: int, port: int) -> tuple[str, int]:
    return f"127.0.0.1{index}", port


@pytest.fixture
def listener() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    yield opened
    for sock in opened:
        sock.close()


def _serve(address: tuple[str, int], opened: list[socket.socket]) -> socket.socket:
    sock = socket.create_server(address)
    opened.append(sock)
    return sock


def test_the_lowest_pod_hosts_when_no_store_answers(port: int) -> None:
    assert elect(_table(port, 0)) == Election(0, *_at(0, port), is_host=True)


def test_a_pod_joins_the_first_store_that_answers(
        port: int, listener: list[socket.socket]) -> None:
    _serve(_at(1, port), listener)  # pod 0 is gone; pod 1 hosts
    assert elect(_table(port, 0)) == Election(1, *_at(1, port), is_host=False)
    assert elect(_table(port, 2)) == Election(1, *_at(1, port), is_host=False)


def test_a_pod_waits_for_a_lower_pod_to_start_its_store(
        port: int, listener: list[socket.socket]) -> None:
    threading.Timer(0.6, _serve, (_at(0, port), listener)).start()
    began = time.monotonic()
    elected = elect(_table(port, 2), look_seconds=0.1, deadline_seconds=10)
    assert elected == Election(0, *_at(0, port), is_host=False)
    assert time.monotonic() - began >= 0.5


def test_a_pod_whose_name_does_not_resolve_is_skipped(port: int) -> None:
    # Pod 0 is pending (no address yet): pod 1 is the lowest that exists, and hosts.
    def resolve(host: str) -> bool:
        return False

    assert elect(_table(port, 1), resolve=resolve, look_seconds=0.05).is_host


def test_a_lost_store_hosts_only_once_it_answers_again(port: int) -> None:
    # Pod 0's store was lost; its name still resolves (the Job's replacement takes it):
    # the survivors 1 and 2 agree on pod 1 instead of waiting for pod 0.
    lost = frozenset({0})
    assert elect(_table(port, 1), lost=lost) == Election(1, *_at(1, port), True)
    with pytest.raises(TimeoutError):
        _elect_within(_table(port, 2), lost, seconds=0.3)  # waits for pod 1's store


def _elect_within(candidates: StoreCandidates, lost: frozenset[int], seconds: float) -> None:
    result: list[Election] = []
    thread = threading.Thread(target=lambda: result.append(
        elect(candidates, lost=lost, look_seconds=0.05, deadline_seconds=seconds * 10)),
        daemon=True)
    thread.start()
    thread.join(seconds)
    if not result:
        raise TimeoutError


def test_the_command_gets_the_endpoint_and_an_explicit_is_host() -> None:
    base = ["torchrun", "--nnodes=1:3", "--rdzv-backend=c10d", "--rdzv-endpoint=pod-0.svc:29400",
            "--rdzv-conf=is_host=1,last_call_timeout=5", "train.py", "--lr=1"]
    joined = with_endpoint(base, Election(2, "pod-2.svc", 29400, is_host=False))
    assert joined == ["torchrun", "--nnodes=1:3", "--rdzv-backend=c10d",
                      "--rdzv-endpoint=pod-2.svc:29400",
                      "--rdzv-conf=last_call_timeout=5,is_host=0", "train.py", "--lr=1"]
    bare = with_endpoint(["torchrun", "train.py"], Election(0, "h", 1, is_host=True))
    assert bare == ["torchrun", "--rdzv-endpoint=h:1", "--rdzv-conf=is_host=1", "train.py"]


@pytest.mark.parametrize(("env", "names"), [
    ({"TRAINMASTER_RDZV_CANDIDATES": "pod.svc:29400"}, "TRAINMASTER_RDZV_CANDIDATES"),
    ({"TRAINMASTER_RDZV_CANDIDATES": "pod-{index}.svc"}, "TRAINMASTER_RDZV_CANDIDATES"),
    ({"TRAINMASTER_RDZV_CANDIDATES": "pod-{index}.svc:1", "TRAINMASTER_RDZV_NODES": "x"},
     "TRAINMASTER_RDZV_NODES"),
    ({"TRAINMASTER_RDZV_CANDIDATES": "pod-{index}.svc:1", "TRAINMASTER_RDZV_NODES": "2",
      "JOB_COMPLETION_INDEX": "2"}, "JOB_COMPLETION_INDEX"),
])
def test_bad_settings_name_the_variable(env: dict[str, str], names: str) -> None:
    with pytest.raises(StoreError, match=names):
        StoreCandidates.from_env(env)


def test_settings_from_the_pods_environment() -> None:
    assert StoreCandidates.from_env({}) is None  # not an elastic torchrun gang
    store = StoreCandidates.from_env({
        "TRAINMASTER_RDZV_CANDIDATES": "llm-r1-{index}.llm.ns.svc:29400",
        "TRAINMASTER_RDZV_NODES": "4", "JOB_COMPLETION_INDEX": "3",
        "TRAINMASTER_RDZV_REELECT": "5"})
    assert store is not None and (store.nodes, store.index, store.reelect) == (4, 3, 5)
    assert store.address(2) == ("llm-r1-2.llm.ns.svc", 29400)
