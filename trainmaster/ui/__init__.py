"""`trainmaster ui`: a live, read-only web view of a cluster, its queues and jobs, and
why a gang pends (docs/ui.md).

``Store`` keeps the watched objects (reflectors: O(change) after one list);
``create_app`` serves views of a ``World`` (Starlette, Jinja2, htmx over server-sent
events); ``write_page`` writes a static page in the same look (the simulation report);
the view models (``build_topology``, ``job_rows``, ``queue_infos``, ``why_pending``) are
pure functions of a ``World``.
"""

from trainmaster.ui._app import FixedSource, Source, create_app
from trainmaster.ui._jobs import JobInfo, Recovery, job_info, job_rows, step_rate
from trainmaster.ui._look import write_page
from trainmaster.ui._queues import Preemption, QueueInfo, queue_infos
from trainmaster.ui._serve import IN_CLUSTER, LOOPBACK, serve
from trainmaster.ui._topology import Topology, build_topology, node_state
from trainmaster.ui._why import Pending, Why, pending_gangs, why_pending
from trainmaster.ui._world import Sample, Scope, Store, World

__all__ = [
    "IN_CLUSTER",
    "LOOPBACK",
    "FixedSource",
    "JobInfo",
    "Pending",
    "Preemption",
    "QueueInfo",
    "Recovery",
    "Sample",
    "Scope",
    "Source",
    "Store",
    "Topology",
    "Why",
    "World",
    "build_topology",
    "create_app",
    "job_info",
    "job_rows",
    "node_state",
    "pending_gangs",
    "queue_infos",
    "serve",
    "step_rate",
    "why_pending",
    "write_page",
]
