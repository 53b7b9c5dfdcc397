"""What the demo calls success: a torchrun worker restarted in place at the newest
checkpoint, and each dataset ready on every node its readers may use with no warm-up pod
Pending. (The demo's test, tests/test_demo.py, checks the same on the real cluster.)"""

from __future__ import annotations

from trainmaster.drill import DatasetNodes, InPlaceResult, Killed


def _run(**changes: object) -> InPlaceResult:
    base: dict[str, object] = dict(
        killed=Killed("pid 7 (python train.py)", "leaf-0-node-1", "lm-r0-1-x"),
        killed_at=100.0, attempt=0, attempt_after=0, pods=("a", "b"), pods_after=("a", "b"),
        container_restarts=0, torchrun_restart=1, recover_seconds=6.0, last_step_before=43,
        checkpoint_at_kill=40, resumed_from="/checkpoints/lm/step-40", resumed_step=40,
        checkpoint_at_resume=40, steps_after=45,
        losses_before=((1, 5.5), (43, 2.1)), losses_after=((41, 2.2), (45, 2.0)))
    base.update(changes)
    return InPlaceResult(**base)  # type: ignore[arg-type]


def test_a_worker_restarted_in_place_at_its_checkpoint_is_ok() -> None:
    run = _run()
    assert run.in_place and run.ok and run.lost_steps == 3
    assert run.row()["in_place"] is True


def test_a_gang_restart_by_the_operator_is_not_in_place() -> None:
    assert not _run(attempt_after=1, pods_after=("c", "d")).in_place
    assert not _run(container_restarts=1).ok
    assert not _run(attempt_after=1).ok


def test_a_resume_behind_the_newest_checkpoint_is_not_ok() -> None:
    assert not _run(resumed_step=30).ok
    assert not _run(resumed_step=None).ok
    assert not _run(steps_after=40).ok


def test_a_dataset_is_ready_only_on_every_node_with_nothing_pending() -> None:
    nodes = {"leaf-0-node-0": ("lm",), "leaf-1-node-0": ("gpt-small",)}
    ready = DatasetNodes("tinystories", {"leaf-0-node-0": "ready", "leaf-1-node-0": "ready"},
                         nodes, ())
    assert ready.ready
    assert ready.lines()[0] == ("dataset tinystories: ready on 2 of the 2 nodes its readers "
                                "may use; 0 warm-up pods Pending")
    assert "  leaf-0-node-0    ready    (readers: lm)" in ready.lines()
    assert not DatasetNodes("tinystories", {"leaf-0-node-0": "ready",
                                            "leaf-1-node-0": "warming"}, nodes, ()).ready
    assert not DatasetNodes("tinystories", {"leaf-0-node-0": "ready", "leaf-1-node-0": "ready"},
                            nodes, ("tinystories-warm-x",)).ready
    assert not DatasetNodes("tinystories", {}, {}, ()).ready
