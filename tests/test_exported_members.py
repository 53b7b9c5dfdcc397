"""Each package's public API is exactly what its __init__ re-exports in __all__."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = ["trainmaster.api", "trainmaster.spec", "trainmaster.objects", "trainmaster.cluster",
            "trainmaster.kubeclient", "trainmaster.toolchain", "trainmaster.scheduler",
            "components"]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_matches_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = set(module.__all__)
    public = {n for n in vars(module) if not n.startswith("_")}
    # Submodules imported for their side effects are attributes too; they are not API;
    # nor are typing helpers a lazy __getattr__ needs.
    public -= {n for n in public if type(getattr(module, n)).__name__ == "module"}
    public -= {"annotations", "Any", "TYPE_CHECKING"}
    # A package may load heavy names lazily (module __getattr__): they must still resolve.
    lazy = {n for n in exported - public if getattr(module, n, None) is not None}
    assert exported == public | lazy
    assert module.__all__ == sorted(module.__all__, key=lambda s: (not s.isupper(), s))
