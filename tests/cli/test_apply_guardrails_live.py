"""`apply` returns only when the guardrails it applied are in force, on the real local
control plane: its last lines say so per guarded namespace, and at that moment the API
server already refuses the probe (a dry run of a GPU pod on another scheduler)."""

from __future__ import annotations

import contextlib
import uuid

import pytest

from tests.conftest import LocalCluster
from tests.helpers import stack_doc
from trainmaster.apply import apply_objects
from trainmaster.kubeclient import ApiError, SyncKube, namespace_path, object_path
from trainmaster.objects import PROBE_REFUSAL, build_all, probe_pod
from trainmaster.spec import validate_data

pytestmark = pytest.mark.integration


def test_apply_ends_when_the_guardrails_refuse_the_probe(local_cluster: LocalCluster) -> None:
    tag = uuid.uuid4().hex[:6]
    doc = stack_doc("dev")
    doc["metadata"].update(name=f"gr-{tag}", namespace=f"gr-{tag}")
    doc["scheduler"]["name"] = f"gr-{tag}-scheduler"
    doc["jobs"] = []
    parts = build_all(validate_data(doc, "test"))
    # The namespaces and the scheduler's rights and policies (not its Deployment).
    objs = [*parts["namespace"], *[o for o in parts["scheduler"]
                                   if o["kind"] not in ("Deployment", "LocalQueue")]]
    lines: list[str] = []
    namespace = f"gr-{tag}"
    try:
        apply_objects(local_cluster.kubeconfig, objs, lines.append)
        assert lines[-1] == f"guardrails in force in namespace {namespace}"
        with SyncKube.connect(local_cluster.kubeconfig) as kube, \
                pytest.raises(ApiError) as refused:
            kube.run(kube.kube.request("POST", f"{namespace_path(namespace)}/pods",
                                       params={"dryRun": "All"}, body=probe_pod()))
        assert refused.value.status in (403, 422)
        assert PROBE_REFUSAL in str(refused.value.body)
    finally:
        with SyncKube.connect(local_cluster.kubeconfig) as kube:
            for obj in objs:
                if obj["kind"] == "Namespace" or "namespace" not in obj["metadata"]:
                    with contextlib.suppress(ApiError):
                        plural, _ = kube.run(kube.kube.resource(obj["apiVersion"],
                                                                obj["kind"]))
                        kube.delete(object_path(obj, plural), missing_ok=True)
