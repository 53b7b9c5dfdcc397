"""A small data-parallel training job on CPU: N ranks fit one linear model together.

Each step every rank draws its own batch (its shard of the data), computes the mean-squared
error's gradient, and the ranks all-reduce the gradients (collective.py) so every rank
applies the same averaged update: synchronous data parallelism, as DDP does it.

Rank 0 writes a checkpoint every --checkpoint-every steps to $TRAINMASTER_CHECKPOINT_DIR:
`step-<N>.tmp/` is filled, marked COMPLETE and renamed to `step-<N>/`, so a reader (the
launcher's watcher, a restarted gang) never sees half of one. Given a checkpoint through
$TRAINMASTER_RESUME_FROM or --resume-from, rank 0 loads it and sends it to every rank, and
the gang continues at the step after it with the same weights. Each step's *global* batch
(--batch-size rows) is drawn from a generator seeded by (seed, step) and every rank takes
its contiguous share of it, so the steps after a resume are the steps that would have
followed (their losses match the uninterrupted run's exactly at the same world size), and
a gang resumed at another world size (elastic training) re-shards the same data and keeps
the global batch: only the order of the floating-point sums changes.

Checkpoint on demand (the elastic launcher's contract, docs/operator.md): when the file
$TRAINMASTER_CHECKPOINT_NOW_FILE exists at a step boundary, rank 0 writes a checkpoint of
that step and removes the file. A lost peer (a broken all-reduce) ends the rank with exit
code 1 and a line saying so, for the launcher to re-rendezvous.

The environment is what trainmaster's launch script gives each pod (RANK or
JOB_COMPLETION_INDEX, WORLD_SIZE, MASTER_ADDR, MASTER_PORT); flags come from the job's
hyperParameters (`trainSteps: 200` becomes --train-steps=200).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from collective import Group, data_address

FEATURES = 64
CHECKPOINT_NOW_ENV = "TRAINMASTER_CHECKPOINT_NOW_FILE"


def _args(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train-steps", type=int, default=int(env.get("TM_HP_TRAIN_STEPS", 1000)))
    p.add_argument("--checkpoint-every", type=int,
                   default=int(env.get("TM_HP_CHECKPOINT_EVERY", 20)))
    p.add_argument("--learning-rate", type=float,
                   default=float(env.get("TM_HP_LEARNING_RATE", 0.05)))
    p.add_argument("--batch-size", type=int, default=int(env.get("TM_HP_BATCH_SIZE", 256)),
                   help="The global batch: rows per step across all ranks.")
    p.add_argument("--step-seconds", type=float, default=float(env.get("TM_HP_STEP_SECONDS", 0)),
                   help="Sleep this long each step (to watch a run, or to kill it mid-way).")
    p.add_argument("--checkpoint-pad-bytes", type=int,
                   default=int(env.get("TM_HP_CHECKPOINT_PAD_BYTES", 0)),
                   help="Add this many random bytes (pad.bin) to each checkpoint, to weigh "
                   "like a larger model's state; never read back.")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-dir", default=env.get("TRAINMASTER_CHECKPOINT_DIR", ""))
    p.add_argument("--keep", type=int, default=int(env.get("TRAINMASTER_CHECKPOINT_KEEP", 3)))
    p.add_argument("--resume-from", default=env.get("TRAINMASTER_RESUME_FROM", ""))
    return p.parse_args(argv)


def shard(size: int, rank: int, world: int) -> slice:
    """Rank `rank`'s rows of a global batch of `size`: contiguous, the first `size % world`
    ranks one row more, so every row is used once whatever the world size."""
    base, extra = divmod(size, world)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (1 if rank < extra else 0))


def _batch(seed: int, step: int, rank: int, world: int, size: int, truth: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, step])
    x = rng.standard_normal((size, FEATURES))
    y = x @ truth + 0.01 * rng.standard_normal(size)
    rows = shard(size, rank, world)
    return x[rows], y[rows]


def _checkpoint_asked(path: str) -> bool:
    """Whether the launcher asked for a checkpoint now (and take the request)."""
    if not path or not os.path.exists(path):
        return False
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def _save(directory: Path, step: int, weights: np.ndarray, loss: float, keep: int,
          pad_bytes: int = 0) -> Path:
    final = directory / f"step-{step}"
    partial = directory / f"step-{step}.tmp"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    np.save(partial / "weights.npy", weights)
    if pad_bytes:
        (partial / "pad.bin").write_bytes(os.urandom(pad_bytes))
    (partial / "state.json").write_text(json.dumps({"step": step, "loss": loss}))
    (partial / "COMPLETE").touch()
    partial.rename(final)
    done = sorted((int(p.name.split("-")[1]), p) for p in directory.glob("step-*")
                  if p.name.split("-")[1].isdigit())
    for _, old in done[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def _load(path: str) -> tuple[int, np.ndarray]:
    root = Path(path)
    state = json.loads((root / "state.json").read_text())
    return int(state["step"]), np.load(root / "weights.npy")


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    env = os.environ
    rank = int(env.get("RANK") or env.get("JOB_COMPLETION_INDEX") or 0)
    world = int(env.get("WORLD_SIZE", 1))
    group = Group(rank, world, env.get("MASTER_ADDR", "127.0.0.1"),
                  int(env.get("MASTER_PORT", 29500)), data_addr=data_address(env))
    where = f", all-reduce via {group.data_addr}" if group.data_addr else ""
    print(f"rank {rank}/{world}: joined the gang{where}", flush=True)
    truth = np.random.default_rng(args.seed).standard_normal(FEATURES)
    step, weights = 0, np.zeros(FEATURES)
    # Rank 0 reads the checkpoint and hands it to everyone: other ranks need not see the
    # checkpoint volume.
    state = b""
    if rank == 0 and args.resume_from:
        step, weights = _load(args.resume_from)
        state = json.dumps({"step": step, "weights": weights.tolist()}).encode()
    state = group.broadcast(state)
    if state:
        loaded = json.loads(state)
        step, weights = int(loaded["step"]), np.array(loaded["weights"], dtype=np.float64)
        source = args.resume_from if rank == 0 else "rank 0"
        print(f"rank {rank}: resumed from {source} at step {step}", flush=True)
    checkpoints = Path(args.checkpoint_dir) if args.checkpoint_dir else None
    now_file = env.get(CHECKPOINT_NOW_ENV, "")
    while step < args.train_steps:
        step += 1
        x, y = _batch(args.seed, step, rank, world, args.batch_size, truth)
        error = x @ weights - y
        grad = 2.0 * x.T @ error
        try:
            sums = group.all_reduce_sum(np.concatenate([grad, [float(error @ error)]]))
        except OSError as exc:  # ConnectionError, or a reset: a peer is gone
            print(f"rank {rank}: lost a peer at step {step}: {exc}", flush=True)
            return 1
        weights = weights - args.learning_rate * sums[:-1] / args.batch_size
        loss = float(sums[-1] / args.batch_size)
        print(f"rank {rank} step {step} loss {loss!r}", flush=True)
        asked = rank == 0 and _checkpoint_asked(now_file)
        if rank == 0 and checkpoints is not None and (step % args.checkpoint_every == 0
                                                      or asked):
            saved = _save(checkpoints, step, weights, loss, args.keep,
                          args.checkpoint_pad_bytes)
            why = " (on demand)" if asked else ""
            print(f"rank 0 checkpoint {saved} step {step}{why}", flush=True)
        if args.step_seconds:
            time.sleep(args.step_seconds)
    group.close()
    print(f"rank {rank}: done at step {step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
