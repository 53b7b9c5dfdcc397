"""Python CrossGuard policy packs without the Python language host.

`--policy-pack DIR` makes the CLI start the pack through the language host of its runtime
(`pulumi-language-python` RunPlugin), which cannot be built here; the CLI then fails with
"no language plugin 'pulumi-language-python' found". The CLI (pkg/v3 v3.274.1,
resource/plugin/analyzer_plugin.go) also accepts `--policy-pack FILE`: an executable it
starts directly as an analyzer plugin, like a provider binary. So for a Python pack this
writes such an executable: it runs `python -u -m pulumi.policy ENGINE_ADDRESS DIR` (the
Python SDK's own policy-pack runner, which Pulumi's former `pulumi-analyzer-policy-python`
script ran too) with the pack's virtualenv. The pack, the gRPC analyzer protocol and the
engine's enforcement are the real ones; only the process that starts Python differs.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import yaml

__all__ = ["launcher_for", "policy_pack_paths"]

_SCRIPT = """#!/bin/sh
# Written by trainmaster (trainmaster/engine/_policy.py): starts the Python policy pack
# {pack} as an analyzer plugin, without pulumi-language-python. The CLI calls it with the
# engine's address; PolicyPack() prints its port and serves until the CLI stops it.
exec "{python}" -u -m pulumi.policy "$1" "{pack}"
"""


def _python_for(pack: Path, manifest: dict[str, object]) -> str:
    """The virtualenv's python named in PulumiPolicy.yaml, else this interpreter."""
    runtime = manifest.get("runtime")
    options = runtime.get("options", {}) if isinstance(runtime, dict) else {}
    venv = options.get("virtualenv") if isinstance(options, dict) else None
    if isinstance(venv, str):
        # normpath, not resolve(): the virtualenv's python is a symlink to the base interpreter,
        # and only the link's path makes Python use the virtualenv.
        python = os.path.normpath(pack / venv / "bin" / "python")
        if os.path.exists(python):
            return python
    return sys.executable


def _python_manifest(pack: Path) -> dict[str, object] | None:
    manifest_path = pack / "PulumiPolicy.yaml"
    if not pack.is_dir() or not manifest_path.is_file():
        return None
    manifest = yaml.safe_load(manifest_path.read_text()) or {}
    runtime = manifest.get("runtime")
    name = runtime.get("name") if isinstance(runtime, dict) else runtime
    return manifest if name == "python" else None


def launcher_for(pack: Path, home: Path) -> Path:
    """The executable that starts the Python pack at `pack`, under `home` (PULUMI_HOME)."""
    pack = pack.resolve()
    manifest = _python_manifest(pack)
    if manifest is None:
        return pack
    key = hashlib.sha256(str(pack).encode()).hexdigest()[:12]
    folder = home / "policy-packs" / f"{pack.name}-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    # Next to the executable the CLI reads PulumiPolicy.yaml for the pack's version.
    _write(folder / "PulumiPolicy.yaml", (pack / "PulumiPolicy.yaml").read_text(), 0o644)
    path = folder / "policy-pack"
    _write(path, _SCRIPT.format(pack=pack, python=_python_for(pack, manifest)), 0o755)
    return path


def _write(path: Path, text: str, mode: int) -> None:
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    tmp.replace(path)  # atomic: a concurrent run never reads half a file


def policy_pack_paths(packs: tuple[str, ...], home: Path) -> list[str]:
    """--policy-pack values as the CLI should get them: Python packs through a launcher."""
    return [str(launcher_for(Path(p), home)) for p in packs]
