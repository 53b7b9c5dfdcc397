"""A small data-parallel training job on CPU: N ranks fit one linear model together.

Each step every rank draws its own batch (its shard of the data), computes the mean-squared
error's gradient, and the ranks all-reduce the gradients (collective.py) so every rank
applies the same averaged update: synchronous data parallelism, as DDP does it.

Rank 0 writes a checkpoint every --checkpoint-every steps to $TRAINMASTER_CHECKPOINT_DIR:
`step-<N>.tmp/` is filled, marked COMPLETE and renamed to `step-<N>/`, so a reader (the
launcher's watcher, a restarted gang) never sees half of one. Given a checkpoint through
$TRAINMASTER_RESUME_FROM or --resume-from, rank 0 loads it and sends it to every rank, and
the gang continues at the step after it with the same weights. Batches are drawn from a
generator seeded by (seed, step, rank), so the steps after a resume are the steps that
would have followed: their losses match the uninterrupted run's exactly.

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


def _args(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train-steps", type=int, default=int(env.get("TM_HP_TRAIN_STEPS", 1000)))
    p.add_argument("--checkpoint-every", type=int,
                   default=int(env.get("TM_HP_CHECKPOINT_EVERY", 20)))
    p.add_argument("--learning-rate", type=float,
                   default=float(env.get("TM_HP_LEARNING_RATE", 0.05)))
    p.add_argument("--batch-size", type=int, default=int(env.get("TM_HP_BATCH_SIZE", 256)))
    p.add_argument("--step-seconds", type=float, default=float(env.get("TM_HP_STEP_SECONDS", 0)),
                   help="Sleep this long each step (to watch a run, or to kill it mid-way).")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint-dir", default=env.get("TRAINMASTER_CHECKPOINT_DIR", ""))
    p.add_argument("--keep", type=int, default=int(env.get("TRAINMASTER_CHECKPOINT_KEEP", 3)))
    p.add_argument("--resume-from", default=env.get("TRAINMASTER_RESUME_FROM", ""))
    return p.parse_args(argv)


def _batch(seed: int, step: int, rank: int, size: int, truth: np.ndarray) -> tuple[
        np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, step, rank])
    x = rng.standard_normal((size, FEATURES))
    y = x @ truth + 0.01 * rng.standard_normal(size)
    return x, y


def _save(directory: Path, step: int, weights: np.ndarray, loss: float, keep: int) -> Path:
    final = directory / f"step-{step}"
    partial = directory / f"step-{step}.tmp"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    np.save(partial / "weights.npy", weights)
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
    while step < args.train_steps:
        step += 1
        x, y = _batch(args.seed, step, rank, args.batch_size, truth)
        error = x @ weights - y
        grad = 2.0 * x.T @ error / args.batch_size
        sums = group.all_reduce_sum(np.concatenate([grad, [float(error @ error)]]))
        weights = weights - args.learning_rate * sums[:-1] / world
        loss = float(sums[-1] / (args.batch_size * world))
        print(f"rank {rank} step {step} loss {loss!r}", flush=True)
        if rank == 0 and checkpoints is not None and step % args.checkpoint_every == 0:
            saved = _save(checkpoints, step, weights, loss, args.keep)
            print(f"rank 0 checkpoint {saved} step {step}", flush=True)
        if args.step_seconds:
            time.sleep(args.step_seconds)
    group.close()
    print(f"rank {rank}: done at step {step}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
