"""The torch elastic drill's reading of a pod's log (the lines examples/transformer and
torchrun's agent print, in kubelet's CRI format): the newest worker round, the profile of
a shrink and its result. The drill itself runs on real nodes
(tests/cluster/test_real_torch_elastic.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from trainmaster.drill._logs import parse_cri_log
from trainmaster.drill._torch_elastic import _result, _Watch, newest_round

T0 = 1_765_000_000.0  # the fault


def _cri(lines: list[tuple[float, str]]) -> str:
    from datetime import UTC, datetime

    def stamp(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"

    return "".join(f"{stamp(T0 + dt)} stdout F {text}\n" for dt, text in lines)


SURVIVOR = _cri([
    (-30.0, "rank 0 of 2: pid 41, torchrun restart 0, gloo on tm0"),
    (-29.0, "rank 0: resumed from /checkpoints/lm/step-20 at step 20 (world size 2)"),
    (-1.0, "step 38 loss 2.3100"),
    (-0.5, "step 39 loss 2.3000"),
    (0.6, "[default] Worker group FAILED. 5/5 attempts left; will restart worker group"),
    (1.0, "[default] Rendezvous'ing worker group"),
    (6.8, "[default] Rendezvous complete for workers. Result:"),
    (7.9, "rank 0 of 1: pid 97, torchrun restart 1, gloo on tm0"),
    (8.7, "rank 0: resumed from /checkpoints/lm/step-30 at step 30 (world size 1)"),
    (9.6, "step 31 loss 2.3300"),
    (10.0, "step 32 loss 2.3200"),
])


def test_the_newest_round_and_the_shrink_profile_come_from_the_log() -> None:
    lines = parse_cri_log(SURVIVOR)
    round_ = newest_round("lm-0", lines)
    assert round_ is not None
    assert (round_.rank, round_.world) == (0, 1)
    assert round_.resumed() is not None and round_.resumed()[1] == 30  # type: ignore[index]
    assert round_.first_step() is not None and round_.first_step()[1] == 31  # type: ignore[index]
    stack: Any = SimpleNamespace(checkpoints=None)
    watch = _Watch(stack, 1, T0, checkpoint_at_resume=30, resume_seen=True)
    result = _result("elastic-shrink", "n1", "killed", T0, 2, 1, {"lm-0": (lines, round_)},
                     30, watch, operator=41.0)
    row = result.row()
    assert row["recover_seconds"] == 9.6
    assert (row["noticed_seconds"], row["rendezvous_seconds"], row["workers_seconds"],
            row["loaded_seconds"]) == (0.6, 6.8, 7.9, 8.7)
    assert (row["resumed_step"], row["lost_steps"], row["world_size_after"]) == (30, 9, 1)
    assert result.ok
    # A resume older than the checkpoint on disk at the fault is not a recovery.
    late = _result("elastic-shrink", "n1", "killed", T0, 2, 1, {"lm-0": (lines, round_)},
                   40, watch)
    assert not late.ok


def test_two_pods_each_with_a_rank_0_of_the_same_size_are_a_split_gang() -> None:
    from trainmaster.drill._torch_elastic import split_worlds

    # What two real nodes did with 3 s keep-alives at load 20: each pod trained alone.
    alone = parse_cri_log(_cri([(0.0, "rank 0 of 1: pid 21, torchrun restart 0, gloo on x")]))
    rounds: Any = {"lm-0": (alone, newest_round("lm-0", alone)),
                   "lm-1": (alone, newest_round("lm-1", alone))}
    assert split_worlds(rounds) == "a rank 0 of 1 on each of lm-0, lm-1"
    peer = parse_cri_log(_cri([(0.0, "rank 1 of 2: pid 22, torchrun restart 1, gloo on x")]))
    rounds["lm-1"] = (peer, newest_round("lm-1", peer))
    assert split_worlds(rounds) == ""
