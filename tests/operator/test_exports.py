"""Each package's public API is exactly what its __init__ exports in __all__."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("package", ["trainmaster.operator", "trainmaster.launch"])
def test_all_matches_the_public_names(package: str) -> None:
    module = importlib.import_module(package)
    public = {name for name in vars(module) if not name.startswith("_")}
    submodules = {name for name in public
                  if type(getattr(module, name)).__name__ == "module"}
    assert sorted(module.__all__) == sorted(public - submodules)
