"""Which checkpoint a starting gang resumes from, on real checkpoint directories of every
launcher kind: the newest complete one on disk when it is newer than the operator's
TRAINMASTER_RESUME_FROM, never a half-written one, and the same one on every rank."""

from __future__ import annotations

import shlex
import sys
import threading
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainmaster.launch import LaunchConfig, run_launch
from trainmaster.launch._resume import (
    DECISION_PREFIX,
    RESUME_ARGS_ENV,
    RESUME_FROM_ENV,
    RESUME_TEMPLATE_ENV,
    plan_start,
)
from trainmaster.objects._launch_args import DEFAULTS
from trainmaster.objects._launch_args import resume_values as operator_resume_values


@dataclass(frozen=True)
class Kind:
    """How one launcher kind's checkpoints look on disk, complete or being written."""

    name: str
    launcher: str
    entry: Callable[[int], str]
    complete: Callable[[Path, int], None]
    partial: Callable[[Path, int], None]
    """A checkpoint of that step whose writer has not finished (no completion evidence)."""


def _shards(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for i in range(2):
        (path / f"shard-{i}.distcp").write_bytes(b"x" * 64)


def _dcp_complete(root: Path, step: int) -> None:
    _shards(root / f"checkpoint-{step}")
    (root / f"checkpoint-{step}" / ".metadata").write_bytes(b"meta")  # written last


def _zip_complete(root: Path, step: int) -> None:
    with zipfile.ZipFile(root / f"step_{step}.pt", "w") as archive:  # torch.save's format
        archive.writestr("archive/data.pkl", b"weights" * 100)


def _zip_partial(root: Path, step: int) -> None:
    _zip_complete(root, step)
    path = root / f"step_{step}.pt"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # the central directory is not written yet


def _deepspeed_complete(root: Path, step: int) -> None:
    _shards(root / f"global_step{step}")
    (root / "latest").write_text(f"global_step{step}")  # DeepSpeed's pointer, written last


def _megatron_complete(root: Path, step: int) -> None:
    _shards(root / f"iter_{step:07d}")
    (root / "latest_checkpointed_iteration.txt").write_text(str(step))


def _plain_complete(root: Path, step: int) -> None:
    # examples/data-parallel: step-N.tmp/ is filled, marked COMPLETE, renamed to step-N/.
    _shards(root / f"step-{step}")
    (root / f"step-{step}" / "COMPLETE").touch()


def _plain_partial(root: Path, step: int) -> None:
    _shards(root / f"step-{step}.tmp")
    (root / f"step-{step}.tmp" / "COMPLETE").touch()  # marked, not yet renamed
    _shards(root / f"step-{step}")  # a writer without the rename protocol, not marked


KINDS = [
    Kind("torchrun-dcp", "torchrun", lambda s: f"checkpoint-{s}", _dcp_complete,
         lambda root, s: _shards(root / f"checkpoint-{s}")),
    Kind("torchrun-save", "torchrun", lambda s: f"step_{s}.pt", _zip_complete, _zip_partial),
    Kind("deepspeed", "deepspeed", lambda s: f"global_step{s}", _deepspeed_complete,
         lambda root, s: _shards(root / f"global_step{s}")),
    Kind("megatron", "megatron", lambda s: f"iter_{s:07d}", _megatron_complete,
         lambda root, s: _shards(root / f"iter_{s:07d}")),
    Kind("python", "python", lambda s: f"step-{s}", _plain_complete, _plain_partial),
]


def _template(kind: Kind) -> list[str]:
    return list(DEFAULTS[kind.launcher].resume)


def _args(kind: Kind, root: Path, path: str | None) -> list[str]:
    from trainmaster.launch._resume import render_resume_args

    return render_resume_args(_template(kind), kind.launcher, path, str(root))


def _env(kind: Kind, root: Path, resume_from: str | None, gang: str = "uid-1"
         ) -> dict[str, str]:
    return {
        "TRAINMASTER_JOB": "gpt", "TRAINMASTER_RESTART": "1",
        "TRAINMASTER_GANG_UID": gang,
        RESUME_FROM_ENV: resume_from or "",
        RESUME_ARGS_ENV: shlex.join(_args(kind, root, resume_from)),
        RESUME_TEMPLATE_ENV: shlex.join(_template(kind)),
    }


def _start(kind: Kind, root: Path, resume_from: str | None, gang: str = "uid-1"
           ) -> tuple[list[str], dict[str, str], tuple[str, int | None] | None]:
    """As the launch script starts the launcher: the command, then the resume arguments
    (only when the operator passed a checkpoint)."""
    command = ["train.py", "--lr=0.1", *(_args(kind, root, resume_from) if resume_from else [])]
    start = plan_start(command, _env(kind, root, resume_from, gang), root, kind.launcher)
    return start.command, start.env, start.resumed


@pytest.fixture(params=KINDS, ids=[k.name for k in KINDS])
def kind(request: pytest.FixtureRequest) -> Kind:
    value: Kind = request.param
    return value


def test_a_newer_complete_checkpoint_wins(kind: Kind, tmp_path: Path) -> None:
    kind.complete(tmp_path, 220)
    kind.complete(tmp_path, 240)  # finished by the old gang, never reported
    reported = str(tmp_path / kind.entry(220))
    command, env, resumed = _start(kind, tmp_path, reported)
    newest = str(tmp_path / kind.entry(240))
    assert resumed == (newest, 240)
    assert env[RESUME_FROM_ENV] == newest
    assert command == ["train.py", "--lr=0.1", *_args(kind, tmp_path, newest)]
    assert env[RESUME_ARGS_ENV] == shlex.join(_args(kind, tmp_path, newest))


def test_an_incomplete_newer_checkpoint_is_ignored(kind: Kind, tmp_path: Path) -> None:
    kind.complete(tmp_path, 220)
    kind.partial(tmp_path, 240)
    reported = str(tmp_path / kind.entry(220))
    command, env, resumed = _start(kind, tmp_path, reported)
    assert resumed is None
    assert env[RESUME_FROM_ENV] == reported
    assert command == ["train.py", "--lr=0.1", *_args(kind, tmp_path, reported)]


def test_an_older_checkpoint_on_disk_leaves_resume_from_as_it_is(kind: Kind, tmp_path: Path
                                                                 ) -> None:
    kind.complete(tmp_path, 200)
    reported = str(tmp_path / kind.entry(220))  # reported, then rotated away, say
    command, env, resumed = _start(kind, tmp_path, reported)
    assert resumed is None
    assert env[RESUME_FROM_ENV] == reported
    assert command[-len(_args(kind, tmp_path, reported)):] == _args(kind, tmp_path, reported)


def test_no_checkpoint_at_all_is_a_fresh_start(kind: Kind, tmp_path: Path) -> None:
    command, env, resumed = _start(kind, tmp_path, None)
    assert (command, env[RESUME_FROM_ENV], resumed) == (["train.py", "--lr=0.1"], "", None)


def test_a_fresh_start_with_a_complete_checkpoint_on_disk_resumes_from_it(
        kind: Kind, tmp_path: Path) -> None:
    kind.complete(tmp_path, 40)
    kind.partial(tmp_path, 60)
    command, env, resumed = _start(kind, tmp_path, None)
    found = str(tmp_path / kind.entry(40))
    assert env[RESUME_FROM_ENV] == found
    assert resumed == (found, 40)
    assert command == ["train.py", "--lr=0.1", *_args(kind, tmp_path, found)]


def test_the_launcher_renders_what_the_operator_would(kind: Kind, tmp_path: Path) -> None:
    path = str(tmp_path / kind.entry(240))
    from trainmaster.launch._resume import resume_values

    assert resume_values(kind.launcher, path, str(tmp_path)) == \
        operator_resume_values(kind.launcher, path, str(tmp_path))


def test_without_the_template_or_with_other_arguments_nothing_changes(tmp_path: Path) -> None:
    kind = KINDS[-1]
    kind.complete(tmp_path, 240)
    env = _env(kind, tmp_path, str(tmp_path / "step-220"))
    del env[RESUME_TEMPLATE_ENV]  # not a gang pod (the launcher run by hand)
    assert plan_start(["x"], env, tmp_path).command == ["x"]
    env = _env(kind, tmp_path, str(tmp_path / "step-220"))
    start = plan_start(["x", "--other"], env, tmp_path)
    assert (start.command, start.resumed) == (["x", "--other"], None)
    assert "does not end with" in start.notes[0]


def test_an_unwritable_directory_keeps_the_operators_choice(tmp_path: Path) -> None:
    kind = KINDS[-1]
    missing = tmp_path / "not-mounted"
    start = plan_start(["x", "--resume-from", "/c/step-220"],
                       {**_env(kind, missing, None), RESUME_FROM_ENV: "/c/step-220",
                        RESUME_ARGS_ENV: "--resume-from /c/step-220"}, missing)
    assert start.resumed is None and start.command[-1] == "/c/step-220"
    assert "cannot agree" in start.notes[0]


# The rank race: ranks start one after another while the old gang completes checkpoints.
# Whatever the interleaving, every rank resumes from the checkpoint the first one chose:
# the newest complete one when the first rank started.

EVENTS = st.lists(st.sampled_from(["rank", "checkpoint"]), min_size=1, max_size=12).filter(
    lambda events: "rank" in events)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=EVENTS, kind_index=st.integers(0, len(KINDS) - 1))
def test_every_rank_resumes_from_the_same_checkpoint(tmp_path_factory: pytest.TempPathFactory,
                                                     events: list[str], kind_index: int
                                                     ) -> None:
    kind = KINDS[kind_index]
    root = tmp_path_factory.mktemp("ckpt")
    kind.complete(root, 220)
    reported = str(root / kind.entry(220))
    step, chosen, expected = 220, [], None
    for event in events:
        if event == "checkpoint":
            step += 20
            kind.partial(root, step + 20)  # the next one, being written
            kind.complete(root, step)
            continue
        if expected is None:
            expected = str(root / kind.entry(step))
        _, env, _ = _start(kind, root, reported)
        chosen.append(env[RESUME_FROM_ENV])
    assert chosen == [expected] * len(chosen)


def test_concurrent_ranks_agree_while_checkpoints_complete(kind: Kind, tmp_path: Path) -> None:
    """Real concurrency: 8 ranks start at once while checkpoints keep completing."""
    kind.complete(tmp_path, 220)
    reported = str(tmp_path / kind.entry(220))
    chosen: list[str] = []
    lock = threading.Lock()

    def rank() -> None:
        _, env, _ = _start(kind, tmp_path, reported)
        with lock:
            chosen.append(env[RESUME_FROM_ENV])

    threads = [threading.Thread(target=rank) for _ in range(8)]
    for i, thread in enumerate(threads):
        thread.start()
        if i % 2:
            kind.complete(tmp_path, 240 + 20 * i)
    for thread in threads:
        thread.join()
    assert len(chosen) == 8 and len(set(chosen)) == 1
    decisions = [p.name for p in tmp_path.iterdir() if p.name.startswith(DECISION_PREFIX)]
    assert decisions == [f"{DECISION_PREFIX}uid-1"]  # one decision, no private files left


def test_a_new_gang_decides_again(tmp_path: Path) -> None:
    kind = KINDS[-1]
    kind.complete(tmp_path, 220)
    reported = str(tmp_path / "step-220")
    assert _start(kind, tmp_path, reported, gang="uid-1")[1][RESUME_FROM_ENV] == reported
    kind.complete(tmp_path, 240)
    assert _start(kind, tmp_path, reported, gang="uid-1")[1][RESUME_FROM_ENV] == reported
    assert _start(kind, tmp_path, reported, gang="uid-2")[1][RESUME_FROM_ENV] == \
        str(tmp_path / "step-240")


class Recorder:
    def __init__(self) -> None:
        self.checkpoints: list[tuple[str, int]] = []
        self.resumes: list[tuple[str, int, int]] = []

    def heartbeat(self, when: object) -> bool:
        return True

    def checkpoint(self, path: str, step: int, when: object) -> bool:
        self.checkpoints.append((path, step))
        return True

    def resumed(self, path: str, step: int, attempt: int, when: object) -> bool:
        self.resumes.append((path, step, attempt))
        return True

    def restarted(self, seconds: float, attempt: int, when: object) -> bool:
        return True


def test_the_launcher_starts_the_command_from_the_newer_checkpoint_and_reports_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
        ) -> None:
    kind = KINDS[-1]
    kind.complete(tmp_path, 220)
    kind.complete(tmp_path, 240)
    reported = str(tmp_path / "step-220")
    for key, value in _env(kind, tmp_path, reported).items():
        monkeypatch.setenv(key, value)
    show = "import os, sys; print(sys.argv[1:], os.environ['TRAINMASTER_RESUME_FROM'])"
    config = LaunchConfig(job="gpt", namespace="ns", rank=0, checkpoint_dir=tmp_path,
                          heartbeat_seconds=0.2, settle_seconds=0.5, poll_seconds=0.1,
                          attempt=1)
    sink = Recorder()
    code = run_launch(config, [sys.executable, "-c", show, "--resume-from", reported], sink)
    out, err = capfd.readouterr()
    newest = str(tmp_path / "step-240")
    assert code == 0
    assert out.strip() == f"['--resume-from', '{newest}'] {newest}"
    assert f"resuming from {newest} (step 240)" in err
    assert sink.resumes == [(newest, 240, 1)]
    assert sink.checkpoints == [(newest, 240)]  # status.lastCheckpoint: what it resumed from
