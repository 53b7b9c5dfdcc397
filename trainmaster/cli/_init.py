"""`trainmaster init`: write a commented starter spec from flags, asking for the missing
ones only when a person is at the terminal."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from trainmaster.cli._app import app
from trainmaster.errors import TrainmasterError, UsageError

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class FileExistsRefused(TrainmasterError):
    """`init` would overwrite a file the user has (exit 1, nothing written)."""


def _ask(value: Any, question: str, default: Any, kind: Any = str) -> Any:
    """The flag's value; else, at a terminal, the answer to `question`; else the default."""
    if value is not None:
        return value
    if sys.stdin.isatty():
        return typer.prompt(question, default=default, type=kind)
    return default


def _teams(text: str) -> tuple[str, ...]:
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    if not names:
        raise UsageError("--teams needs at least one name, e.g. --teams vision,speech")
    for name in names:
        if not _NAME.match(name) or len(name) > 63:
            raise UsageError(f"--teams: {name!r} is not a queue name: use lowercase letters, "
                             "digits and '-' (a DNS label)")
    if len(set(names)) != len(names):
        raise UsageError(f"--teams names a team twice: {text}")
    return names


@app.command()
def init(
    file: Annotated[Path, typer.Argument(
        metavar="FILE", help="Spec file to write.")] = Path("cluster.yaml"),
    name: Annotated[str | None, typer.Option(
        "--name", metavar="NAME", help="Cluster name (default: lab).")] = None,
    spines: Annotated[int | None, typer.Option(
        "--spines", metavar="N", min=1, max=1000, help="Spine switches (default: 1).")] = None,
    leaves: Annotated[int | None, typer.Option(
        "--leaves-per-spine", "--leaves", metavar="N", min=1, max=1000,
        help="Leaf switches under each spine (default: 4).")] = None,
    nodes_per_leaf: Annotated[int | None, typer.Option(
        "--nodes-per-leaf", metavar="N", min=1, max=1000,
        help="GPU nodes under each leaf switch (default: 8).")] = None,
    gpus: Annotated[int | None, typer.Option(
        "--gpus", metavar="N", min=1, max=64, help="GPUs per node (default: 8).")] = None,
    fabric: Annotated[str | None, typer.Option(
        "--fabric", metavar="[infiniband|roce]",
        help="Compute network fabric (default: infiniband).")] = None,
    rails: Annotated[int | None, typer.Option(
        "--rails", metavar="N", min=1, max=32,
        help="Compute network rails, one RDMA NIC each per node (default: 8).")] = None,
    storage: Annotated[bool | None, typer.Option(
        "--storage/--no-storage",
        help="A separate storage network (default: yes).")] = None,
    teams: Annotated[str | None, typer.Option(
        "--teams", metavar="A,B,...",
        help="Teams, one queue each, sharing the GPUs in one cohort (default: research).")
    ] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite FILE if it exists.")] = False,
) -> None:
    """Write a commented starter spec (then: validate, render, policy check, plan,
    simulate). Flags not given are asked for at a terminal, else take their defaults."""
    from trainmaster.spec import FABRICS, StarterShape, load_spec_text, starter_spec

    if fabric is not None and fabric not in FABRICS:
        raise UsageError(f"--fabric {fabric!r}: use one of {', '.join(FABRICS)}")
    if file.exists() and not force:
        raise FileExistsRefused(f"{file} exists: pass --force to overwrite it, or name "
                                "another file (trainmaster init FILE)")
    if file.is_dir():
        raise UsageError(f"{file} is a folder: name a file, e.g. {file / 'cluster.yaml'}")
    base = StarterShape()
    # Asked in the order of the spec: cluster, switches, nodes, networks, queues.
    chosen_name = _ask(name, "Cluster name", base.name)
    chosen_spines = _ask(spines, "Spine switches", base.spines, int)
    chosen_leaves = _ask(leaves, "Leaf switches per spine", base.leaves_per_spine, int)
    chosen_nodes = _ask(nodes_per_leaf, "Nodes per leaf", base.nodes_per_leaf, int)
    chosen_gpus = _ask(gpus, "GPUs per node", base.gpus, int)
    chosen_fabric = _ask(fabric, "Compute fabric (infiniband or roce)", base.fabric)
    if chosen_fabric not in FABRICS:
        raise UsageError(f"fabric {chosen_fabric!r}: use one of {', '.join(FABRICS)}")
    shape = StarterShape(
        name=chosen_name, spines=chosen_spines, leaves_per_spine=chosen_leaves,
        nodes_per_leaf=chosen_nodes, gpus=chosen_gpus, fabric=chosen_fabric,
        rails=_ask(rails, "Compute rails (RDMA NICs per node)", base.rails, int),
        storage=_ask(storage, "A separate storage network?", base.storage, bool),
        teams=_teams(_ask(teams, "Teams (comma-separated; one queue each)",
                          ",".join(base.teams))),
    )
    text = starter_spec(shape)
    load_spec_text(text, str(file))  # what the answers make must load: else nothing written
    file.write_text(text)
    print(f"wrote {file}: {shape.nodes} nodes, {shape.total_gpus} GPUs, "
          f"{len(shape.teams)} queue(s), one example job")
    print(f"next: trainmaster validate {file} && trainmaster policy check {file}")
