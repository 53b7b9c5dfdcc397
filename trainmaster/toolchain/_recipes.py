"""What trainmaster builds from Go modules, pinned: one recipe per tool family.
Over 500 lines: one table, a recipe per family, kept together so every pin is in one place.

Each family has its own wrapper module under ``toolchain/go/<family>/`` because the
families pin conflicting versions of shared dependencies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

K8S_VERSION = "v1.37.2"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"
# The Pulumi CLI (engine). The Python SDK is pulumi 3.272.0, whose pkg/v3 tag is not served by
# the Go module proxy (nor 3.273.0); 3.274.1 is the nearest release after it that is.
PULUMI_VERSION = "v3.274.1"
# The Kubernetes provider: github.com/pulumi/pulumi-kubernetes/provider/v4 has no tags, and the
# proxy serves this one pseudo-version only (pulumi-kubernetes main of 2026-01-15, after v4.24.0;
# its go.mod pins k8s.io/api v0.33.3), not the commit of v4.34.2 that the Python package has.
PULUMI_KUBERNETES_MODULE = "github.com/pulumi/pulumi-kubernetes/provider/v4"
PULUMI_KUBERNETES_VERSION = "v4.0.0-20260115033456-f47bc2d6f199"
# Real local nodes: containerd 2.x (kubelet 1.37 dropped containerd 1.x; Debian ships 1.6), the
# CNI reference plugins (Debian ships 1.1.1) and CoreDNS. runc comes from Debian's package.
CONTAINERD_VERSION = "v2.4.2"
CNI_PLUGINS_VERSION = "v1.10.0"
COREDNS_VERSION = "v1.14.7"
# The real nodes' secondary networks (rails, storage): whereabouts IPAM, and the
# NetworkAttachmentDefinition CRD from the Network Plumbing Working Group's client module
# (the CRD Multus installs). Multus itself is a family of its own, built as its upstream
# release (UpstreamSource): the proxy here refuses every version of its module.
WHEREABOUTS_VERSION = "v0.9.2"
NAD_CLIENT_MODULE = "github.com/k8snetworkplumbingwg/network-attachment-definition-client"
NAD_CLIENT_VERSION = "v1.7.6"
# promtool, to unit-test the alert rules: Prometheus v3.16.0 is module version v0.316.0.
PROMETHEUS_VERSION = "v0.316.0"
# An S3-compatible server (Apache-2.0; MinIO is AGPL) for the dataset-cache tests and the
# demo's datasets: the stock CLI, run with its posix backend (a folder per bucket).
VERSITYGW_VERSION = "v1.8.0"
# The monitoring stack that runs on the real nodes (docs/monitoring.md, "On the real nodes").
# All from Go modules, not Debian: Debian's prometheus 2.42 and prometheus-alertmanager 0.25
# are years older than what kube-prometheus-stack installs, and link against the host's libc.
# The operator: v0.85.0 is the newest version the Go module proxy serves (v0.95.x: 403).
PROMETHEUS_OPERATOR_VERSION = "v0.85.0"
ALERTMANAGER_VERSION = "v0.35.0"
# Multus (thin plugin, docs/real-nodes.md "Secondary networks") and kube-router's NetworkPolicy
# controller. Neither can come from the module proxy here: it refuses every version of Multus'
# module and serves kube-router v2.1.0 only. Their upstream archives (../shared/sources, with
# SHA256SUMS) are pinned by digest; a machine whose proxy serves them never reads the archive.
MULTUS_MODULE = "gopkg.in/k8snetworkplumbingwg/multus-cni.v4"
MULTUS_VERSION = "v4.3.0"
MULTUS_SHA256 = "2660d40d01f02a4fb9a0422eb58e9b3708624ec1372fab19bdce99ec044f1dc7"
KUBE_ROUTER_MODULE = "github.com/cloudnativelabs/kube-router/v2"
KUBE_ROUTER_VERSION = "v2.9.0"
KUBE_ROUTER_SHA256 = "ad8df4e6a47e44db2ab62bf4bdd97183d81aa2fadf15ea914a540b7811ef851d"
# Workload APIs of the ecosystem (docs/interop.md). JobSet: the proxy here serves no version of
# its module, so its upstream archive (../shared/sources) is pinned by digest, and its
# dependencies come from the proxy. Kueue: the proxy serves the release; no archive is pinned.
JOBSET_MODULE = "sigs.k8s.io/jobset"
JOBSET_VERSION = "v0.12.0"
JOBSET_COMMIT = "f22e565ac3cc3265c7c45ef67ecffdc689af5d77"
JOBSET_SHA256 = "d6cdad4b9e40adab251f76e8677479a08ded4bca471c2898006dcb09463e98f3"
KUEUE_MODULE = "sigs.k8s.io/kueue"
KUEUE_VERSION = "v0.17.0"
# The CRDs Kueue's controller watches at start (it waits for every kind it serves).
KUEUE_CRDS = (
    "admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters",
    "multikueueconfigs", "provisioningrequestconfigs", "resourceflavors", "topologies",
    "workloadpriorityclasses", "workloads",
)


@dataclass(frozen=True)
class UpstreamSource:
    """A family built as its upstream release, the way a user's machine would install it:
    ``go install MODULE/CMD@VERSION`` from the module proxy; where the proxy refuses the
    module, from the unmodified upstream source archive in a folder the user gives
    (``--sources`` / ``TRAINMASTER_SOURCES``), whose sha256 must be the pinned one."""

    module: str
    commands: tuple[str, ...]
    """Package folders of the module, e.g. ``cmd/multus``: one binary each, named after it
    (``.``: the module's root package, named after the module's last element)."""
    archive: str = ""
    """File name of the source archive (a `git archive` of the release tag, one top folder);
    '' when none is pinned (the proxy serves the release): a refusal is then final."""
    sha256: str = ""
    archive_env: dict[str, str] = field(default_factory=dict)
    """Environment of the archive's `go build` (GOFLAGS=-mod=vendor for a vendored tree)."""
    data_files: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """Files of the release copied into the family's folder, as (path in the module, dest):
    its CRDs and RBAC. Read from the module the proxy served, else from the archive. Out of
    the repr so that the families pinned before it keep their cache entries (the digest
    hashes it when set)."""

    def package(self, command: str) -> str:
        """The import path of one of ``commands``."""
        return self.module if command == "." else f"{self.module}/{command}"


@dataclass(frozen=True)
class Recipe:
    """How to build one family of binaries with ``go build``."""

    family: str
    version: str
    packages: tuple[str, ...]
    binaries: tuple[str, ...]
    tags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    # Files copied from a module folder into the cache, as (module, path-in-module, dest name).
    module_files: tuple[tuple[str, str, str], ...] = ()
    # Files copied from a module folder into the build's copy of the wrapper module before
    # anything runs, as (module, path-in-module, path in the wrapper): inputs of `generate`.
    source_files: tuple[tuple[str, str, str], ...] = ()
    # Code generation before compiling, as (folder in the wrapper, Go file there): each is run
    # as `go run FILE` in that folder, as a `//go:generate go run FILE` line upstream would be.
    generate: tuple[tuple[str, str], ...] = ()
    # Environment of `generate`, `go list` and `go build` on top of the fixed Go settings.
    env: dict[str, str] = field(default_factory=dict)
    # Whole modules copied into the wrapper before anything runs, as (module@version, folder
    # in the wrapper), for a go.mod `replace` that points at the copy (made writable).
    # Out of the repr (the cache digest hashes them itself when set), so that the families
    # built before these fields existed keep their cache entries.
    module_trees: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # Files a module zip lacks that its go:embed needs, as (path in the wrapper, text): written
    # after module_trees are copied.
    stub_files: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # Built as an upstream release (no wrapper module): from the proxy, else the archive.
    # Out of the repr for the same reason as module_trees (the digest hashes it when set).
    upstream: UpstreamSource | None = field(default=None, repr=False)


# The kinds of monitoring.coreos.com that the monitoring stack installs (all the operator
# serves, so that it starts every controller and a ScrapeConfig or Probe applied later works).
PROMETHEUS_OPERATOR_CRDS = (
    "alertmanagerconfigs", "alertmanagers", "podmonitors", "probes", "prometheusagents",
    "prometheuses", "prometheusrules", "scrapeconfigs", "servicemonitors", "thanosrulers",
)

_NO_UI_PAGE = (
    "<!doctype html><title>Alertmanager</title><p>This Alertmanager was built by trainmaster "
    "from its Go module, whose zip lacks the web UI bundle. Its API is complete: "
    '<a href="/api/v2/alerts">/api/v2/alerts</a>, <a href="/api/v2/status">/api/v2/status</a>.\n'
)

_K8S_MINOR = K8S_VERSION.split(".")[1]

_PULUMI_K8S_CMD = "cmd/pulumi-resource-kubernetes"

_KWOK_STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "node/chaos/node-not-ready.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-delete.yaml",
    "pod/chaos/pod-container-running-failed.yaml",
)

RECIPES: dict[str, Recipe] = {
    "k8s": Recipe(
        family="k8s",
        version=K8S_VERSION,
        packages=(
            "k8s.io/kubernetes/cmd/kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
            "k8s.io/kubernetes/cmd/kube-scheduler",
        ),
        binaries=("kube-apiserver", "kube-controller-manager", "kube-scheduler"),
        tags=("selinux", "notest", "grpcnotrace"),
        ldflags=(
            f"-X k8s.io/component-base/version.gitVersion={K8S_VERSION}",
            "-X k8s.io/component-base/version.gitMajor=1",
            f"-X k8s.io/component-base/version.gitMinor={_K8S_MINOR}",
        ),
    ),
    # The node side of the same Kubernetes release, in a family of its own so that adding it
    # never invalidates the cached control-plane build (the Go build cache shares the packages).
    "kubelet": Recipe(
        family="kubelet",
        version=K8S_VERSION,
        packages=("k8s.io/kubernetes/cmd/kubelet",),
        binaries=("kubelet",),
        tags=("selinux", "notest", "grpcnotrace"),
        ldflags=(
            f"-X k8s.io/component-base/version.gitVersion={K8S_VERSION}",
            "-X k8s.io/component-base/version.gitMajor=1",
            f"-X k8s.io/component-base/version.gitMinor={_K8S_MINOR}",
        ),
    ),
    "containerd": Recipe(
        family="containerd",
        version=CONTAINERD_VERSION,
        packages=(
            "github.com/containerd/containerd/v2/cmd/containerd",
            "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
            "github.com/containerd/containerd/v2/cmd/ctr",
        ),
        binaries=("containerd", "containerd-shim-runc-v2", "ctr"),
        # CGO is off, so the btrfs snapshotter drops out on its own; overlayfs is what runs.
        tags=("no_btrfs", "no_devmapper", "no_zfs"),
        ldflags=(
            f"-X github.com/containerd/containerd/v2/version.Version={CONTAINERD_VERSION}",
        ),
    ),
    "cni-plugins": Recipe(
        family="cni-plugins",
        version=CNI_PLUGINS_VERSION,
        packages=tuple(
            f"github.com/containernetworking/plugins/plugins/{p}"
            # macvlan: what the rendered RoCE rail and storage attachments name.
            for p in ("main/bridge", "ipam/host-local", "main/loopback", "meta/portmap",
                      "main/macvlan")
        ),
        binaries=("bridge", "host-local", "loopback", "portmap", "macvlan"),
    ),
    # whereabouts, a CNI IPAM plugin that keeps its allocations in the cluster (its IPPool and
    # OverlappingRangeIPReservation CRDs), so that pods on different nodes never share an
    # address of a rail's subnet.
    "whereabouts": Recipe(
        family="whereabouts",
        version=WHEREABOUTS_VERSION,
        packages=("github.com/k8snetworkplumbingwg/whereabouts/cmd",),
        binaries=("whereabouts",),
        ldflags=(
            f"-X github.com/k8snetworkplumbingwg/whereabouts/pkg/version.Version="
            f"{WHEREABOUTS_VERSION}",
            "-X github.com/k8snetworkplumbingwg/whereabouts/pkg/version.ReleaseStatus=released",
        ),
    ),
    "coredns": Recipe(
        family="coredns",
        version=COREDNS_VERSION,
        # Our own main package (go/coredns/cmd/coredns): CoreDNS with its kubernetes plugin and
        # the few plugins its Corefile uses, not the stock set with every cloud SDK.
        packages=("./cmd/coredns",),
        binaries=("coredns",),
        ldflags=("-X github.com/coredns/coredns/coremain.GitCommit=" + COREDNS_VERSION,),
    ),
    "etcd": Recipe(
        family="etcd",
        version=ETCD_VERSION,
        packages=("go.etcd.io/etcd/server/v3",),
        binaries=("etcd",),
    ),
    "kwok": Recipe(
        family="kwok",
        version=KWOK_VERSION,
        packages=("sigs.k8s.io/kwok/cmd/kwok",),
        binaries=("kwok",),
        module_files=tuple(
            ("sigs.k8s.io/kwok", f"kustomize/stage/{stage}", f"stages/{stage.split('/')[-1]}")
            for stage in _KWOK_STAGES
        ),
    ),
    "pulumi": Recipe(
        family="pulumi",
        version=PULUMI_VERSION,
        packages=("github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",),
        binaries=("pulumi",),
        ldflags=(f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={PULUMI_VERSION}",),
    ),
    # Pulumi's Python language host, for plain `pulumi up` in the project folder (the CLI
    # starts __main__.py through it; `trainmaster pulumi` runs the program inline and does
    # not need it). Its own module is refused by the Go module proxy at every version; the
    # sdk/v3 module holds the package up to v3.79.0, which works with the v3.274.1 CLI. The
    # host runs programs through the `pulumi-language-python-exec` script next to it: the
    # CLI's release (v3.274.1), as it was tried by hand with this CLI.
    "pulumi-language-python": Recipe(
        family="pulumi-language-python",
        version="v3.79.0",
        packages=("github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python",),
        binaries=("pulumi-language-python",),
        ldflags=("-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v3.79.0",),
        module_files=(
            (
                f"github.com/pulumi/pulumi/sdk/v3@{PULUMI_VERSION}",
                "python/cmd/pulumi-language-python-exec",
                "pulumi-language-python-exec",
            ),
        ),
    ),
    # A family of its own: the provider pins older pulumi/pkg and k8s.io modules than the CLI.
    "pulumi-kubernetes": Recipe(
        family="pulumi-kubernetes",
        version=PULUMI_KUBERNETES_VERSION,
        # Our own main package (go/pulumi-kubernetes/cmd/...), the same as upstream's, which
        # embeds schema-embed.json and terraform-mapping-embed.json: the module zip lacks them,
        # so upstream's generate.go makes them here from the module's schema and mapping.
        packages=(f"./{_PULUMI_K8S_CMD}",),
        binaries=("pulumi-resource-kubernetes",),
        ldflags=(
            f"-X {PULUMI_KUBERNETES_MODULE}/pkg/version.Version={PULUMI_KUBERNETES_VERSION[1:]}",
        ),
        source_files=tuple(
            (PULUMI_KUBERNETES_MODULE, f"{_PULUMI_K8S_CMD}/{name}", f"{_PULUMI_K8S_CMD}/{name}")
            for name in ("generate.go", "schema.json", "terraform-mapping.json")
        ),
        generate=((_PULUMI_K8S_CMD, "generate.go"),),
        env={"VERSION": PULUMI_KUBERNETES_VERSION[1:]},
    ),
    # No binaries: the CRDs of the secondary networks, read from the pinned modules. Every
    # `cluster up` installs the NetworkAttachmentDefinition CRD (on a real cluster Multus does);
    # real-node clusters also get whereabouts' CRDs and RBAC. Downloading the two modules takes
    # seconds.
    "network-crds": Recipe(
        family="network-crds",
        version=f"{NAD_CLIENT_VERSION}-whereabouts-{WHEREABOUTS_VERSION}",
        packages=(),
        binaries=(),
        module_files=(
            *(
                (
                    f"github.com/k8snetworkplumbingwg/whereabouts@{WHEREABOUTS_VERSION}",
                    f"doc/crds/whereabouts.cni.cncf.io_{plural}.yaml",
                    f"crds/whereabouts.cni.cncf.io_{plural}.yaml",
                )
                for plural in ("ippools", "overlappingrangeipreservations", "nodeslicepools")
            ),
            # whereabouts' ServiceAccount and RBAC as it publishes them (with a DaemonSet that
            # only copies the binary onto each node, which the real nodes get from the cache).
            (
                f"github.com/k8snetworkplumbingwg/whereabouts@{WHEREABOUTS_VERSION}",
                "doc/crds/daemonset-install.yaml",
                "whereabouts/daemonset-install.yaml",
            ),
            (
                f"{NAD_CLIENT_MODULE}@{NAD_CLIENT_VERSION}",
                "artifacts/networks-crd.yaml",
                "crds/network-attachment-definitions.k8s.cni.cncf.io.yaml",
            ),
        ),
    ),
    # promtool without the service-discovery plugins (every cloud SDK): rule tests need none.
    "promtool": Recipe(
        family="promtool",
        version=PROMETHEUS_VERSION,
        packages=("github.com/prometheus/prometheus/cmd/promtool",),
        binaries=("promtool",),
        tags=("remove_all_sd",),
        ldflags=(
            "-X github.com/prometheus/common/version.Version=3.16.0",
            "-X github.com/prometheus/common/version.Branch=trainmaster",
        ),
    ),
    # The Prometheus server, from the same module as promtool, with the one service discovery
    # the operator's generated configuration uses (kubernetes_sd_configs). Without the
    # `builtinassets` tag the React UI is not embedded (its bundle is not in the module zip):
    # the HTTP API, which everything here reads, is complete.
    "prometheus": Recipe(
        family="prometheus",
        version=PROMETHEUS_VERSION,
        packages=("github.com/prometheus/prometheus/cmd/prometheus",),
        binaries=("prometheus",),
        tags=("remove_all_sd", "enable_kubernetes_sd"),
        ldflags=(
            "-X github.com/prometheus/common/version.Version=3.16.0",
            "-X github.com/prometheus/common/version.Branch=trainmaster",
        ),
    ),
    # The operator and the config reloader it puts beside Prometheus and Alertmanager; the
    # real CRDs come from the same module (example/prometheus-operator-crd), replacing the
    # stand-ins on a cluster that runs the stack.
    "prometheus-operator": Recipe(
        family="prometheus-operator",
        version=PROMETHEUS_OPERATOR_VERSION,
        packages=(
            "github.com/prometheus-operator/prometheus-operator/cmd/operator",
            "github.com/prometheus-operator/prometheus-operator/cmd/prometheus-config-reloader",
        ),
        binaries=("operator", "prometheus-config-reloader"),
        ldflags=(
            f"-X github.com/prometheus/common/version.Version={PROMETHEUS_OPERATOR_VERSION[1:]}",
            "-X github.com/prometheus/common/version.Branch=trainmaster",
        ),
        module_files=tuple(
            (
                f"github.com/prometheus-operator/prometheus-operator@"
                f"{PROMETHEUS_OPERATOR_VERSION}",
                f"example/prometheus-operator-crd/monitoring.coreos.com_{plural}.yaml",
                f"crds/monitoring.coreos.com_{plural}.yaml",
            )
            for plural in PROMETHEUS_OPERATOR_CRDS
        ),
    ),
    # Alertmanager's ui package embeds app/dist, a JavaScript bundle that its module zip lacks
    # (upstream builds it with npm before `go build`). The build copies the module into the
    # wrapper (go.mod replaces it with that copy) and writes one page in place of the bundle
    # that points to the API; the API (/api/v2), which everything here reads, is complete.
    "alertmanager": Recipe(
        family="alertmanager",
        version=ALERTMANAGER_VERSION,
        packages=("github.com/prometheus/alertmanager/cmd/alertmanager",),
        binaries=("alertmanager",),
        ldflags=(
            f"-X github.com/prometheus/common/version.Version={ALERTMANAGER_VERSION[1:]}",
            "-X github.com/prometheus/common/version.Branch=trainmaster",
        ),
        module_trees=((f"github.com/prometheus/alertmanager@{ALERTMANAGER_VERSION}",
                       "alertmanager"),),
        stub_files=tuple(
            (f"alertmanager/ui/app/dist/{ui}/index.html", _NO_UI_PAGE)
            for ui in ("elm", "mantine")
        ),
    ),
    # Multus: `multus` is the thin CNI plugin the real nodes run; the thick plugin's daemon
    # and shim come along (one shared compilation), as upstream builds them.
    "multus": Recipe(
        family="multus",
        version=MULTUS_VERSION,
        packages=tuple(f"{MULTUS_MODULE}/cmd/{c}"
                       for c in ("multus", "multus-daemon", "multus-shim")),
        binaries=("multus", "multus-daemon", "multus-shim"),
        ldflags=(
            f"-X {MULTUS_MODULE}/pkg/multus.version={MULTUS_VERSION}",
            f"-X {MULTUS_MODULE}/pkg/multus.releaseStatus=released",
        ),
        upstream=UpstreamSource(
            module=MULTUS_MODULE,
            commands=("cmd/multus", "cmd/multus-daemon", "cmd/multus-shim"),
            archive=f"multus-cni-{MULTUS_VERSION}.tar.gz",
            sha256=MULTUS_SHA256,
            # The archive carries vendor/: it builds offline.
            archive_env={"GOFLAGS": "-mod=vendor"},
        ),
    ),
    "kube-router": Recipe(
        family="kube-router",
        version=KUBE_ROUTER_VERSION,
        packages=(f"{KUBE_ROUTER_MODULE}/cmd/kube-router",),
        binaries=("kube-router",),
        ldflags=(f"-X {KUBE_ROUTER_MODULE}/pkg/version.Version={KUBE_ROUTER_VERSION}",),
        upstream=UpstreamSource(
            module=KUBE_ROUTER_MODULE,
            commands=("cmd/kube-router",),
            archive=f"kube-router-{KUBE_ROUTER_VERSION}.tar.gz",
            sha256=KUBE_ROUTER_SHA256,
            # Dependencies from the module proxy, exactly as its go.sum pins them.
            archive_env={"GOFLAGS": "-mod=readonly"},
        ),
    ),
    # JobSet's controller (main.go at its module root) with its CRD, ClusterRole and webhook
    # configuration as the release publishes them (docs/interop.md).
    "jobset": Recipe(
        family="jobset",
        version=JOBSET_VERSION,
        packages=(JOBSET_MODULE,),
        binaries=("jobset",),
        ldflags=(
            f"-X {JOBSET_MODULE}/pkg/version.GitVersion={JOBSET_VERSION}",
            f"-X {JOBSET_MODULE}/pkg/version.GitCommit={JOBSET_COMMIT}",
        ),
        upstream=UpstreamSource(
            module=JOBSET_MODULE,
            commands=(".",),
            archive=f"jobset-{JOBSET_VERSION}.tar.gz",
            sha256=JOBSET_SHA256,
            # Dependencies from the module proxy, exactly as its go.sum pins them.
            archive_env={"GOFLAGS": "-mod=readonly"},
            data_files=(
                ("config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",
                 "crds/jobset.x-k8s.io_jobsets.yaml"),
                ("config/components/rbac/role.yaml", "rbac/role.yaml"),
                ("config/components/webhook/manifests.yaml", "webhook/manifests.yaml"),
            ),
        ),
    ),
    # Kueue's controller manager, with its CRDs, ClusterRole and webhook configuration from
    # the same module zip, in front of trainmaster-scheduler (docs/interop.md).
    "kueue": Recipe(
        family="kueue",
        version=KUEUE_VERSION,
        packages=(f"{KUEUE_MODULE}/cmd/kueue",),
        binaries=("kueue",),
        ldflags=(f"-X {KUEUE_MODULE}/pkg/version.GitVersion={KUEUE_VERSION}",),
        upstream=UpstreamSource(
            module=KUEUE_MODULE,
            commands=("cmd/kueue",),
            data_files=(
                *((f"config/components/crd/bases/kueue.x-k8s.io_{plural}.yaml",
                   f"crds/kueue.x-k8s.io_{plural}.yaml") for plural in KUEUE_CRDS),
                ("config/components/rbac/role.yaml", "rbac/role.yaml"),
                ("config/components/webhook/manifests.yaml", "webhook/manifests.yaml"),
            ),
        ),
    ),
    "versitygw": Recipe(
        family="versitygw",
        version=VERSITYGW_VERSION,
        packages=("github.com/versity/versitygw/cmd/versitygw",),
        binaries=("versitygw",),
        ldflags=(f"-X main.Version={VERSITYGW_VERSION}",),
    ),
}

CLUSTER_FAMILIES = ("etcd", "k8s", "kwok", "network-crds")
NODE_FAMILIES = ("kubelet", "containerd", "cni-plugins", "coredns", "whereabouts", "multus")
# Built by `trainmaster tools build` (and `make tools`) and by `trainmaster demo`;
# `cluster up --real-nodes` runs it when built and says that NetworkPolicies are not enforced
# when not (docs/real-nodes.md, "NetworkPolicies: kube-router"): not a NODE_FAMILIES member,
# since it needs --sources here.
POLICY_FAMILIES = ("kube-router",)
PULUMI_FAMILIES = ("pulumi", "pulumi-kubernetes")
MONITORING_FAMILIES = ("promtool",)
# What `cluster up --monitoring` runs on the real nodes.
MONITORING_STACK_FAMILIES = ("prometheus-operator", "prometheus", "alertmanager")
OBJECT_STORE_FAMILIES = ("versitygw",)
# The ecosystem's workload controllers, run beside a local control plane (docs/interop.md).
WORKLOAD_API_FAMILIES = ("jobset", "kueue")
