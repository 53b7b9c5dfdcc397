"""The environment the tests run in is the one uv.lock pins, and the project's metadata
builds without setuptools deprecation warnings."""

from __future__ import annotations

import tomllib
import warnings
from importlib import metadata

from packaging.utils import canonicalize_name

from tests.helpers import ROOT


def locked_versions() -> dict[str, set[str]]:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    versions: dict[str, set[str]] = {}
    for package in lock["package"]:
        if package["name"] != "trainmaster":
            versions.setdefault(canonicalize_name(package["name"]), set()).add(package["version"])
    return versions


def test_every_installed_locked_package_has_its_locked_version() -> None:
    locked = locked_versions()
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    wrong = {name: (version, sorted(locked[name])) for name, version in installed.items()
             if name in locked and version not in locked[name]}
    assert wrong == {}, f"installed (version, locked) differ; run `make .venv/.installed`: {wrong}"
    # The CLI's error handling is tested against the typer and click the lock pins.
    for name in ("typer", "click", "pulumi", "kopf"):
        assert installed.get(canonicalize_name(name)) in locked[name], name


def test_project_metadata_has_no_setuptools_deprecations() -> None:
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert [str(w.message) for w in caught if "Deprecat" in w.category.__name__] == []
    assert dist.metadata.license_expression == "Apache-2.0"
