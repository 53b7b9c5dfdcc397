"""torchrun whose workers start without importing torch again.

A worker that torchrun restarts in place (`--max-restarts`) is a new `python script.py`
process, and `import torch` (with torch.distributed and its checkpoint module) takes 5 to
20 s on a small, busy node: most of a restart. So for `torchrun ... script.py` the launcher
runs torch's own torchrun (torch.distributed.run: its arguments, its elastic agent, its c10d
rendezvous) with two changes:

- the workers are forked from a multiprocessing forkserver that imported torch once, when
  the agent started (`--start-method=forkserver`, the modules in $TRAINMASTER_TORCHRUN_PRELOAD);
- each worker runs the script in that process (torchrun's `--run-path`), as `python -u
  script.py` would: `__main__`, `sys.argv`, the script's directory first on `sys.path`,
  output unbuffered, and `sys.exit(0)` a success.

`TRAINMASTER_TORCHRUN_PRELOAD=0` runs plain torchrun; so does a command it does not cover
(`--no-python`, `-m module`, `--run-path` already given), and an image whose python cannot
import torch (the `torchrun` on PATH then runs as it is). Standard library only until it
runs in the image (launcher bundle).
"""

from __future__ import annotations

import importlib
import os
import runpy
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PRELOAD_ENV = "TRAINMASTER_TORCHRUN_PRELOAD"
DEFAULT_PRELOAD = ("torch", "torch.distributed.run", "torch.distributed.checkpoint",
                   "torch.nn.parallel", "torch._dynamo")
"""torch._dynamo too: DistributedDataParallel imports it (about 300 modules) when built."""
_BOOT = ("import sys; sys.path.append({root!r}); "
         "from trainmaster.launch._torchrun import main; raise SystemExit(main(sys.argv[1:]))")


def preload_modules(env: Mapping[str, str]) -> tuple[str, ...]:
    """What the forkserver imports: $TRAINMASTER_TORCHRUN_PRELOAD (comma-separated),
    else DEFAULT_PRELOAD; none for "0"."""
    value = env.get(PRELOAD_ENV, "").strip()
    if value == "0":
        return ()
    return tuple(m.strip() for m in value.split(",") if m.strip()) if value else DEFAULT_PRELOAD


def agent_command(command: list[str], env: Mapping[str, str]) -> list[str]:
    """`torchrun ARGS` as this module's agent (same ARGS) in this python; anything else,
    or with preloading off, unchanged."""
    if not command or command[0].rsplit("/", 1)[-1] != "torchrun" or not preload_modules(env):
        return command
    # Appended, not first: the trainer's own packages win over the bundle's copies.
    root = str(Path(__file__).resolve().parent.parent.parent)
    return [sys.executable, "-c", _BOOT.format(root=root), *command[1:]]


def run_script(script: str, *args: str) -> None:
    """One worker: `script` as `python -u script.py args` would run it."""
    sys.argv = [script, *args]
    sys.path.insert(0, str(Path(script).resolve().parent))
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(line_buffering=True, write_through=True)
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise


def main(argv: list[str]) -> int:
    try:
        from torch.distributed import run
        from torch.distributed.elastic.multiprocessing.errors import record
    except ImportError:  # not this python's torch: the image's torchrun, as it is
        os.execvp("torchrun", ["torchrun", *argv])
    torchrun: Any = run  # typed loosely: torch's own annotations are partial
    args = torchrun.parse_args(argv)
    if not (args.run_path or args.no_python or args.module):
        import multiprocessing

        print(f"trainmaster launch: torchrun's workers fork from a server that imported "
              f"{', '.join(preload_modules(os.environ))} ({PRELOAD_ENV}=0: plain torchrun)",
              file=sys.stderr, flush=True)
        multiprocessing.set_forkserver_preload([*preload_modules(os.environ), __name__])
        # Started now, it imports torch while the agent imports the rest and rendezvouses.
        from multiprocessing import forkserver
        forkserver.ensure_running()
        args.run_path, args.start_method = True, "forkserver"
        # torchrun's --run-path entry is this module-level name; ours adds what `python
        # script.py` does and it does not (sys.path, -u, sys.exit(0)).
        torchrun.run_script_path = run_script
    # torch's log formatter imports torch._dynamo the first time it formats an exception,
    # which the agent does when a worker fails: seconds on the restart's path. So now,
    # beside the first start.
    threading.Thread(target=importlib.import_module, args=("torch._dynamo",),
                     name="import torch._dynamo", daemon=True).start()
    record(torchrun.run)(args)
    return 0
