"""Session fixtures: one real local control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok) for every integration test.

It runs the 500-node `bench` topology; tests make their own namespaces and clean up.
The cluster's state lives in a temporary TRAINMASTER_HOME and is stopped at the end.
Under pytest-xdist (`make test` runs several workers) each worker has its own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.helpers import ROOT, STACKS

if TYPE_CHECKING:
    from trainmaster.s3server import S3Server


# Test files that hold host-wide things (real nodes: the network slots, kube-router's one
# lock per host, the host's network namespaces compared before and after; image builds:
# their mounts) run on one xdist worker, one after the other, as in a plain `pytest` run.
# xdist's scheduler sees only node ids, so these are files: those that mark tests so.
HOST_MARKS = ("realnode", "image")
_HOST_MARK = re.compile(r"mark\.(?:realnode|image)\b")
HOST_FILES = frozenset(
    path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").rglob("test_*.py")
    if _HOST_MARK.search(path.read_text())
)


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """A file's tests on one worker (its module fixtures set up once), and every file of
    HOST_FILES on the same one. (xdist's `loadgroup` would read marks, but its group names
    are lost with pytest 9's node ids.)"""
    from xdist.scheduler import LoadScopeScheduling

    class HostScoped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = _file_of(nodeid)
            return "host" if file in HOST_FILES else file

    return HostScoped(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A realnode or image test outside HOST_FILES (marked some other way) would run beside
    the others under xdist: refuse it at collection."""
    stray = [item.nodeid for item in items
             if any(item.get_closest_marker(mark) for mark in HOST_MARKS)
             and _file_of(item.nodeid) not in HOST_FILES]
    if stray:
        raise pytest.UsageError(f"tests/conftest.py: {stray[0]} is marked {HOST_MARKS} but "
                                "its file does not say `mark.realnode` or `mark.image`")


@dataclass(frozen=True)
class LocalCluster:
    kubeconfig: Path
    state_dir: Path
    spec: Path
    nodes: int


@pytest.fixture(scope="session")
def trainmaster_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("trainmaster-home")
    old = os.environ.get("TRAINMASTER_HOME")
    os.environ["TRAINMASTER_HOME"] = str(home)
    yield home
    if old is None:
        os.environ.pop("TRAINMASTER_HOME", None)
    else:
        os.environ["TRAINMASTER_HOME"] = old


@pytest.fixture(scope="session")
def local_cluster(trainmaster_home: Path) -> Iterator[LocalCluster]:
    from trainmaster import cluster

    spec = STACKS / "bench" / "cluster.yaml"
    result = cluster.up(spec, kube_scheduler=True)
    state_dir = Path(result.record.state_dir)
    try:
        yield LocalCluster(Path(result.record.kubeconfig), state_dir, spec, result.record.nodes)
    finally:
        cluster.down_state_dir(state_dir)


@pytest.fixture()
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3-compatible server (versitygw, built from its pinned Go module: minutes the
    first time, cached after) on 127.0.0.1 over a temporary folder, stopped after the test."""
    from trainmaster import s3server
    from trainmaster.toolchain import build

    build(["versitygw"])
    with s3server.running(tmp_path_factory.mktemp("s3")) as server:
        yield server
