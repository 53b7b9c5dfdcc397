"""The bundled trainmaster-scheduler: identity, least-privilege RBAC, config, Deployment
(in `<namespace>-system`), and a PriorityClass per queue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml

from trainmaster.api import (
    APP_INSTANCE_LABEL,
    APP_NAME_LABEL,
    PREEMPT_LOWER,
    WORKLOAD_GROUP,
    app_labels,
    queue_ledger_name,
)
from trainmaster.objects._guards import build_guards
from trainmaster.objects._jobs import priority_class_name
from trainmaster.objects._local_queues import (
    LOCALQUEUE_READ,
    build_local_queues,
    local_queue_namespaces,
)
from trainmaster.objects._nodeagent import ADMISSION_API
from trainmaster.objects._rbac import identity, role, role_binding
from trainmaster.objects._scrape import METRICS_ARGS, POD_IP_ENV, metrics_port, scrape_objects
from trainmaster.objects._security import system_namespace, system_placement
from trainmaster.objects._workload import system_container, system_pod, system_workload
from trainmaster.spec import ClusterSpec, Queue

SCHEDULER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
    # Every pod on a node uses its resources, whatever its namespace: the scheduler's view
    # of free GPUs needs them all (read only).
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {
        "apiGroups": ["scheduling.x-k8s.io"],
        "resources": ["podgroups"],
        "verbs": ["get", "list", "watch"],
    },
    # The upstream gang API's PodGroups (docs/interop.md), its Workloads and its
    # CompositePodGroups (v1alpha3): a composite group's policy and constraint are on its
    # CompositePodGroup, else on the Workload's composite template.
    {
        "apiGroups": [WORKLOAD_GROUP],
        "resources": ["podgroups", "workloads", "compositepodgroups"],
        "verbs": ["get", "list", "watch"],
    },
    # A JobSet is its pods' gang: its size and exclusive topology are on the object only.
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get", "list", "watch"]},
    # A pod naming this scheduler in a namespace it does not serve is told so where its
    # user looks: an Event (any namespace, as kube-scheduler's own role allows) and its
    # PodScheduled condition. Outside the served namespaces the ValidatingAdmissionPolicy
    # of `not_served_policy` narrows the status patch to that one condition of unbound pods.
    {
        "apiGroups": ["", "events.k8s.io"],
        "resources": ["events"],
        "verbs": ["create", "patch", "update"],
    },
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
]
"""The scheduler's cluster-wide rights (a ClusterRole): reading what it places on, and
reporting on pods (Events, the PodScheduled condition)."""

SCHEDULER_NAMESPACE_RULES: list[dict[str, Any]] = [
    # delete: undoing a partly bound gang deletes its bound pods so their controller
    # recreates them whole (docs/scheduler.md).
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    # The PodScheduled condition is patched (a scheduler-plugins PodGroup's status is never
    # written); an upstream PodGroup's PodGroupInitiallyScheduled condition is applied, and
    # a CompositePodGroup's CompositePodGroupInitiallyScheduled.
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
    {"apiGroups": [WORKLOAD_GROUP], "resources": ["podgroups/status",
                                                  "compositepodgroups/status"],
     "verbs": ["patch"]},
]
"""What the scheduler writes in each namespace it serves (a Role and RoleBinding there,
never cluster-wide): it binds the pods of those namespaces and no others."""

LEASE_RULES: list[dict[str, Any]] = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "verbs": ["get", "create", "update", "patch"],
    },
]
"""Leader election, in the scheduler's own namespace (a Role there)."""

METRICS_PORT = 10259


def served_namespaces(spec: ClusterSpec) -> list[str]:
    """The namespaces whose pods the scheduler binds: the cluster's namespace first, then
    `scheduler.namespaces` (each once)."""
    return list(dict.fromkeys([spec.metadata.namespace, *spec.scheduler.namespaces]))


def ledger_rules(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The scheduler publishes its queue ledger to one ConfigMap of its own namespace
    (`queue_ledger_name`). `create` cannot be limited to a name, so it holds create on
    configmaps there (nothing else lives in that namespace that it could read) and every
    other verb on that one ConfigMap only."""
    return [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["get", "patch", "update"],
            "resourceNames": [queue_ledger_name(spec.scheduler.name)],
        },
    ]


def scheduler_config(spec: ClusterSpec) -> dict[str, Any]:
    """The scheduler's own config file (what `trainmaster-scheduler --config` reads)."""
    sched = spec.scheduler
    return {
        "schedulerName": sched.name,
        "namespace": spec.metadata.namespace,
        "levels": list(spec.topology.levels),
        "gangTimeoutSeconds": sched.gang_timeout_seconds,
        "preemption": sched.preemption,
        "bindConcurrency": sched.bind_concurrency,
        "clientQps": sched.client_qps,
        "leaderElection": {"leaseName": sched.name, "leaseNamespace": system_namespace(spec)},
        "topologyPolicy": [
            r.model_dump(by_alias=True, exclude_none=True) for r in sched.topology_policy
        ],
        "defaultQueue": DEFAULT_QUEUE,
        "queues": config_queues(sched.queues) + unlabelled_queue(sched.queues),
        "namespaces": served_namespaces(spec),
        **config_fair_sharing(sched),
        **({"localQueueNamespaces": local_queue_namespaces(spec)}
           if local_queue_namespaces(spec) else {}),
    }


DEFAULT_QUEUE = "default"
"""The queue of pods that carry no queue label (the config's `defaultQueue`)."""


def unlabelled_queue(queues: Sequence[Queue]) -> list[dict[str, Any]]:
    """The config's `defaultQueue` always exists: a spec that declares no `default` queue
    (its jobs all name theirs; validation refuses one that does not) gets one with a
    quota of 0 GPUs, so a pod without a queue label waits with that reason instead of
    running in an undeclared, unlimited queue (docs/scheduler.md, "Which queue")."""
    if any(q.name == DEFAULT_QUEUE for q in queues):
        return []
    return [{"name": DEFAULT_QUEUE, "nominalQuota": 0, "preemption": False}]


def _resources(resources: Sequence[Any]) -> dict[str, Any]:
    return {"resources": [r.model_dump(by_alias=True, exclude_none=True) for r in resources]
            } if resources else {}


def _weight(fair: Any) -> dict[str, Any]:
    return {"fairSharing": {"weight": fair.weight}} if fair.weight != 1.0 else {}


def config_fair_sharing(sched: Any) -> dict[str, Any]:
    """The spec's cohorts and fair-sharing settings as scheduler config keys (only those
    set, so a spec without them renders the config it always did)."""
    out: dict[str, Any] = {}
    if sched.cohorts:
        out["cohorts"] = [
            {"name": c.name, **({"parent": c.parent} if c.parent else {}),
             **_resources(c.resources), **_weight(c.fair_sharing)}
            for c in sched.cohorts
        ]
    fair = sched.fair_sharing
    if fair.enable:
        out["fairSharing"] = {"enable": True,
                              "preemptionStrategies": list(fair.preemption_strategies)}
    if fair.usage_half_life_seconds is not None:
        out["admissionFairSharing"] = {"usageHalfLifeSeconds": fair.usage_half_life_seconds}
    return out


def config_queues(queues: Sequence[Queue]) -> list[dict[str, Any]]:
    """The spec's queues as the scheduler config's ``queues`` entries (Kueue's names);
    `trainmaster simulate` reads its queues through this too."""
    return [
        {
            "name": q.name,
            **({"nominalQuota": q.quota} if q.quota is not None else {}),
            **({"cohort": q.cohort} if q.cohort is not None else {}),
            **({"borrowingLimit": q.borrowing_limit} if q.borrowing_limit is not None
               else {}),
            **({"lendingLimit": q.lending_limit} if q.lending_limit is not None else {}),
            **_resources([r for r in q.resources if q.nominal_quota is None
                          or r.name != "nvidia.com/gpu"]),
            **_weight(q.fair_sharing),
            "preemption": q.preemption,
        }
        for q in queues
    ]


def not_served_policy(spec: ClusterSpec, labels: dict[str, str]) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy and its binding: outside the namespaces it serves, the
    scheduler's ServiceAccount may patch a pod's status only to say it will not place it.

    RBAC cannot say "only the PodScheduled condition" nor "only pods naming this
    scheduler", so the cluster-wide `pods/status` patch it needs for that report is
    narrowed here: the pod must name this scheduler, be unbound, and keep its phase and
    every other condition. In the served namespaces its Role's rights apply unnarrowed.
    """
    name = f"{spec.metadata.name}-{spec.scheduler.name}-not-served"
    user = f"system:serviceaccount:{system_namespace(spec)}:{spec.scheduler.name}"
    served = ", ".join(f'"{n}"' for n in served_namespaces(spec))
    kept = ("(!has({a}.status) || !has({a}.status.conditions) || {a}.status.conditions.all("
            'c, c.type == "PodScheduled" || (has({b}.status) && has({b}.status.conditions) '
            "&& {b}.status.conditions.exists(o, o == c))))")
    phase = '(has({o}.status) && has({o}.status.phase) ? {o}.status.phase : "")'
    validations = [
        "has(oldObject.spec.schedulerName) && oldObject.spec.schedulerName == "
        f'"{spec.scheduler.name}"',
        '!has(oldObject.spec.nodeName) || oldObject.spec.nodeName == ""',
        kept.format(a="object", b="oldObject") + " && " + kept.format(a="oldObject",
                                                                       b="object"),
        phase.format(o="object") + " == " + phase.format(o="oldObject"),
    ]
    what = ("may only set the PodScheduled condition of an unbound pod that names it, "
            "outside the namespaces it serves")
    policy = {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["*"], "operations": ["UPDATE"],
                "resources": ["pods/status"],
            }]},
            "matchConditions": [
                {"name": "scheduler", "expression": f'request.userInfo.username == "{user}"'},
                {"name": "not-served", "expression": f"!(request.namespace in [{served}])"},
            ],
            "validations": [
                {"expression": expr, "message": f"{spec.scheduler.name} {what}",
                 "reason": "Forbidden"}
                for expr in validations
            ],
        },
    }
    binding = {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    return [policy, binding]


def _priority_class(spec: ClusterSpec, queue: Queue, value: int, name: str) -> dict[str, Any]:
    preempts = spec.scheduler.preemption and queue.preemption
    quota = queue.quota
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {
            "name": name,
            "labels": app_labels(queue.name, "queue", spec.metadata.name),
        },
        "value": value,
        "preemptionPolicy": PREEMPT_LOWER if preempts else "Never",
        "globalDefault": False,
        "description": f"trainmaster queue {queue.name}"
        + (f" (quota {quota} GPUs)" if quota is not None else ""),
    }


def priority_classes(spec: ClusterSpec) -> list[dict[str, Any]]:
    """One PriorityClass per queue, and one per (queue, priority) its jobs set."""
    queues = {q.name: q for q in spec.scheduler.queues}
    out = [_priority_class(spec, q, q.priority, priority_class_name(spec, q.name))
           for q in spec.scheduler.queues]
    own = sorted({(j.queue, j.priority) for j in spec.jobs
                  if j.priority is not None and j.queue in queues})
    for queue, value in own:
        out.append(_priority_class(spec, queues[queue], value,
                                   priority_class_name(spec, queue, value)))
    return out


def build_scheduler(spec: ClusterSpec) -> list[dict[str, Any]]:
    name, ns = spec.scheduler.name, system_namespace(spec)
    labels = app_labels(name, "scheduler", spec.metadata.name)
    teams = local_queue_namespaces(spec)  # it reads their LocalQueues, there only
    selector = {APP_NAME_LABEL: name, APP_INSTANCE_LABEL: spec.metadata.name}
    container = system_container(
        spec, "scheduler",
        ["trainmaster-scheduler", "--config", "/etc/trainmaster-scheduler/config.yaml",
         *METRICS_ARGS],
        env=[POD_IP_ENV], ports=[metrics_port(METRICS_PORT)],
        cpu="500m", memory="512Mi", memory_limit="2Gi",
        volume_mounts=[{"name": "config", "mountPath": "/etc/trainmaster-scheduler"}],
    )
    pod = system_pod(name, container, priority_class="system-cluster-critical",
                     placement=system_placement(spec),
                     volumes=[{"name": "config", "configMap": {"name": f"{name}-config"}}])
    objs: list[dict[str, Any]] = [
        *identity(
            name,
            ns,
            labels,
            cluster_rules=SCHEDULER_RULES,
            namespaced_rules={served: [*SCHEDULER_NAMESPACE_RULES,
                                       *(LOCALQUEUE_READ if served in teams else [])]
                              for served in served_namespaces(spec)},
            role_name=f"{spec.metadata.name}-{name}",
        ),
        *not_served_policy(spec, labels),
        *build_guards(spec),
        role(f"{name}-leader-election", ns, labels, LEASE_RULES),
        role_binding(f"{name}-leader-election", ns, labels, name, ns),
        role(f"{name}-queue-ledger", ns, labels, ledger_rules(spec)),
        role_binding(f"{name}-queue-ledger", ns, labels, name, ns),
        *scrape_objects(spec, name, ns, labels, selector, METRICS_PORT),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-config", "namespace": ns, "labels": labels},
            "data": {"config.yaml": yaml.safe_dump(scheduler_config(spec), sort_keys=False)},
        },
        system_workload("Deployment", name, ns, labels, selector, pod,
                        replicas=spec.scheduler.replicas),
    ]
    objs.extend(priority_classes(spec))
    objs.extend(build_local_queues(spec))
    return objs
