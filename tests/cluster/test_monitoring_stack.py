"""What `cluster up --monitoring` installs, checked without a cluster: the rights it grants
are exactly docs/security.md's `monitoring-grants` table, the operator writes nowhere but
the monitoring namespace, the Prometheus CR selects every monitor and rule the spec renders,
and the images hold what the operator's pods run. The live stack: test_real_monitoring.py.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from tests.helpers import STACKS
from tests.security.documented import Right, documented_rights
from trainmaster.cluster._monitoring import stack_objects
from trainmaster.image._static import StaticImage, write_static_archive
from trainmaster.objects import all_objects, grants
from trainmaster.spec import load_spec

WRITES = {"create", "update", "patch", "delete", "deletecollection", "*"}


def _objects() -> list[dict[str, Any]]:
    return stack_objects("monitoring", "dev", "15s")


def test_the_stack_grants_exactly_the_documented_rights() -> None:
    documented = documented_rights("monitoring-grants")
    granted = {Right(g.account, g.scope, g.api_group, g.resource, frozenset(g.verbs),
                     frozenset(g.names)) for g in grants(_objects())}
    assert sorted(map(str, granted - set(documented))) == [], "granted, not documented"
    assert sorted(map(str, set(documented) - granted)) == [], "documented, not granted"


def test_cluster_wide_the_stack_only_reads() -> None:
    cluster_wide = [g for g in grants(_objects()) if g.scope == "cluster"]
    assert cluster_wide
    assert all(not WRITES & set(g.verbs) for g in cluster_wide), cluster_wide
    # ... and the operator is told to make its StatefulSets and Secrets only where its Role is.
    (deploy,) = [o for o in _objects() if o["kind"] == "Deployment"]
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--prometheus-instance-namespaces=monitoring" in args
    assert "--alertmanager-instance-namespaces=monitoring" in args


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, selector  # what the CR uses
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def test_prometheus_selects_every_rendered_monitor_and_rule_and_nothing_hand_written() -> None:
    (prom,) = [o for o in _objects() if o["kind"] == "Prometheus"]
    spec = prom["spec"]
    rendered = all_objects(load_spec(STACKS / "dev" / "cluster.yaml"))
    selectors = {"ServiceMonitor": "serviceMonitorSelector", "PodMonitor": "podMonitorSelector",
                 "PrometheusRule": "ruleSelector"}
    for kind, key in selectors.items():
        objs = [o for o in rendered if o["kind"] == kind]
        assert objs, kind
        for obj in objs:
            assert _matches(spec[key], obj["metadata"]["labels"]), (kind, obj["metadata"])
        assert spec[key.replace("Selector", "NamespaceSelector")] == {}  # any namespace
    # The operator generates the scrape configuration: none is given by hand.
    assert not {"additionalScrapeConfigs", "scrapeConfigSelector"} & set(spec)
    # A monitor that is not trainmaster's is not selected.
    assert not _matches(spec["serviceMonitorSelector"], {"app.kubernetes.io/part-of": "other"})


def test_every_pod_of_the_stack_runs_on_the_real_nodes_as_non_root() -> None:
    for obj in _objects():
        if obj["kind"] in ("Deployment", "Prometheus", "Alertmanager"):
            spec = obj["spec"]["template"]["spec"] if obj["kind"] == "Deployment" else obj["spec"]
            assert spec["nodeSelector"] == {"trainmaster.io/real-node": "true"}, obj["kind"]
            assert spec["securityContext"]["runAsNonRoot"] is True, obj["kind"]


def test_a_static_image_runs_its_binary_as_the_entrypoint(tmp_path: Path) -> None:
    # Any static binary stands in for Prometheus here: busybox, which every real node has.
    busybox = shutil.which("busybox")
    assert busybox, "Debian's busybox-static is a host package of the real nodes"
    binary = tmp_path / "prometheus"
    shutil.copyfile(busybox, binary)
    archive = tmp_path / "images.tar"
    refs = write_static_archive(
        [StaticImage("trainmaster.local/prometheus:v0", binary, "/prometheus")], archive)
    assert refs == ["trainmaster.local/prometheus:v0"]
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        (entry,) = index["manifests"]
        assert entry["annotations"]["io.containerd.image.name"] == refs[0]

        def blob(digest: str) -> bytes:
            data = tar.extractfile(f"blobs/sha256/{digest.split(':')[1]}")
            assert data is not None
            return data.read()

        manifest = json.loads(blob(entry["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
        (layer,) = manifest["layers"]
        with tarfile.open(fileobj=io.BytesIO(blob(layer["digest"])), mode="r:gz") as files:
            names = {m.name: m for m in files.getmembers()}
            assert names["bin/prometheus"].mode == 0o755
            assert names["prometheus"].isdir() and names["tmp"].mode == 0o1777
            payload = files.extractfile("bin/prometheus")
            assert payload is not None and payload.read() == binary.read_bytes()
    assert config["config"]["Entrypoint"] == ["/bin/prometheus"]
    assert config["config"]["WorkingDir"] == "/prometheus"


def test_monitoring_without_real_nodes_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "trainmaster"), "cluster",
         "up", "--spec", str(STACKS / "dev" / "cluster.yaml"), "--monitoring", "--no-build",
         "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "--real-nodes" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "state").exists()
