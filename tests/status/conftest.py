"""The status view's live test runs on the operator tests' cluster and OperatorEnv."""

from tests.operator.conftest import cluster, env

__all__ = ["cluster", "env"]
