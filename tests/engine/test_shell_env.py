"""The shell for plain `pulumi` (`trainmaster tools env`) and the committed stack salts,
without a cluster."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from tests.helpers import ROOT
from trainmaster.engine import (
    DEFAULT_PASSPHRASE,
    SHELL_FAMILIES,
    EngineError,
    project_virtualenv,
    shell_env,
    shell_exports,
)
from trainmaster.toolchain import RECIPES, family_dir

STACK_FILES = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))


def _passphrase_opens(salt_line: str, passphrase: str) -> bool:
    """Whether `passphrase` opens an `encryptionsalt` as Pulumi's passphrase secrets provider
    checks it: v1:<salt>:v1:<nonce>:<AES-256-GCM of "pulumi" under PBKDF2-SHA256(1e6)>."""
    version, salt, crypt_version, nonce, sealed = salt_line.split(":")
    assert (version, crypt_version) == ("v1", "v1")
    key = hashlib.pbkdf2_hmac("sha256", passphrase.encode(), base64.b64decode(salt), 1_000_000, 32)
    try:
        plain = AESGCM(key).decrypt(base64.b64decode(nonce), base64.b64decode(sealed), None)
    except Exception:  # cryptography's InvalidTag: a wrong passphrase
        return False
    return plain == b"pulumi"


@pytest.mark.parametrize("stack_file", STACK_FILES, ids=lambda p: p.name)
def test_committed_salt_is_the_local_passphrases(stack_file: Path) -> None:
    salt = yaml.safe_load(stack_file.read_text()).get("encryptionsalt")
    assert salt, f"{stack_file.name}: no encryptionsalt; the first preview would write one"
    assert _passphrase_opens(salt, DEFAULT_PASSPHRASE)
    assert not _passphrase_opens(salt, DEFAULT_PASSPHRASE + "x")


def test_language_host_family_and_its_exec_script() -> None:
    recipe = RECIPES["pulumi-language-python"]
    assert recipe.version == "v3.79.0"
    assert recipe.binaries == ("pulumi-language-python",)
    # The host looks for the script next to its own executable.
    [(module, rel, dest)] = recipe.module_files
    assert module == f"github.com/pulumi/pulumi/sdk/v3@{RECIPES['pulumi'].version}"
    assert (rel, dest) == ("python/cmd/pulumi-language-python-exec", "pulumi-language-python-exec")
    assert "pulumi-language-python" in SHELL_FAMILIES


def _fake_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty cache whose shell families count as built (only their folders are used here)."""
    monkeypatch.setenv("TRAINMASTER_CACHE", str(tmp_path / "cache"))
    for family in SHELL_FAMILIES:
        family_dir(family).mkdir(parents=True)
        (family_dir(family) / ".complete").write_text("test\n")


def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "PULUMI_BACKEND_URL",
        "PULUMI_CONFIG_PASSPHRASE",
        "PULUMI_CONFIG_PASSPHRASE_FILE",
        "PULUMI_HOME",
        "KUBECONFIG",
        "VIRTUAL_ENV",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRAINMASTER_HOME", str(tmp_path / "home"))
    _fake_cache(tmp_path, monkeypatch)


def test_shell_env_puts_the_host_and_the_virtualenv_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clean_env(tmp_path, monkeypatch)
    venv = project_virtualenv(ROOT)
    env = shell_env(ROOT)
    path = env["PATH"].split(os.pathsep)
    assert path[:4] == [
        str(family_dir("pulumi")),
        str(family_dir("pulumi-kubernetes")),
        str(family_dir("pulumi-language-python")),
        str(venv / "bin"),
    ]
    assert env["VIRTUAL_ENV"] == str(venv)
    # The same conventions as `trainmaster pulumi`, so the two share stacks.
    assert env["PULUMI_CONFIG_PASSPHRASE"] == DEFAULT_PASSPHRASE
    assert env["PULUMI_HOME"] == str(tmp_path / "home" / "pulumi")
    assert env["PULUMI_BACKEND_URL"] == (tmp_path / "home" / "pulumi" / "state").as_uri()
    assert env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    # Evaluated again in the same shell: PATH does not grow.
    monkeypatch.setenv("PATH", env["PATH"])
    assert shell_env(ROOT)["PATH"] == env["PATH"]


def test_virtualenv_of_pulumi_yaml_else_the_running_one(tmp_path: Path) -> None:
    (tmp_path / "Pulumi.yaml").write_text(
        "name: p\nruntime: {name: python, options: {virtualenv: venv}}\n"
    )
    assert project_virtualenv(tmp_path) == Path(sys.prefix)  # venv/ does not exist
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(sys.executable)
    assert project_virtualenv(tmp_path) == tmp_path / "venv"


def test_no_virtualenv_is_an_error_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: p\nruntime: python\n")
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)
    with pytest.raises(EngineError, match=r"\.venv does not exist .* run `make tools`"):
        project_virtualenv(tmp_path)


def test_exports_set_what_differs_and_unset_what_goes() -> None:
    text = shell_exports(
        {"A": "same", "B": "it's new", "C": "x"}, {"A": "same", "B": "old", "PYTHONHOME": "/p"}
    )
    assert text == "export B='it'\"'\"'s new'\nexport C=x\nunset PYTHONHOME\n"


def test_tools_env_is_evaluated_by_a_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _clean_env(tmp_path, monkeypatch)
    script = (
        'eval "$("$PY" -m trainmaster tools env)" || exit 9\n'
        'printf "%s\\n" "$PULUMI_CONFIG_PASSPHRASE" "$VIRTUAL_ENV" "$PULUMI_BACKEND_URL"\n'
        "command -v python3\n"
    )
    proc = subprocess.run(
        ["sh", "-c", script],
        cwd=ROOT / "stacks",  # the project is found from a subfolder
        env={**os.environ, "PY": sys.executable},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    venv = project_virtualenv(ROOT)
    assert proc.stdout.splitlines() == [
        DEFAULT_PASSPHRASE,
        str(venv),
        (tmp_path / "home" / "pulumi" / "state").as_uri(),
        str(venv / "bin" / "python3"),  # what the language host runs the program with
    ]
