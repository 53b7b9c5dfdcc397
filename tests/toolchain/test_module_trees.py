"""A module whose zip lacks a file its go:embed needs (Alertmanager's web UI bundle) builds
from a copy in the wrapper: the recipe's module_trees copy it (go.mod replaces the module
with that copy) and its stub_files fill the embedded folder. Checked with `go list`, which
resolves embed patterns without compiling anything."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from trainmaster.toolchain import RECIPES, _build


def test_the_alertmanager_wrapper_embeds_the_stub_ui(tmp_path: Path) -> None:
    go = shutil.which("go")
    assert go, "the Go toolchain builds every tool"
    recipe = RECIPES["alertmanager"]
    src = tmp_path / "src"
    shutil.copytree(_build.GO_MODULES_DIR / "alertmanager", src)
    log = tmp_path / "log"
    for module, dest in recipe.module_trees:
        _build._copy_module(go, module, tmp_path, src / dest, log)
    pkg = src / "alertmanager" / "ui"

    def embedded() -> subprocess.CompletedProcess[str]:
        return subprocess.run([go, "list", "-json", "github.com/prometheus/alertmanager/ui"],
                              cwd=src,
                              env=_build._go_env(), capture_output=True, text=True,
                              timeout=300)

    # The module as its zip ships it: the embed pattern matches nothing, so it cannot build.
    assert not (pkg / "app" / "dist").exists()
    missing = embedded()
    assert "pattern app/dist: no matching files found" in missing.stdout + missing.stderr

    for dest, text in recipe.stub_files:
        (src / dest).parent.mkdir(parents=True, exist_ok=True)
        (src / dest).write_text(text)
    found = embedded()
    assert found.returncode == 0, found.stderr
    assert sorted(json.loads(found.stdout)["EmbedFiles"]) == [
        "app/dist/elm/index.html", "app/dist/mantine/index.html"]
    # The copy is writable, so the next build's rmtree of its source folder succeeds.
    shutil.rmtree(src)
