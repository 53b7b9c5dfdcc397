"""Worlds to run trainmaster's components in on a real local control plane: today the
operator's (its integration tests and `trainmaster bench recovery` share it). Not used in
production; kept in the package because the recovery benchmark ships with the CLI."""

from trainmaster.testworld._operator import OperatorWorld, now_rfc3339

__all__ = ["OperatorWorld", "now_rfc3339"]
