"""The docs cannot drift from the tool: every command shown in README.md and docs/*.md
exists with the options shown; the ones this machine can run without a cluster run (with
the installed entry point) and, where the docs show their output, print exactly that;
every YAML snippet validates as what it is (a spec, a part of one, a scheduler config).

Commands that need a cluster, root or a long build are checked for their subcommand and
options only (parsing them, never running them)."""

from __future__ import annotations

import copy
import glob
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from tests.cli.entry import REPO, SCRIPTS, run
from tests.helpers import stack_doc
from trainmaster.cli import app
from trainmaster.spec import ClusterSpec, load_spec_text, validate_data

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
PROGRAMS = ("trainmaster", "trainmaster-scheduler")


def _blocks(*langs: str) -> list[tuple[str, str, str]]:
    """(where, language, text) of every fenced block in these languages."""
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for match in FENCE.finditer(text):
            if match.group(1) in langs:
                line = text.count("\n", 0, match.start()) + 1
                out.append((f"{doc.relative_to(REPO)}:{line}", match.group(1), match.group(2)))
    return out


def _command(line: str) -> list[str] | None:
    """The argv of a `trainmaster ...` line (after `$ `, `.venv/bin/`, `/usr/bin/time -v`,
    inside `eval "$(...)"`), its `# comment` dropped; None for other lines."""
    line = line.strip().removeprefix("$ ")
    line = re.sub(r'^eval "\$\((.*)\)"', r"\1", line.split("  #")[0].split(" # ")[0]).strip()
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    while words and words[0] in ("/usr/bin/time", "time", "-v", "sudo"):
        words = words[1:]
    if not words or Path(words[0]).name not in PROGRAMS:
        return None
    return [Path(words[0]).name, *words[1:]]


def _commands() -> list[tuple[str, list[str], list[str]]]:
    """(where, argv, output lines shown after it) for every command in sh/console blocks;
    backslash continuations joined."""
    out = []
    for where, lang, text in _blocks("sh", "console", "bash"):
        lines = text.replace("\\\n", " ").splitlines()
        for i, line in enumerate(lines):
            argv = _command(line)
            if argv is None:
                continue
            shown: list[str] = []
            if lang == "console":
                for after in lines[i + 1:]:
                    if after.startswith("$ "):
                        break
                    shown.append(after)
            out.append((where, argv, shown))
    return out


COMMANDS = _commands()


def _resolve(args: list[str]) -> tuple[list[str], Any]:
    """The subcommand path and click command the words name; unknown ones fail."""
    command: Any = typer.main.get_command(app)
    path: list[str] = []
    rest = list(args)
    while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
        name = rest.pop(0)
        sub = command.commands.get(name)
        assert sub is not None, f"`trainmaster {' '.join([*path, name])}` does not exist"
        command, path = sub, [*path, name]
    if (getattr(command, "context_settings", None) or {}).get("ignore_unknown_options"):
        return path, command  # `trainmaster pulumi`: the options are Pulumi's
    options = {opt for param in command.params for opt in param.opts} | {"-h", "--help"}
    for arg in rest:
        if arg == "--":
            break  # `launch -- CMD`: the rest is the training command
        if arg.startswith("-") and not re.fullmatch(r"-\d.*", arg) and arg != "-":
            name = arg.split("=")[0]
            assert name in options, f"`trainmaster {' '.join(path)}` has no {name}"
    return path, command


def test_the_docs_show_commands() -> None:
    shown = {" ".join(_resolve(argv[1:])[0]) for _, argv, _ in COMMANDS
             if argv[0] == "trainmaster"}
    assert {"validate", "policy check", "cluster up", "status", "simulate", "render"} <= shown


@pytest.mark.parametrize(("where", "argv", "shown"), COMMANDS,
                         ids=[f"{w}:{' '.join(a)[:60]}" for w, a, _ in COMMANDS])
def test_every_command_shown_exists(where: str, argv: list[str], shown: list[str]) -> None:
    if argv[0] == "trainmaster":
        _resolve(argv[1:])
        return
    usage = subprocess.run([str(SCRIPTS / argv[0]), "--help"], capture_output=True,
                           text=True, timeout=120).stdout
    for arg in argv[1:]:
        if arg.startswith("--"):
            assert arg.split("=")[0] in usage, f"{where}: {argv[0]} has no {arg}"


# --- running what needs no cluster ------------------------------------------------------

# Files the docs name that the repository does not hold: how the docs say they were made.
def _bad(doc: dict[str, Any]) -> None:
    doc["jobs"][1].update(gpusPerPod=16, queue="nope")


def _tight(doc: dict[str, Any]) -> None:
    doc["jobs"][0]["image"] = "nvcr.io/nvidia/pytorch:latest"
    doc["jobs"][1]["queue"] = "research"
    doc["scheduler"]["queues"][1]["gpuQuota"] = 16


MADE = {"bad.yaml": _bad, "tight.yaml": _tight}

# Commands run as shown: fast, no cluster, no build, no root.
RUNNABLE = {("validate",), ("policy", "check"), ("policy", "list"), ("render",),
            ("schema",), ("simulate",), ("init",)}

# Files the docs make with `trainmaster init` (the README's first steps): the commands
# after it find the file that init, as shown, wrote.
INITS = [argv for _, argv, _ in COMMANDS
         if argv[0] == "trainmaster" and tuple(_resolve(argv[1:])[0]) == ("init",)]


@pytest.fixture(scope="session")
def init_made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """File name -> the file the docs' `trainmaster init` commands write."""
    made: dict[str, Path] = {}
    for argv in INITS:
        where = tmp_path_factory.mktemp("init")
        proc = run(*argv[1:], cwd=where)
        assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr}"
        made.update({f.name: f for f in where.iterdir()})
    return made


def _workdir(tmp: Path) -> Path:
    for name in ("stacks", "examples", "policies", "schemas"):
        (tmp / name).symlink_to(REPO / name)
    for name, change in MADE.items():
        doc = stack_doc()
        change(doc)
        (tmp / name).write_text(yaml.safe_dump(doc, sort_keys=False))
    return tmp


def _runnable(argv: list[str]) -> bool:
    if argv[0] != "trainmaster":
        return False
    path = tuple(_resolve(argv[1:])[0])
    if any(a in ("-h", "--help", "--version") for a in argv):
        return True
    if path not in RUNNABLE:
        return False
    if path == ("simulate",):  # the small examples only: the large ones run for minutes
        return "examples/simulate/cluster.yaml" in argv
    return True


RUNS = [(w, a, s) for w, a, s in COMMANDS if _runnable(a)]


@pytest.mark.parametrize(("where", "argv", "shown"), RUNS,
                         ids=[f"{w}:{' '.join(a)[:60]}" for w, a, _ in RUNS])
def test_commands_that_need_no_cluster_run_and_print_what_the_docs_show(
        tmp_path: Path, where: str, argv: list[str], shown: list[str],
        init_made: dict[str, Path]) -> None:
    cwd = _workdir(tmp_path)
    args: list[str] = []
    for arg in argv[1:]:  # the shell's globs
        args += sorted(glob.glob(arg, root_dir=cwd)) if "*" in arg else [arg]
    if argv not in INITS:
        for arg in args:
            if arg in init_made and not (cwd / arg).exists():
                (cwd / arg).write_text(init_made[arg].read_text())
    proc = run(*args, cwd=cwd)
    made_invalid = any(name in args for name in MADE)
    assert "Traceback" not in proc.stderr, f"{where}: {proc.stderr}"
    assert proc.returncode == (1 if made_invalid else 0), f"{where}: {proc.stderr}"
    if not shown:
        return
    printed = (proc.stdout + proc.stderr).splitlines()
    if args[0] == "simulate":  # a table: compare the cells (widths follow the terminal)
        def cells(lines: list[str]) -> list[list[str]]:
            return [[c.strip() for c in line.split("│")[1:-1]]
                    for line in lines if line.startswith("│")]
        assert cells(printed) == cells(shown), where
        return
    assert printed == [line for line in shown if line.strip()], where


# --- YAML snippets ----------------------------------------------------------------------

SPEC_KEYS = set(ClusterSpec.model_fields) | {f.alias for f in ClusterSpec.model_fields.values()
                                             if f.alias}
SCHEDULER_CONFIG_KEYS = {"queues", "defaultQueue"}


def _spec_with(part: dict[str, Any]) -> dict[str, Any]:
    """The dev stack with this part of a spec merged in (a snippet shows one section); its
    jobs are left out unless the part has some (they would name the stack's queues)."""
    doc = stack_doc()
    doc["jobs"] = []
    for key, value in part.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **copy.deepcopy(value)}
        else:
            doc[key] = copy.deepcopy(value)
    return doc


YAML = _blocks("yaml")
LIVE_OBJECT_PAGES = {
    "docs/interop.md": ("tests/scheduler/test_interop_doc_live.py",  # the upstream API
                        "tests/scheduler/test_interop_live.py",  # JobSet, Kueue
                        "tests/scheduler/test_composites_live.py"),  # CompositePodGroup
    "docs/queues.md": ("tests/scheduler/test_queues_doc_live.py",),
}
"""Pages with Kubernetes objects in YAML, and the live tests that submit them."""


@pytest.mark.parametrize(("where", "lang", "text"), YAML, ids=[w for w, _, _ in YAML])
def test_every_yaml_snippet_validates(where: str, lang: str, text: str) -> None:
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    if all(isinstance(d, dict) and {"apiVersion", "kind", "metadata"} <= set(d)
           and d["kind"] != "TrainingCluster" for d in docs):
        # Kubernetes objects a user submits: each page that shows some has a live test
        # that submits them to the real control plane.
        page = where.split(":")[0]
        assert page in LIVE_OBJECT_PAGES, f"{where}: Kubernetes objects no live test submits"
        assert all(Path(t).is_file() for t in LIVE_OBJECT_PAGES[page]), page
        assert all(d["metadata"].get("name") for d in docs), where
        return
    (data,) = docs
    assert isinstance(data, dict), f"{where}: not a mapping"
    if data.get("kind") == "TrainingCluster":
        load_spec_text(text, where)  # a whole spec, as pasted
    elif set(data) <= SPEC_KEYS:
        validate_data(_spec_with(data), where)  # a section of a spec
    elif set(data) <= SCHEDULER_CONFIG_KEYS:
        from trainmaster.scheduler import SchedulerConfig

        SchedulerConfig.from_mapping(data)  # trainmaster-scheduler's config file
    else:
        pytest.fail(f"{where}: a YAML snippet that is neither a spec, a part of one, nor a "
                    f"scheduler config: {sorted(data)}")
