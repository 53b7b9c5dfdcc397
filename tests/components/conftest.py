"""Every module here builds components on Pulumi's mocks: a fresh event loop each."""

from tests.pulumi_loop import event_loop_for_pulumi

__all__ = ["event_loop_for_pulumi"]
