"""`--help` and `validate` import only what they need: no spec model (pydantic, ~1 s) for
help, no jsonschema (~0.4 s) for a valid spec, no API clients, no image or Pulumi code.
Checked on the modules a real run leaves loaded (a fresh interpreter per command)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.cli.entry import REPO

PROBE = """
import json, sys
from trainmaster.cli import main
try:
    main(sys.argv[1:])
finally:
    sys.stdout = sys.__stdout__
    print("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""

HEAVY = ("kubernetes", "kubernetes_asyncio", "aiohttp", "pulumi", "trainmaster.kubeclient",
         "trainmaster.image", "trainmaster.engine", "trainmaster.simulate", "matplotlib",
         "kopf")


def _loaded(*args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    line = next(x for x in proc.stdout.splitlines() if x.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


def _present(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in modules]


@pytest.mark.parametrize("args", [["--help"], ["validate", "--help"], ["status", "-h"],
                                  ["simulate", "--help"]], ids=" ".join)
def test_help_imports_no_spec_model_and_no_client(args: list[str]) -> None:
    modules = _loaded(*args)
    # (typer itself loads pydantic to check option values: not ours to avoid)
    assert _present(modules, (*HEAVY, "trainmaster.spec", "jsonschema")) == []


def test_validate_of_a_valid_spec_imports_no_jsonschema_and_no_client() -> None:
    modules = _loaded("validate", "stacks/dev/cluster.yaml")
    assert "trainmaster.spec" in modules
    assert _present(modules, (*HEAVY, "jsonschema", "rich.console")) == []
