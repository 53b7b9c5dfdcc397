"""Before/after in one run (`--also-tree`): the other tree's code really runs, in turns
with this tree's, and a path that is no checkout is a clear error."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from trainmaster.bench import BenchError, BenchOptions
from trainmaster.bench._contenders import Trainmaster
from trainmaster.bench._trees import (
    PLACEMENT_FIELDS,
    checked_tree,
    placement_before_after,
    python_argv,
    this_tree,
    tree_env,
)

SMALL = {"nodes": 60, "gang": 4, "runs": 2, "cold_runs": 1, "events": 3, "pods_per_node": 1}


def _copy_of_this_tree(tmp_path: Path) -> Path:
    """A second checkout: the trainmaster package copied, with a marker to tell it by."""
    import shutil

    tree = tmp_path / "before"
    shutil.copytree(this_tree() / "trainmaster", tree / "trainmaster",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "trainmaster" / "_which_tree.py").write_text("NAME = 'before'\n")
    return tree


def test_the_child_imports_the_given_tree_not_the_current_directory(tmp_path: Path) -> None:
    tree = _copy_of_this_tree(tmp_path)
    probe = "import trainmaster._which_tree as w, trainmaster; print(w.NAME, trainmaster.__file__)"
    # Run from this tree's root: without -P its own trainmaster would shadow PYTHONPATH.
    out = subprocess.run([*python_argv(), "-c", probe], env=tree_env(tree), cwd=this_tree(),
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["before", str(tree / "trainmaster" / "__init__.py")]


def test_placement_before_after_alternates_and_compares_every_field(tmp_path: Path) -> None:
    compared = placement_before_after(_copy_of_this_tree(tmp_path), 2, SMALL)
    assert [c.field for c in compared] == list(PLACEMENT_FIELDS)
    for c in compared:
        assert len(c.before) == len(c.after) == 2
        assert all(v > 0 for v in (*c.before, *c.after)), c
        assert c.ratio > 0
        assert set(c.to_json()) == {"field", "before", "after", "before_median",
                                    "after_median", "ratio"}


def test_a_path_without_trainmaster_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match=r"--also-tree .*no trainmaster/__init__.py"):
        checked_tree(tmp_path)
    with pytest.raises(BenchError, match="--also-tree"):
        BenchOptions(only=("trainmaster",), also_tree=tmp_path).contenders()


def test_the_scheduler_bench_adds_the_other_tree_as_a_contender(tmp_path: Path) -> None:
    tree = _copy_of_this_tree(tmp_path)
    options = BenchOptions(only=("trainmaster",), also_tree=tree)
    assert options.contenders() == ("trainmaster", f"trainmaster@{tree.resolve()}")
    contender = Trainmaster(tree)
    assert contender.name == f"trainmaster@{tree}"


def test_bench_placement_also_tree_on_the_command_line(tmp_path: Path) -> None:
    tree = _copy_of_this_tree(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "trainmaster", "bench", "placement", "--nodes", "60",
         "--gang", "4", "--runs", "2", "--cold-runs", "1", "--events", "3",
         "--pods-per-node", "1", "--also-tree", str(tree), "--rounds", "1", "--json"],
        capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    result = json.loads(proc.stdout)
    assert result["rounds"] == 1 and result["tree"] == str(tree)
    assert [f["field"] for f in result["fields"]] == list(PLACEMENT_FIELDS)
    bad = subprocess.run([sys.executable, "-m", "trainmaster", "bench", "placement",
                          "--also-tree", str(tmp_path / "nowhere"), "--rounds", "1"],
                         capture_output=True, text=True, check=False, timeout=120)
    assert bad.returncode == 1 and "no trainmaster/__init__.py" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_tree_contenders_namespace_is_a_valid_label() -> None:
    from trainmaster.bench._run import bench_namespace

    for name in ("trainmaster", "trainmaster@/tmp/before", "kube-scheduler-tuned-affinity",
                 "trainmaster@/" + "very-long/" * 20):
        namespace = bench_namespace(name)
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", namespace), namespace
        assert len(namespace) <= 63
    assert bench_namespace("trainmaster@/tmp/before").startswith("bench-trainmaster-tmp-before-")
