"""Session fixtures: one real local control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok) for every integration test.

It runs the 500-node `bench` topology; tests make their own namespaces and clean up.
The cluster's state lives in a temporary TRAINMASTER_HOME and is stopped at the end.
Under pytest-xdist (`make test` runs several workers) each worker has its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.helpers import STACKS

if TYPE_CHECKING:
    from trainmaster.s3server import S3Server


# Tests that hold host-wide things (real nodes: the network slots, kube-router's one lock
# per host, the host's network namespaces compared before and after; image builds: their
# mounts) run on one xdist worker, one after the other, as in a plain `pytest` run.
HOST_MARKS = ("realnode", "image")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give every test an xdist group for `--dist loadgroup`: "host" for the tests above,
    else its file, so that a module's fixtures are set up once, on one worker."""
    for item in items:
        host = any(item.get_closest_marker(mark) for mark in HOST_MARKS)
        item.add_marker(pytest.mark.xdist_group("host" if host else item.nodeid.split("::")[0]))


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
