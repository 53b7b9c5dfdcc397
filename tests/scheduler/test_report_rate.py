"""How often a waiting gang's report is re-written (runtime/report.py): a new message at
most every ``interval``; a message whose words are the same and only its figures changed
(the free capacity it quotes) at most every ``REFRESH_SECONDS``."""

from __future__ import annotations

from typing import Any

from tests.scheduler.builders import make_pod
from trainmaster.scheduler.runtime.report import REFRESH_SECONDS, Reporter


class _Written:
    """Counts what the Reporter hands to its recorder (the writes themselves go to the
    real API server in the scheduler's live tests, e.g. test_why_live)."""

    def __init__(self) -> None:
        self.pods: list[str] = []

    def pod_unschedulable(self, namespace: str, name: str, message: str, *args: Any,
                          **kwargs: Any) -> None:
        self.pods.append(message)

    def event(self, *args: Any, **kwargs: Any) -> None:
        pass


def test_figures_only_changes_are_rewritten_at_the_refresh_and_new_words_at_the_interval(
) -> None:
    now = [0.0]
    written = _Written()
    reporter = Reporter(written, 5.0, clock=lambda: now[0])  # type: ignore[arg-type]
    pods = [make_pod("p0", gpus=8), make_pod("p1", gpus=8)]

    def report(message: str, at: float) -> bool:
        now[0] = at
        return reporter.unschedulable("ns/g", pods, message, None)

    assert report("needs 32 GPUs in one leaf; the largest has 24 free", 0.0)
    assert not report("needs 32 GPUs in one leaf; the largest has 24 free", 100.0)  # same
    # The same words with other figures: not before the refresh.
    assert not report("needs 32 GPUs in one leaf; the largest has 28 free", 10.0)
    assert not report("needs 32 GPUs in one leaf; the largest has 16 free", REFRESH_SECONDS - 1)
    assert report("needs 32 GPUs in one leaf; the largest has 16 free", REFRESH_SECONDS)
    # Other words: after the interval (5 s) since the last write.
    assert not report("quota: queue research has 0 of 32 GPUs left", REFRESH_SECONDS + 4)
    assert report("quota: queue research has 0 of 32 GPUs left", REFRESH_SECONDS + 5)
    assert len(written.pods) == 3 * len(pods)


def test_new_words_held_back_by_the_interval_are_written_when_it_is_up() -> None:
    now = [0.0]
    written = _Written()
    reporter = Reporter(written, 5.0, clock=lambda: now[0])  # type: ignore[arg-type]
    pods = [make_pod("p0", gpus=8)]
    assert reporter.unschedulable("ns/g", pods, "gang is incomplete: ns/g", None)
    now[0] = 1.0
    assert not reporter.unschedulable("ns/g", pods, "fits in no single leaf: 0 free", None)
    assert reporter.next_due() == 5.0
    now[0] = 4.9
    assert reporter.flush() == 0
    now[0] = 5.0
    assert reporter.flush() == 1
    assert written.pods == ["gang is incomplete: ns/g", "fits in no single leaf: 0 free"]
    assert reporter.next_due() is None
    # A newer attempt replaces what was held: back to the written words, nothing held.
    now[0] = 6.0
    assert not reporter.unschedulable("ns/g", pods, "quota: queue q has 0 GPUs left", None)
    assert not reporter.unschedulable("ns/g", pods, "fits in no single leaf: 0 free", None)
    assert reporter.next_due() is None
    # A figures-only change is not held (it waits for the refresh or the next attempt).
    assert not reporter.unschedulable("ns/g", pods, "fits in no single leaf: 8 free", None)
    assert reporter.next_due() is None
    # A gang placed or gone drops what was held for it.
    assert not reporter.unschedulable("ns/g", pods, "quota: queue q has 0 GPUs left", None)
    reporter.forget("ns/g")
    assert reporter.next_due() is None
