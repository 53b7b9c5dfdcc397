"""Elastic launch: the gang trains at whatever size its live members make (between min and
max nodes) and re-rendezvous at a new world size, from the newest checkpoint on disk,
when membership changes. Like torchrun's elastic agent, the launcher starts the training
command once per round with RANK, WORLD_SIZE, LOCAL_RANK, GROUP_RANK, MASTER_ADDR,
MASTER_PORT, TORCHELASTIC_RUN_ID and TORCHELASTIC_RESTART_COUNT.

Membership comes from the ranks, not from the API server (see _rendezvous): a launcher
that stops answering for `missed` looks in a row, or whose training command fails (a
broken all-reduce), ends the round; the leader then starts a smaller one at once, without
waiting for the kubelet's 40 s grace to mark the node NotReady.

Grow: a launcher that appears (its pod was bound when a node freed) is added at a
checkpoint boundary: the leader asks its training command for a checkpoint now by creating
the file $TRAINMASTER_CHECKPOINT_NOW_FILE (the trainer writes one at its next step and
removes the file), waits for that checkpoint to complete (at most `grow_wait` seconds,
then grows from the newest on disk), stops the round and starts a larger one.

Enabled by TRAINMASTER_ELASTIC=MIN:MAX (torchrun's --nnodes syntax), which the gang's
pods get from the job's `elastic` field. Standard library only (launcher bundle).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from trainmaster.api import (
    CHECKPOINT_NOW_ENV,
    ELASTIC_ENV,
    GANG_UID_ENV,
    JOB_ENV,
    RDZV_HOST_ENV,
    RDZV_PORT_ENV,
    RDZV_STRIDE_ENV,
    RESUME_ARGS_ENV,
    RESUME_FROM_ENV,
    RESUME_TEMPLATE_ENV,
    ROUND_ENV,
)
from trainmaster.launch._checkpoints import newest_complete
from trainmaster.launch._rendezvous import (
    FAILED,
    IDLE,
    RUNNING,
    SUCCEEDED,
    PeerState,
    Rendezvous,
    Round,
    leader_of,
    newer,
)
from trainmaster.launch._resume import (
    render_resume_args,
)

RDZV_PORT = 29400


class ElasticError(ValueError):
    """A bad elastic setting in the environment (names the variable)."""


@dataclass(frozen=True)
class ElasticConfig:
    index: int
    min_nodes: int
    max_nodes: int
    host_template: str
    port: int = RDZV_PORT
    port_stride: int = 0
    """Port of launcher i = port + i * stride: many launchers on one host (tests)."""
    master_port: int = 29500
    run_id: str = ""
    look_seconds: float = 0.5
    connect_timeout: float = 1.0
    missed: int = 2
    """Looks in a row a member may not answer before it counts as lost."""
    settle_seconds: float = 3.0
    """A first round below max waits this long for more members."""
    grow_wait: float = 60.0
    stop_grace: float = 10.0

    def address(self, index: int) -> tuple[str, int]:
        return self.host_template.format(index=index), self.port + index * self.port_stride

    @classmethod
    def from_env(cls, env: Mapping[str, str], index: int) -> ElasticConfig | None:
        raw = env.get(ELASTIC_ENV, "")
        if not raw:
            return None
        low, sep, high = raw.partition(":")
        if not sep or not low.isdigit() or not high.isdigit() or not 1 <= int(low) <= int(high):
            raise ElasticError(f"{ELASTIC_ENV}={raw!r}: expected MIN:MAX with 1 <= MIN <= MAX, "
                               "e.g. 1:3")
        if not 0 <= index < int(high):
            raise ElasticError(f"this launcher's index {index} is outside {ELASTIC_ENV}={raw}")
        port = env.get(RDZV_PORT_ENV, str(RDZV_PORT))
        if not port.isdigit():
            raise ElasticError(f"{RDZV_PORT_ENV}={port!r}: expected a port number")
        stride = env.get(RDZV_STRIDE_ENV, "0")
        if not stride.isdigit():
            raise ElasticError(f"{RDZV_STRIDE_ENV}={stride!r}: expected a number")
        host = env.get(RDZV_HOST_ENV) or _host_template(env.get("MASTER_ADDR", ""))
        master_port = env.get("MASTER_PORT", "29500")
        return cls(index, int(low), int(high), host, int(port), int(stride),
                   master_port=int(master_port) if master_port.isdigit() else 29500,
                   run_id=env.get(GANG_UID_ENV) or env.get(JOB_ENV, ""))


def _host_template(master: str) -> str:
    head, dot, rest = master.partition(".")
    if not head.endswith("-0"):
        raise ElasticError(f"MASTER_ADDR={master!r} is not launcher 0's name (<gang>-0.<svc>); "
                           f"set {RDZV_HOST_ENV} to a host with {{index}}")
    return head[:-2] + "-{index}" + dot + rest.replace("{", "{{").replace("}", "}}")


def round_command(command: list[str], env: Mapping[str, str], resume: str,
                  checkpoint_dir: Path | None) -> tuple[list[str], dict[str, str]]:
    """The command and environment resuming from `resume`: the resume arguments the launch
    script appended (for the operator's checkpoint) are replaced by ones for `resume`."""
    out = dict(env)
    old = shlex.split(env.get(RESUME_ARGS_ENV, "")) if env.get(RESUME_FROM_ENV) else []
    head = command[:len(command) - len(old)] if old and command[-len(old):] == old \
        else list(command)
    template = env.get(RESUME_TEMPLATE_ENV)
    new = render_resume_args(shlex.split(template), "", resume,
                             str(checkpoint_dir) if checkpoint_dir else None) \
        if template is not None and resume else []
    if old and head == command:  # not ours to rewrite: pass the choice by env only
        new = []
    out[RESUME_FROM_ENV] = resume
    out[RESUME_ARGS_ENV] = shlex.join(new)
    return [*head, *new], out


def rank_env(config: ElasticConfig, round_: Round, leader_host: str) -> dict[str, str]:
    """What torchrun's elastic agent gives each worker (one worker per pod here)."""
    rank, world = round_.members.index(config.index), len(round_.members)
    return {
        "RANK": str(rank), "WORLD_SIZE": str(world),
        "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
        "GROUP_RANK": str(rank), "GROUP_WORLD_SIZE": str(world),
        "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world),
        "MASTER_ADDR": leader_host, "MASTER_PORT": str(config.master_port),
        "TORCHELASTIC_RUN_ID": config.run_id,
        "TORCHELASTIC_RESTART_COUNT": str(round_.number - 1),
        "TORCHELASTIC_MAX_RESTARTS": "0",
        ROUND_ENV: str(round_.number),
    }


def say(message: str) -> None:
    print(f"trainmaster launch: elastic: {message}", file=sys.stderr, flush=True)


class Agent:
    """One launcher of an elastic gang: rendezvous, and the training command per round."""

    def __init__(self, config: ElasticConfig, command: list[str], env: Mapping[str, str],
                 checkpoint_dir: Path | None,
                 start: Callable[[list[str], dict[str, str]], subprocess.Popen[bytes]],
                 bind_host: str = "") -> None:
        self.config = config
        self.command = command
        self.env = dict(env)
        self.checkpoint_dir = checkpoint_dir
        self.start_child = start
        peers = {i: config.address(i) for i in range(config.max_nodes)}
        self.rdzv = Rendezvous(config.index, peers,
                               (bind_host, config.address(config.index)[1]),
                               config.connect_timeout)
        self.child: subprocess.Popen[bytes] | None = None
        self.round: Round | None = None
        self.missing: dict[int, int] = {}
        self.first_seen: float | None = None
        self.grow_asked: tuple[float, int] | None = None
        self.now_file = Path(env.get(CHECKPOINT_NOW_ENV) or
                             f"/tmp/trainmaster-checkpoint-now-{os.getpid()}")
        self.code: int | None = None

    @property
    def is_rank0(self) -> bool:
        return self.round is not None and not self.round.done and \
            self.round.members[:1] == (self.config.index,)

    # -- the training command ---------------------------------------------------------

    def _child_state(self) -> str:
        if self.child is None:
            return IDLE
        code = self.child.poll()
        if code is None:
            return RUNNING
        return SUCCEEDED if code == 0 else FAILED

    def _stop_child(self) -> None:
        child, self.child = self.child, None
        if child is None or child.poll() is not None:
            return
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(self.config.stop_grace)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def _run(self, round_: Round) -> None:
        self._stop_child()
        self.round = round_
        self.rdzv.set(IDLE, round_)
        self.now_file.unlink(missing_ok=True)
        if round_.done or self.config.index not in round_.members:
            return
        leader_host = self.config.address(round_.members[0])[0]
        command, env = round_command(self.command, self.env, round_.resume,
                                     self.checkpoint_dir)
        env.update(rank_env(self.config, round_, leader_host))
        env[CHECKPOINT_NOW_ENV] = str(self.now_file)
        say(f"round {round_.number}: world size {len(round_.members)} (launchers "
            f"{list(round_.members)}), this is rank {env['RANK']}, resuming from "
            f"{round_.resume or 'the start'}")
        self.child = self.start_child(command, env)
        self.rdzv.set(RUNNING)

    # -- one look ---------------------------------------------------------------------

    def step(self) -> int | None:
        """Look at the peers once and act; the exit code once this launcher is done."""
        self.rdzv.set(self._child_state())
        seen = self.rdzv.look()
        for index in range(self.config.max_nodes):
            self.missing[index] = 0 if index in seen else self.missing.get(index, 0) + 1
        live = set(seen)
        leader = leader_of({i: p.round for i, p in seen.items()}, live)
        if leader == self.config.index:
            return self._lead(seen, live)
        return self._follow(seen[leader])

    def _newest_on_disk(self) -> tuple[str, int | None]:
        if self.checkpoint_dir is None:
            return self.env.get(RESUME_FROM_ENV, ""), None
        found = newest_complete(self.checkpoint_dir)
        if found is None:
            return self.env.get(RESUME_FROM_ENV, ""), None
        return str(self.checkpoint_dir / found.path.name), found.step

    def _publish(self, members: list[int], why: str) -> None:
        self._stop_child()  # rank 0 of the old round is ours: no checkpoint is written now
        resume, _ = self._newest_on_disk()
        previous = self.round
        number = (previous.number if previous else 0) + 1
        ordered = (self.config.index, *sorted(m for m in members if m != self.config.index))
        before = len(previous.members) if previous and not previous.done else 0
        say(f"{why}: world size {before} -> {len(ordered)}")
        self.grow_asked = None
        self._run(Round(number, ordered, resume))

    def _lead(self, seen: Mapping[int, PeerState], live: set[int]) -> int | None:
        config, current = self.config, self.round
        for peer in seen.values():  # a leader that takes over adopts the newest round
            current = newer(current, peer.round)
        if current is not None and current != self.round:
            self.round = current
            self.rdzv.set(round_=current)
        mine = self._child_state()
        if current is not None and current.done:
            return self._finish(seen)
        if mine == SUCCEEDED and current is not None and config.index in current.members:
            # Synchronous data parallelism: one rank ending well means the training did.
            done = Round(current.number, current.members, current.resume, done=True)
            self.round, self.code = done, 0
            self.rdzv.set(SUCCEEDED, done)
            say(f"round {done.number}: training finished")
            return None
        candidates = sorted(live)[:config.max_nodes]
        if current is None:
            if self.first_seen is None:
                self.first_seen = time.monotonic()
            waited = time.monotonic() - self.first_seen
            if len(candidates) >= config.min_nodes and (
                    len(candidates) == config.max_nodes or waited >= config.settle_seconds):
                self._publish(candidates, "first rendezvous")
            return None
        lost = [m for m in current.members if self.missing.get(m, 0) >= config.missed
                or (m in seen and seen[m].child == FAILED and seen[m].round == current)]
        if mine == FAILED or (self.config.index in current.members and mine == IDLE):
            lost.append(config.index)
        if lost:
            alive = [i for i in candidates if self.missing.get(i, 0) == 0]
            if len(alive) >= config.min_nodes:
                gone = sorted(set(lost) - {config.index} - set(alive))
                why = f"lost launcher(s) {gone}" if gone else "a rank's command failed"
                self._publish(alive, why)
            return None
        joining = [i for i in candidates if i not in current.members and seen[i].child == IDLE]
        if joining and len(current.members) < config.max_nodes:
            self._grow(candidates, joining)
        return None

    def _grow(self, candidates: list[int], joining: list[int]) -> None:
        _, step = self._newest_on_disk()
        if self.grow_asked is None:
            self.grow_asked = (time.monotonic(), step if step is not None else -1)
            self.now_file.touch()
            say(f"launcher(s) {joining} joined: asked rank 0 for a checkpoint now "
                f"({self.now_file})")
            return
        asked_at, before = self.grow_asked
        if (step is not None and step > before) or \
                time.monotonic() - asked_at >= self.config.grow_wait:
            self._publish(candidates, f"grow at checkpoint step {step}")

    def _finish(self, seen: Mapping[int, PeerState]) -> int | None:
        """The training is done: wait for our own command, then exit with its code."""
        state = self._child_state()
        if state == RUNNING:
            return None
        code = self.child.returncode if self.child is not None else 0
        return self.code if self.code is not None else code

    def _follow(self, leader: PeerState) -> int | None:
        held = leader.round
        if held is None:
            return None
        if held.done:
            self.round = held
            self.rdzv.set(round_=held)
            return self._finish({})
        if self.round is None or held.number > self.round.number:
            self._run(held)
        return None

    def run(self) -> int:
        self.rdzv.start()
        say(f"launcher {self.config.index} of {self.config.min_nodes}..{self.config.max_nodes}"
            f", rendezvous on port {self.config.address(self.config.index)[1]}")
        try:
            while True:
                code = self.step()
                if code is not None:
                    return code
                time.sleep(self.config.look_seconds)
        finally:
            self._stop_child()
            self.now_file.unlink(missing_ok=True)
            # Answer a little longer so followers see the final round before we vanish.
            if self.round is not None and self.round.done:
                time.sleep(self.config.look_seconds * 4)
            self.rdzv.close()
