"""`trainmaster status`: what runs on a cluster and what waits, from a kubeconfig alone.

``collect_view`` reads the API (``_view``: pure ``summarize`` plus the reads), and
``render_view`` prints it as tables (``_render``). The operator and the scheduler write
what this shows; neither imports it.
"""

from trainmaster.status._cache import DatasetCache, NodeCacheRow, dataset_caches
from trainmaster.status._fairness import (
    fairness,
    ledger_entries,
    ledger_usage,
    percent,
    queue_fairness,
    queue_usage,
    resource_lines,
    scheduler_configs,
    share_text,
)
from trainmaster.status._live import (
    PROMETHEUS,
    TRAININGJOB,
    LiveProgress,
    Progress,
    PrometheusError,
    discover_prometheus,
    is_prometheus_pod,
    job_progress,
    live_progress,
    progress_from_results,
    prometheus_url,
)
from trainmaster.status._pending import PendingGang
from trainmaster.status._queue_book import (
    SCHEDULER_REASONS,
    QueueBook,
    SchedulerSays,
    gang_quota,
    gang_size,
    scheduler_reason,
)
from trainmaster.status._render import age, render_view
from trainmaster.status._view import (
    FencedNode,
    JobRow,
    QueueRow,
    ResourceView,
    SwitchUsage,
    collect_view,
    gpu_request,
    ledger_rows,
    queue_rows,
    read_view,
    scheduler_queues,
    summarize,
    topology_levels,
    with_live_progress,
)

__all__ = [
    "PROMETHEUS",
    "SCHEDULER_REASONS",
    "TRAININGJOB",
    "DatasetCache",
    "FencedNode",
    "JobRow",
    "LiveProgress",
    "NodeCacheRow",
    "PendingGang",
    "Progress",
    "PrometheusError",
    "QueueBook",
    "QueueRow",
    "ResourceView",
    "SchedulerSays",
    "SwitchUsage",
    "age",
    "collect_view",
    "dataset_caches",
    "discover_prometheus",
    "fairness",
    "gang_quota",
    "gang_size",
    "gpu_request",
    "is_prometheus_pod",
    "job_progress",
    "ledger_entries",
    "ledger_rows",
    "ledger_usage",
    "live_progress",
    "percent",
    "progress_from_results",
    "prometheus_url",
    "queue_fairness",
    "queue_rows",
    "queue_usage",
    "read_view",
    "render_view",
    "resource_lines",
    "scheduler_configs",
    "scheduler_queues",
    "scheduler_reason",
    "share_text",
    "summarize",
    "topology_levels",
    "with_live_progress",
]
