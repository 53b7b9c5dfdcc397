"""The one Kubernetes client of trainmaster: scheduler, operator, bench, apply, status and
the demo all talk to the API server through it.

- ``choose_kubeconfig``: the one kubeconfig rule, kubectl's (argument, a local cluster
  named with ``select_cluster``, $KUBECONFIG, in-cluster, ~/.kube/config);
  ``describe_target`` names what it picked; ``KubeConfigError`` when unusable;
- ``Kube``: async raw-JSON requests, server-side ``apply`` as the ``trainmaster`` field
  manager, ``watch`` streams, an optional client-side rate limit (``TokenBucket``);
  ``SyncKube`` runs the same client's calls blocking;
- ``ApiError``: every failure, with ``status``, ``transient`` and ``conflict``;
- ``Reflector``: list-then-watch that resumes from the last resourceVersion and relists
  on 410 Gone;
- ``retry_on_conflict``: read-modify-write again while the write answers 409 (polling
  until something holds is ``trainmaster.polling.wait_until``);
- ``*_path`` helpers and ``*_API_VERSION`` names.
"""

from trainmaster.api import API_VERSION as TRAININGJOB_API_VERSION
from trainmaster.api import CRD_API_VERSION, FIELD_MANAGER, IN_CLUSTER_ENV, PODGROUP_API_VERSION

from ._client import JSON, SKIPPED, Kube
from ._conflict import retry_on_conflict
from ._errors import CONFLICT, GONE, NOT_FOUND, TRANSIENT_STATUSES, ApiError, is_status
from ._fastconfig import KubeConfig, KubeConfigError
from ._http import HttpError, HttpPool
from ._kubeconfig import (
    Target,
    choose_kubeconfig,
    describe_target,
    generated_client,
    in_pod,
    load_configuration,
    load_sync_configuration,
    select_cluster,
    select_context,
    selected_cluster,
)
from ._paths import (
    KNOWN_PLURALS,
    api_path,
    crd_path,
    event_path,
    job_path,
    localqueue_path,
    namespace_path,
    node_path,
    object_path,
    pod_path,
    podgroup_path,
    trainingjob_path,
)
from ._ratelimit import TokenBucket
from ._reflector import ADDED, DELETED, MODIFIED, Reflector
from ._sync import SyncKube

__all__ = [
    "ADDED",
    "CONFLICT",
    "CRD_API_VERSION",
    "DELETED",
    "FIELD_MANAGER",
    "GONE",
    "IN_CLUSTER_ENV",
    "JSON",
    "KNOWN_PLURALS",
    "MODIFIED",
    "NOT_FOUND",
    "PODGROUP_API_VERSION",
    "SKIPPED",
    "TRAININGJOB_API_VERSION",
    "TRANSIENT_STATUSES",
    "ApiError",
    "HttpError",
    "HttpPool",
    "Kube",
    "KubeConfig",
    "KubeConfigError",
    "Reflector",
    "SyncKube",
    "Target",
    "TokenBucket",
    "api_path",
    "choose_kubeconfig",
    "crd_path",
    "describe_target",
    "event_path",
    "generated_client",
    "in_pod",
    "is_status",
    "job_path",
    "load_configuration",
    "load_sync_configuration",
    "localqueue_path",
    "namespace_path",
    "node_path",
    "object_path",
    "pod_path",
    "podgroup_path",
    "retry_on_conflict",
    "select_cluster",
    "select_context",
    "selected_cluster",
    "trainingjob_path",
]
