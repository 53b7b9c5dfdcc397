"""kubectl's and pulumi's habits, through the installed entry point: --version, -h on every
level, and shell completion that completes commands."""

from __future__ import annotations

from importlib.metadata import version

from tests.cli.entry import run


def test_version() -> None:
    proc = run("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"trainmaster {version('trainmaster')}"


def test_short_help_on_every_level() -> None:
    for args in (["-h"], ["cluster", "-h"], ["cluster", "up", "-h"], ["launch", "-h"]):
        proc = run(*args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert proc.stdout.lstrip().startswith("Usage: trainmaster"), args


def test_shell_completion_script_and_completions() -> None:
    script = run("--show-completion", "bash")
    assert script.returncode == 0, script.stderr
    assert "_TRAINMASTER_COMPLETE=complete_bash" in script.stdout
    words = run(env={"_TRAINMASTER_COMPLETE": "complete_bash",
                     "COMP_WORDS": "trainmaster val", "COMP_CWORD": "1"})
    assert words.stdout.split() == ["validate"]
    words = run(env={"_TRAINMASTER_COMPLETE": "complete_bash",
                     "COMP_WORDS": "trainmaster cluster s", "COMP_CWORD": "2"})
    assert words.stdout.split() == ["status"]
