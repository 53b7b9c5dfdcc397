"""The environment every Pulumi command of this project runs with.

Local by default, so no Pulumi account is needed: the built CLI and Kubernetes provider first
on PATH, plugin downloads off (the provider must be the one built from Go modules), state in a
file backend under trainmaster's home, a passphrase for that local state's secrets, and the
local cluster's kubeconfig. Anything the user already set wins, except PULUMI_HOME, PATH
(the built tools go first) and plugin acquisition (always off).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from trainmaster.errors import TrainmasterError
from trainmaster.toolchain import PULUMI_FAMILIES, family_dir

__all__ = [
    "DEFAULT_PASSPHRASE",
    "SHELL_FAMILIES",
    "EngineError",
    "engine_env",
    "find_project",
    "project_virtualenv",
    "pulumi_home",
    "shell_env",
    "shell_exports",
]

# Encrypts secrets in the local file backend only; anyone with the state folder can read them
# with this default. Set PULUMI_CONFIG_PASSPHRASE (or _FILE) for anything shared. The
# `encryptionsalt` committed in stacks/Pulumi.<stack>.yaml is this passphrase's, so the first
# operation on a fresh clone finds it and does not write the file.
DEFAULT_PASSPHRASE = "trainmaster-local-state"

# What a shell for plain `pulumi` needs on PATH: the CLI, the provider and the Python
# language host (which `trainmaster pulumi` does without: it runs the program inline).
SHELL_FAMILIES = (*PULUMI_FAMILIES, "pulumi-language-python")

# The source checkout this package runs from (an editable install): its Pulumi.yaml is the
# project when the current folder is not inside one.
_CHECKOUT = Path(__file__).resolve().parents[2]


class EngineError(TrainmasterError):
    """A Pulumi operation failed or could not start; the message says which and why."""


def pulumi_home(env: Mapping[str, str]) -> Path:
    """PULUMI_HOME: `pulumi/` under $TRAINMASTER_HOME (default ~/.trainmaster)."""
    home = env.get("TRAINMASTER_HOME") or str(Path.home() / ".trainmaster")
    return Path(home) / "pulumi"


def find_project(start: Path | None = None) -> Path:
    """The folder of the Pulumi.yaml in `start` (default: cwd) or a parent, else the checkout."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "Pulumi.yaml").is_file():
            return folder
    if (_CHECKOUT / "Pulumi.yaml").is_file():
        return _CHECKOUT
    raise EngineError(f"no Pulumi.yaml in {here} or its parents; run this in the project folder")


def engine_env() -> dict[str, str]:
    """The full environment for the Pulumi CLI (and the provider it starts), from os.environ."""
    env = dict(os.environ)
    home = pulumi_home(env)
    env["PULUMI_HOME"] = str(home)
    if "PULUMI_BACKEND_URL" not in env:
        state = home / "state"
        state.mkdir(parents=True, exist_ok=True)  # the file backend does not create it
        env["PULUMI_BACKEND_URL"] = state.as_uri()
    if "PULUMI_CONFIG_PASSPHRASE" not in env and "PULUMI_CONFIG_PASSPHRASE_FILE" not in env:
        env["PULUMI_CONFIG_PASSPHRASE"] = DEFAULT_PASSPHRASE
    env.setdefault("PULUMI_SKIP_UPDATE_CHECK", "true")
    # The engine would otherwise download the provider version the SDK asks for instead of
    # using the one built from Go modules (found on PATH).
    env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] = "true"
    tools = [str(family_dir(family)) for family in PULUMI_FAMILIES]
    env["PATH"] = os.pathsep.join([*tools, env.get("PATH", "")])
    if "KUBECONFIG" not in env:
        from trainmaster.kubeclient import choose_kubeconfig  # clients: only when needed

        # kubectl's rule (a local cluster chosen by --cluster, else ~/.kube/config, if
        # there is one); in a pod (None) the provider finds the service account itself.
        kubeconfig = choose_kubeconfig()
        if kubeconfig is not None and kubeconfig.exists():
            env["KUBECONFIG"] = str(kubeconfig)
    return env


def project_virtualenv(project_dir: Path) -> Path:
    """The virtualenv the program runs in: Pulumi.yaml's `virtualenv` option if that exists,
    else the one this trainmaster runs from."""
    manifest = yaml.safe_load((project_dir / "Pulumi.yaml").read_text()) or {}
    runtime = manifest.get("runtime")
    options = runtime.get("options", {}) if isinstance(runtime, dict) else {}
    named = options.get("virtualenv") if isinstance(options, dict) else None
    if isinstance(named, str):
        # normpath, not resolve(): bin/python is a symlink to the base interpreter.
        venv = Path(os.path.normpath(project_dir / named))
        if (venv / "bin" / "python").exists():
            return venv
    if sys.prefix != sys.base_prefix:
        return Path(sys.prefix)
    raise EngineError(
        f"no virtualenv for the Pulumi program: {project_dir / str(named or '.venv')} does not "
        "exist and trainmaster does not run from one; run `make tools` in the checkout "
        "(it creates .venv) or create that virtualenv and `pip install -e .` into it"
    )


def shell_env(project_dir: Path) -> dict[str, str]:
    """engine_env() for a shell where plain `pulumi` works in `project_dir`: the language host
    and the project's virtualenv on PATH too, the virtualenv active.

    The v3.79.0 language host only learns the virtualenv from a `-virtualenv` flag that the
    v3.274.1 CLI no longer passes; without it the host runs the first `python3` on PATH.
    """
    env = engine_env()
    venv = project_virtualenv(project_dir)
    env["VIRTUAL_ENV"] = str(venv)
    env.pop("PYTHONHOME", None)  # as a virtualenv's activate script does
    first = [
        *(str(family_dir(family)) for family in SHELL_FAMILIES),
        str(venv / "bin"),
    ]
    # Idempotent: evaluating it again in the same shell does not grow PATH.
    rest = [p for p in env["PATH"].split(os.pathsep) if p not in first]
    env["PATH"] = os.pathsep.join([*first, *rest])
    return env


def shell_exports(env: Mapping[str, str], current: Mapping[str, str]) -> str:
    """POSIX shell lines that turn the environment `current` into `env`."""
    lines = [
        f"export {name}={shlex.quote(value)}"
        for name, value in sorted(env.items())
        if current.get(name) != value
    ]
    lines += [f"unset {name}" for name in sorted(current) if name not in env]
    return "".join(line + "\n" for line in lines)
