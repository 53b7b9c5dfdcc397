"""A real local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok) with one simulated GPU node per node of a spec, or real nodes
(kubelet + containerd + runc on this host) for the first N of them."""

from trainmaster.cluster._control_plane import (
    UpResult,
    attach_process,
    down,
    down_state_dir,
    import_image,
    reap_dead_clusters,
    resolve_state_dir,
    running_record,
    start_monitoring,
    up,
)
from trainmaster.cluster._monitoring_api import (
    AlertEpisode,
    Endpoints,
    alert_episodes,
    endpoints,
)
from trainmaster.cluster._processes import ClusterError, free_port
from trainmaster.cluster._real_nodes import NodeLayout, dns_ip, layouts
from trainmaster.cluster._sizing import cluster_sizing
from trainmaster.cluster._state import ClusterRecord, default_state_dir, known_clusters
from trainmaster.cluster._status import ClusterStatus, LeafCapacity, cluster_status
from trainmaster.cluster._storage_host import storage_server_address
from trainmaster.cluster._temporary import temporary_cluster
from trainmaster.cluster._user_kubeconfig import add_context, remove_context, user_kubeconfig
from trainmaster.cluster._workload_apis import (
    KUEUE_FRAMEWORKS,
    Controller,
    start_jobset,
    start_kueue,
)
from trainmaster.cluster._workload_apis import running as running_controller
from trainmaster.cluster._workload_apis import stop as stop_controller

__all__ = [
    "KUEUE_FRAMEWORKS",
    "AlertEpisode",
    "ClusterError",
    "ClusterRecord",
    "ClusterStatus",
    "Controller",
    "Endpoints",
    "LeafCapacity",
    "NodeLayout",
    "UpResult",
    "add_context",
    "alert_episodes",
    "attach_process",
    "cluster_sizing",
    "cluster_status",
    "default_state_dir",
    "dns_ip",
    "down",
    "down_state_dir",
    "endpoints",
    "free_port",
    "import_image",
    "known_clusters",
    "layouts",
    "reap_dead_clusters",
    "remove_context",
    "resolve_state_dir",
    "running_controller",
    "running_record",
    "start_jobset",
    "start_kueue",
    "start_monitoring",
    "stop_controller",
    "storage_server_address",
    "temporary_cluster",
    "up",
    "user_kubeconfig",
]
