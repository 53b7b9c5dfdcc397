"""What each tool family is and roughly how long its cold build takes, for progress lines.

Kept apart from the recipes on purpose: a recipe's ``repr`` is part of its cache digest, so
a change of wording here must not rebuild anything.

The durations are rough ranges for a cold build (empty Go caches) on the project's 2-core
development machine, from the cold builds measured in docs/benchmarks.md "Building the
tools (cold)", docs/real-nodes.md and docs/monitoring.md (most of them on a busy machine):
they tell a reader of a CI log whether a silent stretch is normal, nothing more. A busier
machine takes longer; a warm Go build cache far less.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class About:
    what: str
    cold_minutes: tuple[int, int]
    """Rough (low, high) minutes of a cold build on 2 cores."""

    def duration(self) -> str:
        low, high = self.cold_minutes
        return f"about {low} min" if low == high else f"about {low}-{high} min"


ABOUT: dict[str, About] = {
    "k8s": About("Kubernetes control plane: kube-apiserver, kube-controller-manager, "
                 "kube-scheduler", (10, 15)),
    "kubelet": About("the kubelet of the real local nodes", (5, 18)),
    "containerd": About("containerd and its runc shim, for the real local nodes", (4, 13)),
    "cni-plugins": About("CNI reference plugins (bridge, host-local, loopback, portmap)",
                         (1, 2)),
    "coredns": About("CoreDNS, the cluster DNS of the real local nodes", (5, 19)),
    "etcd": About("etcd, the control plane's store", (1, 3)),
    "kwok": About("kwok, simulated nodes and pods", (3, 5)),
    "pulumi": About("the Pulumi CLI (engine)", (15, 20)),
    "pulumi-language-python": About("Pulumi's Python language host, for plain `pulumi`",
                                    (8, 12)),
    "pulumi-kubernetes": About("the Pulumi Kubernetes provider (with its schema)", (15, 20)),
    "multus": About("Multus (thin CNI plugin, with the thick plugin's daemon and shim), which "
                    "attaches the real nodes' pods to the rails and storage", (5, 12)),
    "kube-router": About("kube-router, whose NetworkPolicy controller runs on the real nodes",
                         (6, 15)),
    "versitygw": About("versitygw, the S3-compatible server of the dataset tests and the demo",
                       (5, 6)),
    "whereabouts": About("whereabouts, the IPAM of the real nodes' rail and storage networks",
                         (7, 9)),
    "network-crds": About("the NetworkAttachmentDefinition and whereabouts CRDs, copied from "
                          "their pinned modules (nothing compiled)", (1, 1)),
    "promtool": About("Prometheus' promtool, to unit-test the alert rules", (5, 9)),
    "prometheus": About("the Prometheus server of the real-node monitoring stack", (8, 15)),
    "prometheus-operator": About("the Prometheus operator and its config reloader, with "
                                 "their CRDs", (15, 50)),
    "jobset": About("the JobSet controller with its CRD, from its upstream release",
                    (5, 15)),
    "kueue": About("the Kueue controller manager with its CRDs, in front of "
                   "trainmaster-scheduler", (8, 20)),
    "alertmanager": About("Alertmanager, which receives the real-node cluster's alerts",
                          (5, 12)),
}
