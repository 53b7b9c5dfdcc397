"""How the launcher runs torchrun (trainmaster.launch._torchrun): `torchrun ARGS` becomes torch's
own torchrun in this python with the workers forked from a torch-preloaded forkserver, and
each worker runs the script as `python script.py` would. (The whole path, with torch, runs
in tests/examples/test_transformer_torchrun.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainmaster.launch import write_bundle
from trainmaster.launch._torchrun import (
    DEFAULT_PRELOAD,
    agent_command,
    preload_modules,
    run_script,
)


def test_the_preloaded_modules_come_from_the_environment() -> None:
    assert preload_modules({}) == DEFAULT_PRELOAD
    assert "torch" in DEFAULT_PRELOAD
    assert preload_modules({"TRAINMASTER_TORCHRUN_PRELOAD": "torch, numpy,"}) == \
        ("torch", "numpy")
    assert preload_modules({"TRAINMASTER_TORCHRUN_PRELOAD": "0"}) == ()


def test_torchrun_becomes_the_preloading_agent_with_the_same_arguments() -> None:
    args = ["--nnodes=2", "--rdzv-endpoint=h:1", "train.py", "--steps", "3"]
    for torchrun in ("torchrun", "/usr/local/bin/torchrun"):
        command = agent_command([torchrun, *args], {})
        assert command[:2] == [sys.executable, "-c"]
        assert "from trainmaster.launch._torchrun import main" in command[2]
        assert command[3:] == args


def test_other_commands_and_preloading_off_are_left_alone() -> None:
    assert agent_command(["python", "train.py"], {}) == ["python", "train.py"]
    assert agent_command(["deepspeed", "x.py"], {}) == ["deepspeed", "x.py"]
    off = {"TRAINMASTER_TORCHRUN_PRELOAD": "0"}
    assert agent_command(["torchrun", "x.py"], off) == ["torchrun", "x.py"]


def test_the_boot_line_finds_the_bundles_trainmaster(tmp_path: Path) -> None:
    """In a pod the launcher is the bundle: the agent's python (no site-packages here, as
    an image without trainmaster) imports this module from it, appended to sys.path."""
    bundle = write_bundle(tmp_path / "launcher")
    boot = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path.insert(0, {str(bundle)!r}); "
         "from trainmaster.launch._torchrun import agent_command; "
         "print(agent_command(['torchrun', 'x.py'], {})[2])"],
        text=True, capture_output=True, check=True).stdout.strip()
    probe = boot.split("; from ")[0] + \
        "; import trainmaster.launch._torchrun as m; print(m.__file__)"
    out = subprocess.run([sys.executable, "-S", "-c", probe], cwd=tmp_path, text=True,
                         capture_output=True, check=True).stdout
    assert out.strip() == f"{bundle}/trainmaster/launch/_torchrun.py"


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "helper_for_train.py").write_text("VALUE = 'sibling'\n")
    path = tmp_path / "train.py"
    path.write_text(
        "import sys\n"
        "from helper_for_train import VALUE\n"  # a module beside the script
        "assert __name__ == '__main__'\n"
        "import json, os\n"
        "open(os.environ['OUT'], 'w').write(json.dumps([VALUE, sys.argv]))\n"
        "sys.exit(int(sys.argv[1]))\n")
    return path


def test_a_worker_runs_the_script_as_python_would(
        script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out.json"
    monkeypatch.setenv("OUT", str(out))
    run_script(str(script), "0", "--flag")  # sys.exit(0): a success, no exception
    assert out.read_text() == f'["sibling", ["{script}", "0", "--flag"]]'


def test_a_worker_that_exits_non_zero_fails(script: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUT", str(tmp_path / "out.json"))
    with pytest.raises(SystemExit) as exited:
        run_script(str(script), "3")
    assert exited.value.code == 3
