"""The tenancy guardrails: ValidatingAdmissionPolicies that hold GPU work to its queue.

Priority preemption works across queues and any pod may name any scheduler, so without
them a team with `edit` in its namespace could name the top PriorityClass, or
`default-scheduler`, or another namespace's queue. RBAC cannot look inside a pod, so the
API server's admission does (in-tree CEL; no webhook to run). In every namespace the
scheduler serves, a pod, Job or TrainingJob that requests GPUs must:

- use this scheduler (`spec.schedulerName`);
- name a queue of its own namespace in the queue label (a LocalQueue of that namespace
  where the spec has LocalQueues, else a `scheduler.queues` name);
- name no PriorityClass but its queue's own and the queue's `priorityClasses`.

Pods are checked on their own fields whoever creates them: a Job's pods are created by
the job controller, so exempting that controller would let any Job through. Exempt are
only the cluster's administrators (`system:masters`, who render the platform) and the
platform's own controllers (the scheduler and operator ServiceAccounts), whose Jobs
follow the same rules anyway.
"""

from __future__ import annotations

import json
from typing import Any

from trainmaster.api import (
    ADMISSION_PROBE_LABEL,
    APP_COMPONENT_LABEL,
    GPU_RESOURCE,
    GROUP,
    QUEUE_LABEL,
    TRAININGJOB_PLURAL,
    app_labels,
)
from trainmaster.objects._jobs import priority_class_name
from trainmaster.objects._local_queues import local_queue_namespaces
from trainmaster.objects._netpol import NAMESPACE_NAME_LABEL
from trainmaster.objects._nodeagent import ADMISSION_API
from trainmaster.objects._security import system_namespace
from trainmaster.spec import ClusterSpec

ADMINS = "system:masters"
"""The group whose requests are exempt: the cluster's administrators, who apply the
platform (Pulumi, `trainmaster apply`)."""


def guard_name(spec: ClusterSpec, namespace: str) -> str:
    """The policy (and its binding) that guards one namespace."""
    return f"{spec.metadata.name}-gpu-guard-{namespace}"


def platform_accounts(spec: ClusterSpec) -> list[str]:
    """The user names of the platform's own controllers (exempt from the guardrails)."""
    system = system_namespace(spec)
    return [f"system:serviceaccount:{system}:{spec.scheduler.name}",
            f"system:serviceaccount:{system}:{spec.metadata.name}-operator"]


def allowed_classes(spec: ClusterSpec) -> dict[str, list[str]]:
    """Scheduler queue -> the PriorityClasses its work may name: its own class, the
    per-priority classes its spec jobs render, and its `priorityClasses`."""
    own: dict[str, list[str]] = {q.name: [priority_class_name(spec, q.name)]
                                 for q in spec.scheduler.queues}
    for job in spec.jobs:
        if job.priority is not None and job.queue in own:
            own[job.queue].append(priority_class_name(spec, job.queue, job.priority))
    for q in spec.scheduler.queues:
        own[q.name].extend(q.priority_classes)
    return {name: sorted(set(classes)) for name, classes in own.items()}


def namespace_queues(spec: ClusterSpec, namespace: str) -> dict[str, str]:
    """Queue label value -> scheduler queue, for the work of `namespace`: its LocalQueues
    where the spec has LocalQueues for it, else the scheduler queues by name."""
    if namespace in local_queue_namespaces(spec):
        return {lq.name: lq.cluster_queue for lq in spec.scheduler.local_queues
                if lq.namespace == namespace}
    return {q.name: q.name for q in spec.scheduler.queues}


def guarded_namespaces(spec: ClusterSpec) -> list[str]:
    """Every namespace whose GPU work the scheduler places: the cluster's, then each of
    `scheduler.namespaces` (the teams' namespaces of its LocalQueues among them)."""
    return list(dict.fromkeys([spec.metadata.namespace, *spec.scheduler.namespaces]))


def _cel(value: Any) -> str:
    """A CEL literal of a JSON-able value (lists, maps, strings: JSON's syntax is CEL's)."""
    return json.dumps(value, sort_keys=True)


def _gpu_check(spec_var: str) -> str:
    gpu = _cel(GPU_RESOURCE)
    one = (f"has(c.resources) && ((has(c.resources.requests) && {gpu} in c.resources.requests)"
           f" || (has(c.resources.limits) && {gpu} in c.resources.limits))")
    return (f"{spec_var}.containers.exists(c, {one}) || "
            f"(has({spec_var}.initContainers) && {spec_var}.initContainers.exists(c, {one}))")


def _exempt(spec: ClusterSpec) -> str:
    """The match condition: not an administrator, not a platform controller (match
    conditions cannot read variables, so the list is written out), unless the request is
    apply's dry-run probe (`probe_pod`). The probe's label is tested before `dryRun`, so
    no other request depends on that field."""
    probe = (f"has(object.metadata.labels) && {_cel(ADMISSION_PROBE_LABEL)} in "
             "object.metadata.labels && request.dryRun == true")
    return (f"!(((has(request.userInfo.groups) && {_cel(ADMINS)} in request.userInfo.groups)"
            " || "
            f"request.userInfo.username in {_cel(platform_accounts(spec))}) && !({probe}))")


GUARD_COMPONENT = "guardrails"
"""app.kubernetes.io/component of the guardrail policies and bindings."""
PROBE_REFUSAL = "spec.schedulerName: GPU work in namespace"
"""How a guardrail refuses the probe pod (it names no scheduler of ours)."""


def probe_pod() -> dict[str, Any]:
    """A GPU pod on `default-scheduler` with no queue: every guardrail refuses it. Sent as
    a dry run by an administrator, it tells apply that the policy of its namespace is in
    force (the API server compiles policies asynchronously)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainmaster-admission-probe",
                     "labels": {ADMISSION_PROBE_LABEL: "true"}},
        "spec": {"schedulerName": "default-scheduler", "automountServiceAccountToken": False,
                 "containers": [{"name": "probe", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"limits": {GPU_RESOURCE: "1"}}}]},
    }


def guarded_by(objs: list[dict[str, Any]]) -> list[str]:
    """The namespaces whose workload guardrail is among `objs` (what apply waits for)."""
    out = []
    for obj in objs:
        if obj["kind"] != "ValidatingAdmissionPolicy" or \
                obj["metadata"].get("labels", {}).get(APP_COMPONENT_LABEL) != GUARD_COMPONENT:
            continue
        constraints = obj["spec"]["matchConstraints"]
        if any("pods" in r["resources"] for r in constraints["resourceRules"]):
            out.append(constraints["namespaceSelector"]["matchLabels"][NAMESPACE_NAME_LABEL])
    return out


def _workload_policy(spec: ClusterSpec, namespace: str, labels: dict[str, str]
                     ) -> dict[str, Any]:
    """Pods and Jobs in `namespace`: scheduler, queue label, PriorityClass."""
    queues = namespace_queues(spec, namespace)
    classes = allowed_classes(spec)
    by_label = {label: classes[queue] for label, queue in queues.items()}
    label = _cel(QUEUE_LABEL)
    where = f"a LocalQueue of namespace {namespace}" \
        if namespace in local_queue_namespaces(spec) else "a queue of scheduler.queues"
    names = ", ".join(sorted(queues)) or "(none: ask your platform team for one)"
    template = ('request.resource.resource == "pods" ? {o} : '
                "(has({o}.spec.template) ? {o}.spec.template : {{}})")
    meta = ('has({t}.metadata) && has({t}.metadata.labels) && {label} in {t}.metadata.labels'
            ' ? {t}.metadata.labels[{label}] : ""')
    at = '(request.resource.resource == "pods" ? "" : "spec.template.") + '
    variables = [
        {"name": "pod", "expression": template.format(o="object")},
        {"name": "oldPod", "expression": 'request.operation != "UPDATE" ? {} : '
         + template.format(o="oldObject")},
        {"name": "queue", "expression": meta.format(t="variables.pod", label=label)},
        {"name": "oldQueue", "expression": meta.format(t="variables.oldPod", label=label)},
        {"name": "gpus", "expression": "has(variables.pod.spec) && ("
         + _gpu_check("variables.pod.spec") + ")"},
        # On an update, only a changed queue label is judged (the scheduler and the
        # class of a pod cannot change): controllers may still update older pods.
        {"name": "judged", "expression": 'variables.gpus && (request.operation == "CREATE" '
         "|| variables.queue != variables.oldQueue)"},
        {"name": "allowed", "expression": _cel(by_label)},
        {"name": "priorityClass", "expression": "has(variables.pod.spec.priorityClassName) ? "
         'variables.pod.spec.priorityClassName : ""'},
    ]
    validations = [
        {"expression": "!variables.judged || (has(variables.pod.spec.schedulerName) && "
                       f"variables.pod.spec.schedulerName == {_cel(spec.scheduler.name)})",
         "messageExpression": at + (
             f'"spec.schedulerName: GPU work in namespace {namespace} must use '
             f'schedulerName {spec.scheduler.name}"'),
         "message": f"spec.schedulerName: GPU work in namespace {namespace} must use "
                    f"schedulerName {spec.scheduler.name}", "reason": "Forbidden"},
        {"expression": "!variables.judged || variables.queue in variables.allowed",
         "messageExpression": at + (
             f'"metadata.labels[{QUEUE_LABEL}]: " + (variables.queue == "" ? '
             f'"GPU work must name {where}" : variables.queue + " is not {where}") + '
             f'": name one of {names}"'),
         "message": f"metadata.labels[{QUEUE_LABEL}]: GPU work must name {where}: one of "
                    f"{names}", "reason": "Forbidden"},
        {"expression": "!variables.judged || !(variables.queue in variables.allowed) || "
                       'variables.priorityClass == "" || '
                       "variables.priorityClass in variables.allowed[variables.queue]",
         "messageExpression": at + (
             '"spec.priorityClassName: " + variables.priorityClass + " is not allowed in '
             'queue " + variables.queue + ": use one of " + '
             'variables.allowed[variables.queue].join(", ") + " (or none)"'),
         "message": "spec.priorityClassName: the class is not allowed in the pod's queue",
         "reason": "Forbidden"},
    ]
    return _policy(spec, guard_name(spec, namespace), namespace, labels, [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
         "resources": ["pods"]},
        {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
         "resources": ["jobs"]},
    ], variables, validations)


def _trainingjob_policy(spec: ClusterSpec, labels: dict[str, str]) -> dict[str, Any]:
    """TrainingJobs (always GPU work) in the cluster's namespace: their queue, and the
    class their priority renders to (`<cluster>-<queue>-p<priority>`)."""
    namespace = spec.metadata.namespace
    classes = allowed_classes(spec)
    names = ", ".join(sorted(classes))
    prefix = _cel(f"{spec.metadata.name}-")
    variables = [
        {"name": "allowed", "expression": _cel(classes)},
        {"name": "queue", "expression": 'has(object.spec.queue) ? object.spec.queue : '
                                        '"default"'},
        {"name": "judged", "expression": 'request.operation == "CREATE" || '
         '(has(oldObject.spec.queue) ? oldObject.spec.queue : "default") != variables.queue '
         "|| (has(object.spec.priority) != has(oldObject.spec.priority)) || "
         "(has(object.spec.priority) && object.spec.priority != oldObject.spec.priority)"},
        {"name": "priorityClass", "expression": "has(object.spec.priority) ? "
         f'{prefix} + variables.queue + "-p" + string(object.spec.priority) : '
         f"{prefix} + variables.queue"},
    ]
    validations = [
        {"expression": "!variables.judged || variables.queue in variables.allowed",
         "messageExpression": ('"spec.queue: " + variables.queue + " is not a scheduler '
                               f'queue: name one of {names}"'),
         "reason": "Forbidden"},
        {"expression": "!variables.judged || !(variables.queue in variables.allowed) || "
                       "variables.priorityClass in variables.allowed[variables.queue]",
         "messageExpression": (
             '"spec.priority: " + string(object.spec.priority) + " renders PriorityClass " '
             '+ variables.priorityClass + ", not allowed in queue " + variables.queue + '
             '": leave priority unset or use a class of " + '
             'variables.allowed[variables.queue].join(", ")'),
         "message": "spec.priority: its PriorityClass is not allowed in its queue",
         "reason": "Forbidden"},
    ]
    return _policy(spec, f"{spec.metadata.name}-trainingjob-guard", namespace, labels, [
        {"apiGroups": [GROUP], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
         "resources": [TRAININGJOB_PLURAL]},
    ], variables, validations)


def _policy(spec: ClusterSpec, name: str, namespace: str, labels: dict[str, str],
            rules: list[dict[str, Any]], variables: list[dict[str, str]],
            validations: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": rules,
                "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
            },
            "matchConditions": [{"name": "not-the-platform", "expression": _exempt(spec)}],
            "variables": variables,
            "validations": validations,
        },
    }


def _binding(policy: dict[str, Any]) -> dict[str, Any]:
    meta = policy["metadata"]
    return {
        "apiVersion": ADMISSION_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": meta["name"], "labels": dict(meta["labels"])},
        "spec": {"policyName": meta["name"], "validationActions": ["Deny"]},
    }


def build_guards(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The guardrail policies and their bindings: one per guarded namespace, and one for
    TrainingJobs."""
    labels = app_labels(f"{spec.metadata.name}-gpu-guard", GUARD_COMPONENT, spec.metadata.name)
    policies = [_workload_policy(spec, ns, labels) for ns in guarded_namespaces(spec)]
    policies.append(_trainingjob_policy(spec, labels))
    return [obj for policy in policies for obj in (policy, _binding(policy))]
