"""The UI's browser tests run on the operator tests' cluster and OperatorEnv."""

from tests.operator.conftest import cluster, env

__all__ = ["cluster", "env"]
