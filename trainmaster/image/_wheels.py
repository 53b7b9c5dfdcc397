"""The Python half of the image: the project's wheel, built from the tree, and the wheels
of its runtime requirements for the image's interpreter, downloaded from PyPI.

Wheels are chosen for the image (CPython 3.11 on glibc 2.36, bookworm's), not for the host,
with pip's --platform/--python-version/--abi flags; so the host's Python never matters and
nothing is compiled. The downloaded set is the resolved closure, pinned by the lock file
when the tree has one; it is what the image installs, with --no-deps, and nothing else.
"""

from __future__ import annotations

import shutil
import sys
from importlib.metadata import version as installed_version
from pathlib import Path

from trainmaster.image._inputs import PYTHON_VERSION, SOURCE_DIRS, SOURCE_FILES, Inputs
from trainmaster.image._process import LineFn, run_step

GLIBC_MINOR = 36  # bookworm's glibc 2.36: any manylinux wheel up to 2.36 runs


def platform_flags() -> list[str]:
    """pip does not widen an explicit manylinux_2_N tag to older ones: list them all."""
    tags = [f"manylinux_2_{minor}_x86_64" for minor in range(GLIBC_MINOR, 4, -1)]
    tags += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    return [flag for tag in tags for flag in ("--platform", tag)]


def _pip() -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def build_project_wheel(inputs: Inputs, work: Path, log: Path, on_line: LineFn) -> Path:
    """The project's wheel, built from a copy of exactly the hashed files (the tree keeps
    no build/ or egg-info from it)."""
    src = work / "src"
    src.mkdir()
    for name in SOURCE_FILES:
        if (inputs.root / name).is_file():
            shutil.copy2(inputs.root / name, src / name)
    for top in SOURCE_DIRS:
        if (inputs.root / top).is_dir():
            shutil.copytree(inputs.root / top, src / top,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = work / "project"
    run_step("building the trainmaster wheel",
             [*_pip(), "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(src)],
             log, on_line)
    wheels = sorted(out.glob("trainmaster-*.whl"))
    if len(wheels) != 1:
        from trainmaster.image._errors import ImageError

        raise ImageError(f"building the trainmaster wheel left {len(wheels)} wheels in {out}")
    return wheels[0]


def download_wheelhouse(inputs: Inputs, work: Path, log: Path, on_line: LineFn) -> Path:
    """The runtime requirements' wheels (the resolved closure) for the image's Python, and
    the pip wheel that installs them."""
    house = work / "wheelhouse"
    house.mkdir()
    constraints = work / "constraints.txt"
    constraints.write_text("".join(f"{pin}\n" for pin in inputs.constraints))
    pip_pin = f"pip=={installed_version('pip')}"
    run_step(
        "downloading the runtime dependencies",
        [*_pip(), "download", "--progress-bar", "off", "--only-binary=:all:",
         *platform_flags(), "--python-version", PYTHON_VERSION, "--implementation", "cp",
         "--abi", f"cp{PYTHON_VERSION.replace('.', '')}", "--dest", str(house),
         "--constraint", str(constraints), *inputs.requirements, pip_pin],
        log, on_line,
    )
    return house
