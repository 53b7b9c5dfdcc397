"""Monitoring on the real control plane: the NIC agent sets NICHealthy on a kwok node, the
operator fences on it and exports what it sees on /metrics; `trainmaster apply` leaves a
third-party CRD of another manager untouched."""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LocalCluster
from tests.helpers import stack_doc
from tests.operator.kit import OperatorEnv, wait_for
from tests.scheduler.live import free_port, scrape_metrics
from trainmaster.api import UNHEALTHY_TAINT
from trainmaster.apply import apply_objects
from trainmaster.kubeclient import ApiError, crd_path, node_path
from trainmaster.nodeagent import NicAgent, NicAgentConfig, NicVerdict
from trainmaster.objects import build_all
from trainmaster.operator import OperatorThread
from trainmaster.operator._fence import unfence
from trainmaster.spec import validate_data

pytestmark = pytest.mark.integration


def _scrape_when(port: int, sample: str, value: float) -> dict[str, float] | None:
    """The scrape once `sample` has `value`, else None."""
    metrics = scrape_metrics(port)
    return metrics if metrics.get(sample) == value else None


def _port_files(root: Path, device: str, state: str, phys: str) -> None:
    folder = root / "class" / "infiniband" / device / "ports" / "1"
    (folder / "counters").mkdir(parents=True, exist_ok=True)
    (folder / "state").write_text(state + "\n")
    (folder / "phys_state").write_text(phys + "\n")
    (folder / "link_layer").write_text("InfiniBand\n")
    (folder / "counters" / "link_downed").write_text("0\n")


def _conditions(env: OperatorEnv, node: str) -> dict[str, dict[str, str]]:
    status = env.kube.get(node_path(node)).get("status") or {}
    return {c["type"]: c for c in status.get("conditions") or []}


def _healthy_gpu_node(env: OperatorEnv) -> str:
    for node in env.kube.list(node_path()):
        spec, labels = node.get("spec") or {}, node["metadata"].get("labels") or {}
        gpus = int((node.get("status") or {}).get("allocatable", {}).get("nvidia.com/gpu", 0))
        if gpus and not spec.get("unschedulable") and not spec.get("taints") \
                and labels.get("type") == "kwok":
            return str(node["metadata"]["name"])
    raise AssertionError("no healthy kwok GPU node")


def _node_with_active_ports(env: OperatorEnv, tmp_path: Path, *devices: str
                            ) -> tuple[str, Path]:
    """A healthy kwok GPU node and a sysfs tree in which ``devices`` are active."""
    sysfs = tmp_path / "sys"
    for device in devices:
        _port_files(sysfs, device, "4: ACTIVE", "5: LinkUp")
    return _healthy_gpu_node(env), sysfs


def test_nic_agent_sets_nichealthy_and_the_operator_fences_and_exports_it(
    idle_env: OperatorEnv, tmp_path: Path
) -> None:
    env = idle_env
    node, sysfs = _node_with_active_ports(env, tmp_path, "mlx5_0", "mlx5_1")
    port = free_port()
    config = dataclasses.replace(env.config, metrics_port=port)
    agent_config = NicAgentConfig(node=node, sysfs=sysfs, devices=("mlx5_0", "mlx5_1"))
    ready = f'trainmaster_operator_node_ready{{node="{node}"}}'
    fenced = f'trainmaster_operator_node_fenced{{node="{node}"}}'
    healthy = f'trainmaster_operator_node_healthy{{node="{node}"}}'
    try:
        with OperatorThread(config):
            metrics = wait_for(lambda: _scrape_when(port, ready, 1), f"{ready} on /metrics")
            assert metrics[f'trainmaster_operator_node_gpus{{node="{node}"}}'] > 0
            assert metrics[fenced] == 0

            verdict = env.kube.run(_once(env, agent_config))
            assert verdict.healthy
            assert _conditions(env, node)["NICHealthy"]["status"] == "True"

            _port_files(sysfs, "mlx5_1", "1: DOWN", "3: Disabled")
            verdict = env.kube.run(_once(env, agent_config))
            assert (verdict.healthy, verdict.reason) == (False, "PortDown")
            condition = _conditions(env, node)["NICHealthy"]
            assert (condition["status"], condition["reason"]) == ("False", "PortDown")
            assert "mlx5_1/1 DOWN/Disabled" in condition["message"]
            # The other conditions (kwok's Ready, ...) are still there.
            assert _conditions(env, node)["Ready"]["status"] == "True"

            def is_fenced() -> bool:
                taints = (env.kube.get(node_path(node)).get("spec") or {}).get("taints") or []
                return any(t.get("key") == UNHEALTHY_TAINT for t in taints)

            wait_for(is_fenced, f"{node} fenced on NICHealthy=False")
            after = wait_for(lambda: _scrape_when(port, fenced, 1), f"{fenced} == 1")
            assert after[healthy] == 0
            assert after["trainmaster_operator_fences_total"] >= 1
    finally:
        _port_files(sysfs, "mlx5_1", "4: ACTIVE", "5: LinkUp")
        with contextlib.suppress(Exception):
            env.kube.run(_once(env, agent_config))
        env.kube.run(unfence(env.kube.kube, node))


async def _once(env: OperatorEnv, config: NicAgentConfig) -> NicVerdict:
    return await NicAgent(config, env.kube.kube).once()


class _CountedWrites:
    """The real API client, counting the agent's condition writes (PATCH node/status)."""

    def __init__(self, kube: Any) -> None:
        self.kube, self.writes = kube, 0

    async def get(self, path: str) -> Any:
        return await self.kube.get(path)

    async def patch(self, path: str, body: Any, kind: str) -> Any:
        self.writes += 1
        return await self.kube.patch(path, body, kind)


def test_nic_agent_looks_often_but_writes_only_changes_and_heartbeats(
    idle_env: OperatorEnv, tmp_path: Path
) -> None:
    # Looking is sysfs only; the API server sees a write when the verdict changes, at once,
    # and otherwise one per heartbeat: a 5 s look on 10,000 nodes must not be 4,000 writes/s.
    import asyncio
    import time

    env = idle_env
    node, sysfs = _node_with_active_ports(env, tmp_path, "mlx5_0")

    async def run(heartbeat: float, seconds: float, then_down_for: float = 0.0
                  ) -> tuple[int, float | None]:
        counted = _CountedWrites(env.kube.kube)
        config = NicAgentConfig(node=node, sysfs=sysfs, devices=("mlx5_0",), interval=0.05,
                                heartbeat=heartbeat)
        stop = asyncio.Event()
        task = asyncio.create_task(NicAgent(config, counted).run(stop))  # type: ignore[arg-type]
        await asyncio.sleep(seconds)
        seen_down = None
        if then_down_for:
            _port_files(sysfs, "mlx5_0", "1: DOWN", "3: Disabled")
            start = time.monotonic()
            while seen_down is None and time.monotonic() - start < 5:
                status = (await env.kube.kube.get(node_path(node))).get("status") or {}
                if any(c["type"] == "NICHealthy" and c["status"] == "False"
                       for c in status.get("conditions") or []):
                    seen_down = time.monotonic() - start
                await asyncio.sleep(0.02)
            await asyncio.sleep(then_down_for)
        stop.set()
        await task
        return counted.writes, seen_down

    try:
        # 30 looks of healthy ports, then the port down: two writes in all, the second
        # within a look or two of the change.
        writes, seen_down = env.kube.run(run(3600, 1.5, then_down_for=1.0))
        assert writes == 2, writes
        assert seen_down is not None and seen_down < 1.0, seen_down
        # An unchanged verdict is written once per heartbeat (0.4 s here, over 2 s).
        _port_files(sysfs, "mlx5_0", "4: ACTIVE", "5: LinkUp")
        writes, _ = env.kube.run(run(0.4, 2.0))
        assert 4 <= writes <= 7, writes
        assert _conditions(env, node)["NICHealthy"]["status"] == "True"
    finally:
        _port_files(sysfs, "mlx5_0", "4: ACTIVE", "5: LinkUp")
        with contextlib.suppress(Exception):
            env.kube.run(_once(env, NicAgentConfig(node=node, sysfs=sysfs,
                                                   devices=("mlx5_0",))))


_HELM_FIELDS = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {
        "name": "podmonitors.monitoring.coreos.com",
        "labels": {"app.kubernetes.io/managed-by": "Helm"},
        "annotations": {"meta.helm.sh/release-name": "kube-prometheus-stack"},
    },
}


def test_apply_leaves_a_third_party_crd_of_another_manager_untouched(
    cluster: LocalCluster, idle_env: OperatorEnv
) -> None:
    kube = idle_env.kube
    name = "podmonitors.monitoring.coreos.com"
    crds = build_all(validate_data({**stack_doc("dev"), "thirdPartyCrds": "IfAbsent"},
                                   "test"))["crds"]
    stub = next(c for c in crds if c["metadata"]["name"] == name)
    kube.run(kube.kube.apply(stub))  # our stub, as a fresh cluster would have it
    try:
        # Another manager (here: Helm's field manager) takes the CRD over.
        kube.run(kube.kube.request(
            "PATCH", crd_path(name), body=_HELM_FIELDS,
            params={"fieldManager": "helm", "force": "true"},
            content_type="application/apply-patch+yaml"))
        before = kube.get(crd_path(name))
        lines: list[str] = []
        applied = apply_objects(cluster.kubeconfig, crds, lines.append)
        after = kube.get(crd_path(name))
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert after["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
        assert not any(k.endswith(f"/{name}") for k in applied)
        assert f"kept CustomResourceDefinition/{name}: it belongs to helm" in lines
        # Our own stubs (and our own CRDs) were applied as usual.
        assert any(k.endswith("/servicemonitors.monitoring.coreos.com") for k in applied)
        assert any(k.endswith("/trainingjobs.trainmaster.io") for k in applied)
    finally:
        # Helm lets go of its fields: the CRD is our stub again for the rest of the session.
        with contextlib.suppress(ApiError):
            kube.run(kube.kube.request(
                "PATCH", crd_path(name),
                body={k: _HELM_FIELDS[k] for k in ("apiVersion", "kind")}
                | {"metadata": {"name": name}},
                params={"fieldManager": "helm", "force": "true"},
                content_type="application/apply-patch+yaml"))


def _topology_spec(env: OperatorEnv, base: Path, path: Path, named: str, tag: str) -> Path:
    """The session's spec with an explicit tree that names `named`, and nodeLabels."""
    import yaml

    doc = yaml.safe_load(base.read_text())
    doc["metadata"]["namespace"] = env.namespace
    doc["topology"].pop("generate", None)
    doc["topology"]["switches"] = [{"name": f"sp-{tag}", "switches": [
        {"name": f"lf-{tag}", "nodes": [{"name": named}]}]}]
    doc["topology"]["nodeLabels"] = {"spine": "example.com/pod", "leaf": "example.com/block"}
    doc["jobs"] = []
    path.write_text(yaml.safe_dump(doc))
    return path


def _gpu_node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    alloc = {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi", "pods": "110"}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"kwok.x-k8s.io/node": "fake"}},
        # Nothing of the session's may land here.
        "spec": {"taints": [{"key": "trainmaster.io/test-topology", "effect": "NoSchedule"}]},
        "status": {"capacity": alloc, "allocatable": alloc},
    }


def test_the_operator_labels_topology_from_the_tree_and_cluster_labels_and_reports_the_rest(
    cluster: LocalCluster, idle_env: OperatorEnv, tmp_path: Path
) -> None:
    from trainmaster.operator import SpecRef

    env = idle_env
    tag = env.namespace[-8:]
    named = f"tmtopo-{tag}-named"
    mapped, stranger = f"tmtopo-{tag}-mapped", f"tmtopo-{tag}-stranger"
    leaf_label = "topology.trainmaster.io/leaf"
    leaf = f"lf-{tag}"
    spec_file = _topology_spec(env, cluster.spec, tmp_path / "cluster.yaml", named, tag)
    port = free_port()
    config = dataclasses.replace(env.config, spec=SpecRef(file=spec_file), metrics_port=port)
    known = "trainmaster_operator_node_topology_known"
    try:
        env.kube.post(node_path(), _gpu_node(mapped, {"example.com/pod": "pod-2",
                                                      "example.com/block": "block-7"}))
        env.kube.post(node_path(), _gpu_node(stranger, {}))
        env.kube.post(node_path(), _gpu_node(named, {}))
        with OperatorThread(config):
            def labels_of(node: str) -> dict[str, str]:
                return dict(env.kube.get(node_path(node))["metadata"].get("labels") or {})

            wait_for(lambda: labels_of(named).get(leaf_label) == leaf,
                     f"{named} labelled {leaf_label}={leaf} from the tree")
            assert labels_of(named)["topology.trainmaster.io/spine"] == f"sp-{tag}"
            def mapped_labels() -> dict[str, str] | None:
                labels = labels_of(mapped)
                return labels if labels.get(leaf_label) else None

            got = wait_for(mapped_labels, f"{mapped} labelled from example.com/*")
            assert got["topology.trainmaster.io/spine"] == "pod-2"
            assert got[leaf_label] == "block-7"

            def reported() -> list[dict[str, Any]]:
                return [e for e in env.kube.list("/api/v1/namespaces/default/events")
                        if e.get("reason") == "TopologyUnknown"
                        and (e.get("involvedObject") or {}).get("name") == stranger]

            (event,) = wait_for(reported, f"a TopologyUnknown Event for {stranger}")
            assert "topology.trainmaster.io/spine" in str(event["message"])
            assert leaf_label not in labels_of(stranger)
            # Both gauges, in one scrape once each shows its value: a scrape taken when the
            # stranger's is set may be from before the mapped node's labels were seen.
            wait_for(lambda: (m := _scrape_when(port, f'{known}{{node="{stranger}"}}', 0))
                     and m.get(f'{known}{{node="{mapped}"}}') == 1 and m,
                     f"{known} of {stranger} == 0 and of {mapped} == 1")
    finally:
        for node in (named, mapped, stranger):
            with contextlib.suppress(ApiError):
                env.kube.delete(node_path(node))


@pytest.mark.parametrize("third_party", ["Skip", "IfAbsent", "Never"])
def test_apply_on_a_cluster_without_multus_names_it_and_applies_nothing(
    cluster: LocalCluster, idle_env: OperatorEnv, third_party: str
) -> None:
    """NetworkAttachmentDefinitions have no stand-in CRD any more, whatever thirdPartyCrds
    says: without Multus's CRD, apply stops before applying anything and says to install it."""
    from trainmaster.apply import ApplyError
    from trainmaster.cluster._network_crds import crd_documents
    from trainmaster.kubeclient import namespace_path
    from trainmaster.objects import NETWORK_ATTACHMENT_CRD, all_objects

    kube = idle_env.kube
    name = NETWORK_ATTACHMENT_CRD
    doc = stack_doc("dev")
    doc["thirdPartyCrds"] = third_party
    doc["metadata"]["namespace"] = f"{idle_env.namespace}-{third_party.lower()}"
    doc["jobs"] = []
    spec = validate_data(doc, "test")
    objects = all_objects(spec)
    assert not any(o["metadata"]["name"] == name for o in objects)
    assert any(o["kind"] == "NetworkAttachmentDefinition" for o in objects)
    kube.delete(crd_path(name))
    try:
        wait_for(lambda: _absent(kube, crd_path(name)), f"CRD {name} gone")
        with pytest.raises(ApplyError, match=f"CRD {name} is missing: install Multus$"):
            apply_objects(cluster.kubeconfig, objects)
        assert _absent(kube, namespace_path(spec.metadata.namespace)), "applied halfway"
    finally:
        # Back as `cluster up` installed it: the Network Plumbing WG's CRD.
        with contextlib.suppress(ApiError):
            kube.post(crd_path(), crd_documents(real_nodes=False)[0])


def _absent(kube: Any, path: str) -> bool:
    try:
        kube.get(path)
    except ApiError as exc:
        if exc.not_found:
            return True
        raise
    return False
