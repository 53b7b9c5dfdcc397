"""Without the Prometheus operator, the default spec installs no stand-in CRD: apply says
the operator is absent and leaves its objects out (`thirdPartyCrds: Skip`), and `Never`
refuses before applying anything. On the real local control plane, with the operator's
three CRDs removed for the test (put back after, as they were, if they were there)."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest

from tests.conftest import LocalCluster
from tests.helpers import stack_doc
from tests.scheduler.live import wait_for
from trainmaster.apply import ApplyError, apply_objects
from trainmaster.kubeclient import ApiError, SyncKube, crd_path, namespace_path
from trainmaster.objects import THIRD_PARTY_CRD_NAMES, build_all
from trainmaster.spec import validate_data

pytestmark = pytest.mark.integration


def _absent(kube: Any, path: str) -> bool:
    try:
        kube.get(path)
    except ApiError as exc:
        return exc.not_found
    return False


@contextlib.contextmanager
def _without_prometheus_crds(kube: Any) -> Any:
    """The three CRDs deleted; after, those that were there created again."""
    saved = []
    for name in sorted(THIRD_PARTY_CRD_NAMES):
        with contextlib.suppress(ApiError):
            crd = kube.get(crd_path(name))
            for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields",
                        "generation"):
                crd["metadata"].pop(key, None)
            crd.pop("status", None)
            saved.append(crd)
            kube.delete(crd_path(name))
    try:
        wait_for(lambda: all(_absent(kube, crd_path(n)) for n in THIRD_PARTY_CRD_NAMES),
                 "the Prometheus operator's CRDs gone", 60)
        yield
    finally:
        for crd in saved:
            with contextlib.suppress(ApiError):
                kube.post(crd_path(), crd)


def _objects(setting: str | None) -> tuple[str, list[dict[str, Any]]]:
    """The CRDs, namespaces and monitoring objects of a dev stack in a namespace of its own."""
    doc = stack_doc("dev")
    namespace = f"absent-{uuid.uuid4().hex[:6]}"
    doc["metadata"].update(name=namespace, namespace=namespace)
    doc["jobs"] = []
    if setting is not None:
        doc["thirdPartyCrds"] = setting
    parts = build_all(validate_data(doc, "test"))
    return namespace, [*parts["crds"], *parts["namespace"], *parts["monitoring"]]


def test_the_default_says_the_operator_is_absent_and_installs_no_stand_in(
    local_cluster: LocalCluster,
) -> None:
    with SyncKube.connect(local_cluster.kubeconfig) as kube, _without_prometheus_crds(kube):
        namespace, objs = _objects(None)
        monitors = [o for o in objs if o["apiVersion"].startswith("monitoring.coreos.com/")]
        assert monitors and not any(
            o["metadata"]["name"] in THIRD_PARTY_CRD_NAMES for o in objs)
        lines: list[str] = []
        try:
            applied = apply_objects(local_cluster.kubeconfig, objs, lines.append,
                                    skip_absent=True)
            skipped = [line for line in lines if line.startswith("skipped ")]
            assert len(skipped) == 3, lines
            assert all("the cluster lacks it; install the Prometheus operator and apply "
                       "again" in line for line in skipped)
            assert any("ServiceMonitor" in line for line in skipped)
            for name in THIRD_PARTY_CRD_NAMES:  # no stand-in installed
                assert _absent(kube, crd_path(name)), name
            assert not any("monitoring.coreos.com" in key for key in applied)
            assert any("/DaemonSet/" in key for key in applied)  # the rest applied
            assert not _absent(kube, namespace_path(namespace))
        finally:
            for ns in (namespace, f"{namespace}-system"):
                kube.delete(namespace_path(ns), missing_ok=True)

        # `Never`: refused before anything is applied, naming the operator.
        namespace, objs = _objects("Never")
        with pytest.raises(ApplyError, match="install the Prometheus operator"):
            apply_objects(local_cluster.kubeconfig, objs, skip_absent=False)
        assert _absent(kube, namespace_path(namespace)), "applied halfway"
