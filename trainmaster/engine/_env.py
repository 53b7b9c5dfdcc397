"""The environment every Pulumi command of this project runs with.

Local by default, so no Pulumi account is needed: the built CLI and Kubernetes provider first
on PATH, plugin downloads off (the provider must be the one built from Go modules), state in a
file backend under trainmaster's home, a passphrase for that local state's secrets, and the
local cluster's kubeconfig. Anything the user already set wins, except PULUMI_HOME, PATH
(the built tools go first) and plugin acquisition (always off).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from trainmaster.errors import TrainmasterError
from trainmaster.toolchain import family_dir
from trainmaster.toolchain._recipes import PULUMI_FAMILIES

__all__ = ["DEFAULT_PASSPHRASE", "EngineError", "engine_env", "find_project", "pulumi_home"]

# Encrypts secrets in the local file backend only; anyone with the state folder can read them
# with this default. Set PULUMI_CONFIG_PASSPHRASE (or _FILE) for anything shared.
DEFAULT_PASSPHRASE = "trainmaster-local-state"

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

        # The only local trainmaster cluster's (else ~/.kube/config, if there is one); in
        # a pod (None) the Kubernetes provider finds the service account itself.
        kubeconfig = choose_kubeconfig()
        if kubeconfig is not None and kubeconfig.exists():
            env["KUBECONFIG"] = str(kubeconfig)
    return env
