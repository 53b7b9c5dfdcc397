"""The CrossGuard tests build components on Pulumi's mocks: a fresh event loop each module."""

from tests.pulumi_loop import event_loop_for_pulumi

__all__ = ["event_loop_for_pulumi"]
