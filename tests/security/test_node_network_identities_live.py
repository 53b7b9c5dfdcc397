"""The real nodes' network components each talk to the API server as an identity of their
own, with only the rights they use (docs/security.md, "Node-side network components"):
Multus's thin plugin reads pods and NADs one at a time and writes a pod's status (the
network-status annotation); it cannot list, watch, change or delete anything else. Proven on
the real control plane with SubjectAccessReview, and with requests made with the token
Multus's kubeconfig holds. kube-router's NetworkPolicy controller only lists and watches what
its informers read and gets its Node; it writes nothing."""

from __future__ import annotations

from pathlib import Path

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from tests.conftest import LocalCluster
from tests.security.access import Access, Action
from tests.security.documented import _ROW, DOC
from trainmaster.cluster import _kube_router, _multus, _network_crds

pytestmark = [pytest.mark.integration]

MULTUS = f"{_multus.NAMESPACE}/{_multus.SERVICE_ACCOUNT}"
NAD = "network-attachment-definitions"
NAD_GROUP = "k8s.cni.cncf.io"

ALLOWED = [
    Action("get", "pods", namespace="trainmaster"),
    Action("get", "pods", namespace="team-a"),
    Action("update", "pods/status", namespace="trainmaster"),
    Action("get", NAD, NAD_GROUP, namespace="trainmaster"),
    Action("create", "events", namespace="trainmaster"),
    Action("patch", "events", namespace="trainmaster"),
]
REFUSED = [
    Action("list", "pods"), Action("watch", "pods"),
    Action("update", "pods", namespace="trainmaster"),
    Action("patch", "pods", namespace="trainmaster"),
    Action("delete", "pods", namespace="trainmaster"),
    Action("create", "pods", namespace="trainmaster"),
    Action("list", NAD, NAD_GROUP), Action("create", NAD, NAD_GROUP, namespace="trainmaster"),
    Action("update", NAD, NAD_GROUP, namespace="trainmaster"),
    Action("get", "secrets", namespace="kube-system"),
    Action("list", "nodes"), Action("patch", "nodes/status"),
    Action("get", "ippools", "whereabouts.cni.cncf.io", namespace="kube-system"),
]


def _documented() -> set[tuple[str, str, frozenset[str]]]:
    """docs/security.md's Multus table: (API group, resource, verbs) per row."""
    text = DOC.read_text()
    table = text.split("<!-- BEGIN expected: multus-grants -->\n", 1)[1].split(
        "<!-- END expected: multus-grants -->", 1)[0]
    rows = set()
    for line in table.splitlines():
        if (match := _ROW.match(line)) and match.group(1) == MULTUS:
            group = match.group(3).strip()
            rows.add(("" if group == "core" else group, match.group(4).strip(),
                      frozenset(v.strip() for v in match.group(5).split(","))))
    return rows


def test_the_documented_table_is_the_cluster_role() -> None:
    granted = {(group, resource, frozenset(rule["verbs"]))
               for rule in _multus.RULES for group in rule["apiGroups"]
               for resource in rule["resources"]}
    assert _documented() == granted


def test_multus_has_exactly_the_rights_the_thin_plugin_uses(
        local_cluster: LocalCluster, tmp_path: Path) -> None:
    _network_crds.install(local_cluster.kubeconfig, real_nodes=False)
    own = _multus.install(local_cluster.kubeconfig, tmp_path / "multus")
    access = Access(local_cluster.kubeconfig)
    assert [a.describe() for a in ALLOWED if not access.allowed(MULTUS, a)] == []
    assert [a.describe() for a in REFUSED if access.allowed(MULTUS, a)] == []

    # The kubeconfig Multus is given authenticates as that ServiceAccount (its token, file
    # mode 0600): listing pods is refused, naming that account.
    api = kubernetes.config.new_client_from_config(str(own))
    core = kubernetes.client.CoreV1Api(api)
    with pytest.raises(ApiException) as refused:
        core.list_pod_for_all_namespaces()
    assert refused.value.status == 403
    assert f"system:serviceaccount:{_multus.NAMESPACE}:{_multus.SERVICE_ACCOUNT}" in str(
        refused.value.body)
    assert own.stat().st_mode & 0o777 == 0o600


KUBE_ROUTER = f"{_kube_router.NAMESPACE}/{_kube_router.SERVICE_ACCOUNT}"
KUBE_ROUTER_ALLOWED = [
    *[Action(verb, kind) for verb in ("list", "watch")
      for kind in ("pods", "namespaces", "services", "nodes")],
    Action("get", "nodes"),
    Action("list", "networkpolicies", "networking.k8s.io"),
    Action("watch", "networkpolicies", "networking.k8s.io"),
    Action("list", "endpointslices", "discovery.k8s.io"),
    Action("watch", "endpointslices", "discovery.k8s.io"),
]
KUBE_ROUTER_REFUSED = [
    Action("get", "pods", namespace="trainmaster"),
    Action("get", "secrets", namespace="kube-system"), Action("list", "secrets"),
    Action("patch", "nodes"), Action("patch", "nodes/status"), Action("update", "nodes"),
    Action("update", "pods/status", namespace="trainmaster"),
    Action("delete", "pods", namespace="trainmaster"),
    Action("create", "networkpolicies", "networking.k8s.io", namespace="trainmaster"),
    Action("delete", "networkpolicies", "networking.k8s.io", namespace="trainmaster"),
    Action("update", "services/status", namespace="trainmaster"),
    Action("create", "leases", "coordination.k8s.io", namespace="kube-system"),
    Action("list", "configmaps"),
]


def _documented_kube_router() -> set[tuple[str, str, frozenset[str]]]:
    """docs/security.md's kube-router table: (API group, resource, verbs) per row."""
    table = DOC.read_text().split("<!-- BEGIN expected: kube-router-grants -->\n", 1)[1].split(
        "<!-- END expected: kube-router-grants -->", 1)[0]
    rows = set()
    for line in table.splitlines():
        if (match := _ROW.match(line)) and match.group(1) == KUBE_ROUTER:
            group = match.group(3).strip()
            rows.add(("" if group == "core" else group, match.group(4).strip(),
                      frozenset(v.strip() for v in match.group(5).split(","))))
    return rows


def test_the_documented_kube_router_table_is_its_cluster_role() -> None:
    granted = {(group, resource, frozenset(rule["verbs"]))
               for rule in _kube_router.RULES for group in rule["apiGroups"]
               for resource in rule["resources"]}
    assert _documented_kube_router() == granted


def test_kube_router_has_exactly_the_rights_its_firewall_uses(
        local_cluster: LocalCluster, tmp_path: Path) -> None:
    own = _kube_router.install(local_cluster.kubeconfig, tmp_path / "kube-router")
    access = Access(local_cluster.kubeconfig)
    assert [a.describe() for a in KUBE_ROUTER_ALLOWED
            if not access.allowed(KUBE_ROUTER, a)] == []
    assert [a.describe() for a in KUBE_ROUTER_REFUSED if access.allowed(KUBE_ROUTER, a)] == []

    # Its kubeconfig authenticates as that ServiceAccount (mode 0600): it lists pods, and
    # reading a Secret is refused, naming the account.
    api = kubernetes.config.new_client_from_config(str(own))
    core = kubernetes.client.CoreV1Api(api)
    core.list_pod_for_all_namespaces(limit=1)
    with pytest.raises(ApiException) as refused:
        core.list_namespaced_secret("kube-system")
    assert refused.value.status == 403
    assert (f"system:serviceaccount:{_kube_router.NAMESPACE}:{_kube_router.SERVICE_ACCOUNT}"
            in str(refused.value.body))
    assert own.stat().st_mode & 0o777 == 0o600
