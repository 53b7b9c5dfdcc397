"""The image's cache key and requirement set, on small trees (no build)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import ROOT
from trainmaster.image import DEPLOY_ONLY, ImageError, read_inputs
from trainmaster.image._inputs import lock_constraints
from trainmaster.image._wheels import platform_flags

PYPROJECT = """\
[project]
name = "trainmaster"
version = "9.9.9"
dependencies = ["pyyaml>=6", "pulumi>=3.200,<4", "pulumi-kubernetes>=4", "cryptography>=42"]
[project.optional-dependencies]
examples = ["numpy>=1.26"]
dev = ["pytest"]
"""


def _tree(root: Path) -> Path:
    (root / "trainmaster").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "trainmaster" / "__init__.py").write_text("x = 1\n")
    return root


def test_runtime_requirements_leave_out_deploy_tools_and_add_the_examples(
        tmp_path: Path) -> None:
    inputs = read_inputs(_tree(tmp_path))
    assert inputs.version == "9.9.9"
    assert inputs.requirements == ("pyyaml>=6", "numpy>=1.26")
    project = read_inputs(ROOT)
    assert not {r.split(">")[0].split("=")[0] for r in project.requirements} & DEPLOY_ONLY


def test_digest_follows_the_sources_and_nothing_else(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    first = read_inputs(root).digest()
    assert read_inputs(root).digest() == first
    (root / "trainmaster" / "__pycache__").mkdir()
    (root / "trainmaster" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (root / "notes.txt").write_text("not an input")
    assert read_inputs(root).digest() == first
    (root / "trainmaster" / "__init__.py").write_text("x = 2\n")
    changed = read_inputs(root).digest()
    assert changed != first
    (root / "examples").mkdir()
    (root / "examples" / "train.py").write_text("print(1)\n")
    assert read_inputs(root).digest() != changed


def test_a_uv_lock_pins_what_it_locks(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "uv.lock").write_text("""\
version = 1
[[package]]
name = "PyYAML"
version = "6.0.2"
source = { registry = "https://pypi.org/simple" }
[[package]]
name = "numpy"
version = "2.2.0"
source = { registry = "https://pypi.org/simple" }
[[package]]
name = "numpy"
version = "1.26.4"
source = { registry = "https://pypi.org/simple" }
[[package]]
name = "trainmaster"
version = "9.9.9"
source = { editable = "." }
""")
    assert lock_constraints(root / "uv.lock") == ("pyyaml==6.0.2",)
    assert read_inputs(root).constraints == ("pyyaml==6.0.2",)
    before = read_inputs(root).digest()
    (root / "uv.lock").write_text((root / "uv.lock").read_text().replace("6.0.2", "6.0.3"))
    assert read_inputs(root).digest() != before


def test_a_tree_without_pyproject_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match="pass --source"):
        read_inputs(tmp_path)


def test_wheels_are_chosen_for_bookworms_glibc() -> None:
    flags = platform_flags()
    assert flags[:2] == ["--platform", "manylinux_2_36_x86_64"]
    assert "manylinux2014_x86_64" in flags and "manylinux_2_37_x86_64" not in flags

