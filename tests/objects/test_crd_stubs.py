"""Third-party CRD stubs: rendered only with `thirdPartyCrds: IfAbsent` (never by default),
marked as stubs, and never applied over a CRD that another manager installed
(`foreign_manager`)."""

from __future__ import annotations

from typing import Any

from tests.helpers import stack_doc
from trainmaster.api import STUB_ANNOTATION
from trainmaster.objects import (
    NETWORK_ATTACHMENT_CRD,
    REQUIRED_THIRD_PARTY_CRDS,
    THIRD_PARTY_CRD_NAMES,
    build_all,
    foreign_manager,
    third_party_crds,
)
from trainmaster.spec import validate_data


def _crd_names(third_party: str | None) -> set[str]:
    doc = stack_doc("dev")
    if third_party is not None:
        doc["thirdPartyCrds"] = third_party
    return {c["metadata"]["name"] for c in build_all(validate_data(doc, "test"))["crds"]}


def test_stubs_only_when_asked() -> None:
    assert not THIRD_PARTY_CRD_NAMES & _crd_names(None)  # the default: Skip
    assert not THIRD_PARTY_CRD_NAMES & _crd_names("Skip")
    assert not THIRD_PARTY_CRD_NAMES & _crd_names("Never")
    assert _crd_names("IfAbsent") >= THIRD_PARTY_CRD_NAMES
    for setting in (None, "Never", "IfAbsent"):
        assert "trainingjobs.trainmaster.io" in _crd_names(setting)


def test_multus_crd_has_no_stand_in_whatever_the_spec_says() -> None:
    """A stored NAD that no Multus acts on attaches nothing: the cluster must have Multus."""
    assert NETWORK_ATTACHMENT_CRD not in _crd_names("IfAbsent") | _crd_names("Never")
    assert NETWORK_ATTACHMENT_CRD not in THIRD_PARTY_CRD_NAMES
    assert REQUIRED_THIRD_PARTY_CRDS[("k8s.cni.cncf.io", "NetworkAttachmentDefinition")] == (
        NETWORK_ATTACHMENT_CRD, "Multus")


def test_every_stub_is_annotated() -> None:
    for crd in third_party_crds():
        assert crd["metadata"]["annotations"][STUB_ANNOTATION] == "true"


def _existing(managers: list[str], stub: bool, labels: dict[str, str] | None = None
              ) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "servicemonitors.monitoring.coreos.com",
        "managedFields": [{"manager": m, "operation": "Apply"} for m in managers],
        "labels": labels or {},
    }
    if stub:
        meta["annotations"] = {STUB_ANNOTATION: "true"}
    return {"metadata": meta}


def test_our_stub_is_ours() -> None:
    assert foreign_manager(_existing(["trainmaster", "kube-apiserver"], stub=True)) is None
    assert foreign_manager(_existing(["pulumi-kubernetes"], stub=True)) is None
    # Pulumi's provider applies each resource as pulumi-kubernetes-<suffix>.
    assert foreign_manager(_existing(["pulumi-kubernetes-4407419b", "kube-apiserver"],
                                     stub=True)) is None
    assert foreign_manager(_existing(["pulumi-kubernetesx"], stub=True)) == "pulumi-kubernetesx"


def test_another_manager_owns_it() -> None:
    assert foreign_manager(_existing(["helm", "kube-apiserver"], stub=False)) == "helm"
    # Even our annotation does not make it ours once someone else manages fields of it.
    assert foreign_manager(_existing(["trainmaster", "kubectl"], stub=True)) == "kubectl"


def test_a_crd_without_our_annotation_is_foreign() -> None:
    got = foreign_manager(_existing(["trainmaster"], stub=False,
                                    labels={"app.kubernetes.io/managed-by": "Helm"}))
    assert got == "Helm"
    assert foreign_manager(_existing([], stub=False)) == "unknown"
