"""A small decoder-only transformer trained on text with PyTorch DDP over gloo, under torchrun.

Bytes are the tokens (a 256-symbol vocabulary: nothing to download). Each step draws a
global batch of `--batch-size` windows of `--context + 1` bytes from the dataset, at offsets
from a generator seeded by (seed, step); each rank takes its contiguous share. So the data
of a step is the same at any world size, and a run resumed at another size keeps its
trajectory (up to the order of float sums).

Checkpoints are torch.distributed.checkpoint (DCP) directories in `--checkpoint-dir`
(`$TRAINMASTER_CHECKPOINT_DIR`): every rank writes `step-<N>.tmp/`; rank 0 then adds the
`COMPLETE` marker and renames it to `step-<N>/`, so a reader never sees half a checkpoint
(docs/operator.md, "The launcher contract"). A checkpoint is taken every
`--checkpoint-every` steps and whenever `--checkpoint-minutes`
(`$TRAINMASTER_CHECKPOINT_INTERVAL_MINUTES`, the job's `checkpoint.intervalMinutes`) have
passed since the last one; rank 0 decides the time and the ranks agree on it in the step's
all-reduce, since a DCP save is collective.

At start, every worker resumes from the newest complete checkpoint: the newest `step-<N>/`
with its marker in the checkpoint directory, or `--resume-from` (`$TRAINMASTER_RESUME_FROM`)
if that is newer; rank 0 chooses and the others follow. DCP reshards on load, so the world
size may differ from the one that saved. This is also what a worker restarted in place by
torchrun (after a crash) does.

Progress: rank 0 prints `step N loss L` (trainmaster launch reads the step from it).
The environment is torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT);
gloo binds to $GLOO_SOCKET_IFNAME, which trainmaster launch sets to the rail interfaces.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel

MARKER = "COMPLETE"


def _args(argv: list[str] | None) -> argparse.Namespace:
    env = os.environ
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=env.get("TM_HP_DATA_DIR", "/data/tinystories"),
                   help="Directory of text files (the dataset cache's /data/<dataset>).")
    p.add_argument("--train-steps", type=int, default=int(env.get("TM_HP_TRAIN_STEPS", 2000)))
    p.add_argument("--checkpoint-every", type=int,
                   default=int(env.get("TM_HP_CHECKPOINT_EVERY", 50)))
    p.add_argument("--checkpoint-minutes", type=float,
                   default=float(env.get("TRAINMASTER_CHECKPOINT_INTERVAL_MINUTES", 0) or 0),
                   help="Also checkpoint when this long has passed since the last (0: never).")
    p.add_argument("--checkpoint-dir", default=env.get("TRAINMASTER_CHECKPOINT_DIR", ""))
    p.add_argument("--keep", type=int, default=int(env.get("TRAINMASTER_CHECKPOINT_KEEP", 3)))
    p.add_argument("--resume-from", default=env.get("TRAINMASTER_RESUME_FROM", ""))
    p.add_argument("--batch-size", type=int, default=int(env.get("TM_HP_BATCH_SIZE", 16)))
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--learning-rate", type=float,
                   default=float(env.get("TM_HP_LEARNING_RATE", 3e-3)))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--collective-timeout", type=float,
                   default=float(env.get("TM_HP_COLLECTIVE_TIMEOUT", 20)),
                   help="Seconds a collective (or the group's start) may wait for a peer. "
                        "A peer lost without its sockets closing (its NIC down, its host "
                        "hung) is noticed only by this: the worker fails and torchrun "
                        "re-rendezvouses without it. gloo's default is 30 minutes.")
    return p.parse_args(argv)


class Decoder(nn.Module):
    """Token and position embeddings, pre-norm causal self-attention blocks, a byte head."""

    def __init__(self, context: int, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.tokens = nn.Embedding(256, width)
        self.positions = nn.Embedding(context, width)
        block = nn.TransformerEncoderLayer(width, heads, dim_feedforward=4 * width,
                                           dropout=0.0, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 256)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(context),
                             persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        x = self.tokens(tokens) + self.positions(torch.arange(length, device=tokens.device))
        x = self.blocks(x, mask=self.causal[:length, :length], is_causal=True)
        return self.head(self.norm(x))


def load_text(directory: str) -> torch.Tensor:
    """Every file of the dataset directory, in name order, as one tensor of bytes."""
    root = Path(directory)
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith("."))
    data = b"".join(p.read_bytes() for p in files)
    if not files or len(data) < 2:
        raise SystemExit(f"train.py: no text in --data-dir {directory}: give the directory "
                         "of the dataset (e.g. /data/tinystories)")
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()


def batch(data: torch.Tensor, step: int, seed: int, size: int, context: int,
          rank: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's contiguous share of step `step`'s global batch (inputs, targets)."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(0, len(data) - context - 1, (size,), generator=generator)
    share = starts[rank * size // world:(rank + 1) * size // world]
    windows = torch.stack([data[s:s + context + 1] for s in share.tolist()])
    return windows[:, :-1], windows[:, 1:]


def step_of(path: Path) -> int | None:
    name = path.name
    if not name.startswith("step-") or not name[5:].isdigit():
        return None
    return int(name[5:])


def newest_complete(directory: str) -> Path | None:
    if not directory or not Path(directory).is_dir():
        return None
    done = [(step_of(p), p) for p in Path(directory).iterdir()
            if step_of(p) is not None and (p / MARKER).exists()]
    return max(done, key=lambda sp: sp[0] or 0)[1] if done else None


def choose_resume(args: argparse.Namespace) -> tuple[Path | None, int]:
    """The newest complete checkpoint: on disk, or the one trainmaster passed (rank 0)."""
    found = newest_complete(args.checkpoint_dir)
    given = Path(args.resume_from) if args.resume_from else None
    if given is not None and (given / MARKER).exists() and step_of(given) is not None and (
            found is None or (step_of(given) or 0) > (step_of(found) or 0)):
        found = given
    return found, (step_of(found) or 0) if found else 0


def save(model: nn.Module, optimizer: torch.optim.Optimizer, directory: str, step: int,
         keep: int, rank: int) -> Path:
    root = Path(directory)
    final, partial = root / f"step-{step}", root / f"step-{step}.tmp"
    if rank == 0:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(partial, ignore_errors=True)
    dist.barrier()
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state, "step": torch.tensor(step)},
             checkpoint_id=str(partial))
    if rank == 0:
        (partial / MARKER).write_text(f"{step}\n")
        shutil.rmtree(final, ignore_errors=True)
        partial.rename(final)
        done = sorted((p for p in root.iterdir() if step_of(p) is not None
                       and (p / MARKER).exists()), key=lambda p: step_of(p) or 0)
        for old in done[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
    dist.barrier()  # every rank goes on once the checkpoint is complete
    return final


def load(model: nn.Module, optimizer: torch.optim.Optimizer, path: Path) -> int:
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state, "step": torch.tensor(0)}
    dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state["model"],
                   optim_state_dict=state["optim"])
    return int(state["step"])


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.collective_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local_world))
    torch.manual_seed(args.seed)  # every rank builds the same initial weights
    data = load_text(args.data_dir)
    model = DistributedDataParallel(Decoder(args.context, args.width, args.layers, args.heads))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    print(f"rank {rank} of {world}: pid {os.getpid()}, torchrun restart {restart}, gloo on "
          f"{os.environ.get('GLOO_SOCKET_IFNAME') or 'the default interface'}", flush=True)

    choice = [choose_resume(args)[0] if rank == 0 else None]
    dist.broadcast_object_list(choice, src=0)  # every rank loads the same checkpoint
    start = 0
    if choice[0] is not None:
        start = load(model, optimizer, Path(choice[0]))
        print(f"rank {rank}: resumed from {choice[0]} at step {start} (world size {world})",
              flush=True)
    last_save = time.monotonic()
    for step in range(start + 1, args.train_steps + 1):
        inputs, targets = batch(data, step, args.seed, args.batch_size, args.context,
                                rank, world)
        logits = model(inputs)
        loss = nn.functional.cross_entropy(logits.reshape(-1, 256), targets.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        due = args.checkpoint_minutes > 0 and \
            time.monotonic() - last_save >= args.checkpoint_minutes * 60
        # One all-reduce: the mean loss, and rank 0's "the interval has passed".
        report = torch.tensor([loss.item() / world, float(due and rank == 0)])
        dist.all_reduce(report)
        if rank == 0:
            print(f"step {step} loss {report[0].item():.4f}", flush=True)
        if args.checkpoint_dir and (step % args.checkpoint_every == 0 or report[1] > 0
                                    or step == args.train_steps):
            path = save(model, optimizer, args.checkpoint_dir, step, args.keep, rank)
            last_save = time.monotonic()
            if rank == 0:
                print(f"checkpoint {path} (step {step})", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
