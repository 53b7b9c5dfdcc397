"""The secondary networks' CRDs, as their projects publish them, applied by `cluster up`.

A real cluster has the NetworkAttachmentDefinition CRD from Multus, and whereabouts' IPPool and
OverlappingRangeIPReservation CRDs from whereabouts. trainmaster no longer stands in for them:
the local cluster gets the same definitions, read from the pinned modules (the toolchain's
`network-crds` family), every cluster the NAD CRD (the rendered stacks hold NADs) and clusters
with real nodes, where whereabouts really allocates, its CRDs too.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from trainmaster.cluster._processes import ClusterError
from trainmaster.kubeclient import ApiError, SyncKube, crd_path
from trainmaster.objects import NETWORK_ATTACHMENT_CRD
from trainmaster.toolchain import tool_path

WHEREABOUTS_CRDS = (
    "ippools.whereabouts.cni.cncf.io",
    "overlappingrangeipreservations.whereabouts.cni.cncf.io",
    "nodeslicepools.whereabouts.cni.cncf.io",
)


def _file(name: str) -> Path:
    """The CRD file of `name` in the network-crds family (whereabouts names its files
    <group>_<plural>.yaml, the NAD client's is copied as <name>.yaml)."""
    plural, group = name.split(".", 1)
    dest = f"crds/{name}.yaml" if name == NETWORK_ATTACHMENT_CRD else f"crds/{group}_{plural}.yaml"
    return tool_path(dest)


def crd_documents(real_nodes: bool) -> list[dict[str, Any]]:
    names = [NETWORK_ATTACHMENT_CRD, *(WHEREABOUTS_CRDS if real_nodes else ())]
    docs = []
    for name in names:
        found = [d for d in yaml.safe_load_all(_file(name).read_text()) if d]
        if len(found) != 1 or found[0].get("metadata", {}).get("name") != name:
            raise ClusterError(f"{_file(name)} does not hold exactly the CRD {name}")
        docs.append(found[0])
    return docs


def install(kubeconfig: Path, real_nodes: bool, timeout: float = 60) -> list[str]:
    """Apply the CRDs and wait until the API server serves them; returns their names."""
    docs = crd_documents(real_nodes)
    names = [d["metadata"]["name"] for d in docs]
    with SyncKube.connect(kubeconfig) as kube:
        for doc in docs:
            try:
                kube.apply(doc)
            except ApiError as exc:
                raise ClusterError(f"applying CRD {doc['metadata']['name']} failed: {exc}"
                                   ) from None
        wait_established(kube, names, timeout)
    return names


def wait_established(kube: SyncKube, names: list[str], timeout: float) -> None:
    """Wait until every named CRD is Established (its kind can be created)."""
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending and time.monotonic() < deadline:
        for name in sorted(pending):
            conditions = (kube.get(crd_path(name)).get("status") or {}).get("conditions")
            if any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in conditions or []):
                pending.discard(name)
        if pending:
            time.sleep(0.2)
    if pending:
        raise ClusterError(f"CRDs not established after {timeout:.0f}s: {', '.join(pending)}")
