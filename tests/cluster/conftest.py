"""Fixtures of the tests that build the real-node network fabric by hand."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainmaster.cluster import _fabric, _host


@pytest.fixture()
def slot(tmp_path: Path) -> Iterator[int]:
    """A slot held for the test as a running cluster holds it (its record exists); its
    fabric is deleted and the slot released afterwards."""
    if os.geteuid() != 0:
        pytest.fail("needs root (it makes bridges, veths and netns)")
    state = tmp_path / "state"
    state.mkdir()
    (state / "cluster.json").write_text("{}")
    held = _host.claim_slot(state)
    try:
        yield held
    finally:
        _fabric.delete(held)
        _host.release_slot(held, state)


@pytest.fixture()
def netns() -> Iterator[list[str]]:
    """Network namespaces a test makes (it appends their names); deleted afterwards."""
    made: list[str] = []
    yield made
    for name in made:
        _host.run(["ip", "netns", "delete", name], check=False)
