"""Fixtures for the operator tests: the session's local cluster, and one OperatorEnv (own
namespace, own operator) per test.

TRAINMASTER_TEST_KUBECONFIG (+ TRAINMASTER_TEST_SPEC) point the operator and launch tests at
an already running local cluster instead of starting one; handy while developing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LocalCluster
from tests.operator.kit import OperatorEnv, operator_env


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> LocalCluster:
    kubeconfig = os.environ.get("TRAINMASTER_TEST_KUBECONFIG")
    if kubeconfig:
        spec = Path(os.environ["TRAINMASTER_TEST_SPEC"])
        return LocalCluster(Path(kubeconfig), Path(kubeconfig).parent, spec, 0)
    found: LocalCluster = request.getfixturevalue("local_cluster")
    return found


@pytest.fixture()
def env(cluster: LocalCluster, tmp_path: Path) -> Iterator[OperatorEnv]:
    with operator_env(cluster.kubeconfig, cluster.spec, tmp_path) as made:
        yield made


@pytest.fixture()
def idle_env(cluster: LocalCluster, tmp_path: Path) -> Iterator[OperatorEnv]:
    """A prepared namespace without an operator: the test starts (and kills) its own."""
    with operator_env(cluster.kubeconfig, cluster.spec, tmp_path, start=False) as made:
        yield made
