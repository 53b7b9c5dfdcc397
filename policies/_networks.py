"""Rules about the compute (RDMA) and storage networks."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Sequence

from policies._core import KubeObject, Violation, rule
from trainmaster.spec import ClusterSpec


@rule(
    "roce-lossless",
    "mandatory",
    "cluster",
    "A RoCE compute fabric declares its lossless settings (PFC priority, ECN, GID index).",
    defense_in_depth="spec validation",
)
def roce_lossless(spec: ClusterSpec | None, objects: Sequence[KubeObject]) -> Iterator[Violation]:
    if spec is None:
        return
    compute = spec.networks.compute
    if compute.fabric == "roce" and compute.lossless is None:
        # Without PFC a congested switch drops RDMA packets and NCCL collectives stall;
        # without the GID index NCCL may pick a RoCEv1 or IPv6 GID and not connect at all.
        yield Violation(
            "networks.compute.lossless",
            "a RoCE fabric without lossless settings drops RDMA traffic under congestion: add "
            "`lossless: {pfcPriority: 3, ecn: true, gidIndex: 3}` with your switches' values",
        )


def _subnets(spec: ClusterSpec) -> list[tuple[str, str]]:
    """(field path, subnet) of every rail, then of the storage network."""
    out = [
        (f"networks.compute.rails[{i}].subnet", rail.subnet)
        for i, rail in enumerate(spec.networks.compute.rails)
    ]
    if spec.networks.storage is not None:
        out.append(("networks.storage.subnet", spec.networks.storage.subnet))
    return out


@rule(
    "networks-disjoint",
    "mandatory",
    "cluster",
    "Compute rails and the storage network use disjoint subnets.",
    defense_in_depth="spec validation",
)
def networks_disjoint(
    spec: ClusterSpec | None, objects: Sequence[KubeObject]
) -> Iterator[Violation]:
    if spec is None:
        return
    parsed: list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]] = []
    for path, text in _subnets(spec):
        try:
            parsed.append((path, ipaddress.ip_network(text)))
        except ValueError as exc:
            yield Violation(path, f"{text!r} is not a subnet ({exc}): write e.g. 10.10.0.0/16")
    for a, (path_a, net_a) in enumerate(parsed):
        for path_b, net_b in parsed[a + 1 :]:
            if net_a.version == net_b.version and net_a.overlaps(net_b):
                # Overlapping ranges give two interfaces routes to the same addresses:
                # storage traffic would leak onto a compute rail (or the reverse).
                yield Violation(
                    path_b,
                    f"{net_b} overlaps {net_a} of {path_a}: give every rail and the storage "
                    "network its own subnet",
                )
