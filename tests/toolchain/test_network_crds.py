"""The network-crds family compiles nothing: it copies the CRDs its projects publish out of the
pinned modules (through the Go module proxy's cache), so `cluster up` installs the real ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trainmaster.toolchain import RECIPES, _build


def test_a_data_family_copies_the_published_crds(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINMASTER_CACHE", str(tmp_path))
    (result,) = _build.build(["network-crds"])
    assert not result.cached
    crds = {}
    for _, _, dest in RECIPES["network-crds"].module_files:
        if dest.startswith("crds/"):
            (doc,) = [d for d in yaml.safe_load_all((result.directory / dest).read_text()) if d]
            crds[doc["metadata"]["name"]] = doc
    assert set(crds) == {
        "network-attachment-definitions.k8s.cni.cncf.io",
        "ippools.whereabouts.cni.cncf.io",
        "overlappingrangeipreservations.whereabouts.cni.cncf.io",
        "nodeslicepools.whereabouts.cni.cncf.io",
    }
    nad = crds["network-attachment-definitions.k8s.cni.cncf.io"]["spec"]
    assert (nad["group"], nad["names"]["kind"]) == ("k8s.cni.cncf.io",
                                                    "NetworkAttachmentDefinition")
    install = yaml.safe_load_all((result.directory / "whereabouts/daemonset-install.yaml")
                                 .read_text())
    kinds = {(d["kind"], d["metadata"]["name"]) for d in install if d}
    assert {("ServiceAccount", "whereabouts"), ("ClusterRole", "whereabouts-cni"),
            ("ClusterRoleBinding", "whereabouts")} <= kinds
    # Only the data landed: no binary, and a second build is the cached one.
    made = sorted(p.name for p in result.directory.iterdir())
    assert made == [".complete", "crds", "whereabouts"]
    assert _build.build(["network-crds"])[0].cached
