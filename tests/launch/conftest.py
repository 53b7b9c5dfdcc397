"""The launch tests share the operator tests' cluster fixture."""

from tests.operator.conftest import cluster

__all__ = ["cluster"]
