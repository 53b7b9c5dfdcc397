"""The monitoring stack's objects on the real API server (no real nodes needed): the
operator's own CRDs at the pinned version are installed over trainmaster's stand-ins, the
Prometheus and Alertmanager CRs pass their real schemas, the dev stack's rendered
ServiceMonitors, PodMonitor and PrometheusRule pass them too, and `trainmaster apply` keeps
the real CRDs, naming their owner. A cluster of its own: the session cluster keeps its
stand-ins. What the operator then does with them: test_real_monitoring.py (real nodes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers import STACKS
from trainmaster.api import STUB_ANNOTATION
from trainmaster.apply import apply_spec
from trainmaster.cluster import _monitoring
from trainmaster.cluster._temporary import temporary_cluster
from trainmaster.kubeclient import SyncKube, crd_path
from trainmaster.objects import all_objects
from trainmaster.spec import load_spec

pytestmark = [pytest.mark.integration]


def test_the_real_crds_replace_the_stand_ins_and_accept_what_trainmaster_renders(
    tmp_path: Path, trainmaster_home: Path,
) -> None:
    from trainmaster.toolchain import build

    build(["prometheus-operator"])  # the CRDs come from its module (cached once built)
    doc = yaml.safe_load((STACKS / "dev" / "cluster.yaml").read_text())
    doc["metadata"]["name"] = "moncrd"
    doc["thirdPartyCrds"] = "IfAbsent"  # the stand-ins first: asked for explicitly
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    spec = load_spec(path)
    lines: list[str] = []
    with temporary_cluster(doc, None, print, nodes=len(spec.nodes), kube_scheduler=False) as kc:
        # First the stand-ins, as a cluster that ran trainmaster before the stack has them.
        apply_spec(kc, spec, lines.append)
        with SyncKube.connect(kc) as kube:
            before = kube.get(crd_path("servicemonitors.monitoring.coreos.com"))
        assert before["metadata"]["annotations"][STUB_ANNOTATION] == "true"

        applied = _monitoring.install(kc, "monitoring", "moncrd", "15s")
        assert {"Prometheus/trainmaster", "Alertmanager/trainmaster",
                "Deployment/prometheus-operator"} <= set(applied)
        lines.clear()
        apply_spec(kc, spec, lines.append)
        with SyncKube.connect(kc) as kube:
            after = kube.get(crd_path("servicemonitors.monitoring.coreos.com"))
            # The real schema, not the stand-in's open one, and no stub annotation left.
            assert STUB_ANNOTATION not in (after["metadata"].get("annotations") or {})
            assert after["metadata"]["annotations"]["operator.prometheus.io/version"] == "0.85.0"
            for obj in all_objects(spec):
                if obj["kind"] in ("ServiceMonitor", "PodMonitor", "PrometheusRule"):
                    plural = obj["kind"].lower() + "s"
                    stored = kube.get(f"/apis/monitoring.coreos.com/v1/namespaces/"
                                      f"{obj['metadata']['namespace']}/{plural}/"
                                      f"{obj['metadata']['name']}")
                    assert stored["spec"], obj["metadata"]
            prom = kube.get("/apis/monitoring.coreos.com/v1/namespaces/monitoring/"
                            "prometheuses/trainmaster")
            assert prom["spec"]["podMonitorSelector"] == {
                "matchLabels": {"app.kubernetes.io/part-of": "trainmaster"}}
    kept = [line for line in lines if line.startswith("kept CustomResourceDefinition/")]
    assert len(kept) == 3 and all("belongs to prometheus-operator" in k for k in kept), lines
