"""Rules about the admission guardrails that hold teams' GPU work to its queue."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from policies._core import KubeObject, Violation, rule
from policies._k8s import all_containers, get, items, labels, mapping, ref
from trainmaster.api import GPU_RESOURCE
from trainmaster.objects import GUARD_COMPONENT
from trainmaster.spec import ClusterSpec

_NAMESPACE_NAME = "kubernetes.io/metadata.name"


def _guarded(objects: Sequence[KubeObject]) -> set[str]:
    """Namespaces with a guardrail policy that fails closed and a Deny binding to it."""
    bound = {str(get(o, "spec", "policyName")) for o in objects
             if o.get("kind") == "ValidatingAdmissionPolicyBinding"
             and "Deny" in items(get(o, "spec", "validationActions"))}
    out = set()
    for obj in objects:
        if obj.get("kind") != "ValidatingAdmissionPolicy" \
                or labels(obj).get("app.kubernetes.io/component") != GUARD_COMPONENT:
            continue
        name = str(get(obj, "metadata", "name"))
        if name not in bound or get(obj, "spec", "failurePolicy") != "Fail":
            continue
        rules = items(get(obj, "spec", "matchConstraints", "resourceRules"))
        if not any("pods" in items(mapping(r).get("resources")) for r in rules):
            continue
        selected = get(obj, "spec", "matchConstraints", "namespaceSelector", "matchLabels",
                       _NAMESPACE_NAME)
        if selected is not None:
            out.add(str(selected))
    return out


@rule(
    "gpu-work-guarded",
    "mandatory",
    "cluster",  # a pod and the policy that guards its namespace are different objects
    f"every namespace with pods that request {GPU_RESOURCE} has the guardrail admission "
    "policy (bound, failing closed) that holds them to the trainmaster scheduler, a queue "
    "of the namespace and that queue's PriorityClasses",
    defense_in_depth="the object builders",
)
def gpu_work_guarded(
    spec: ClusterSpec | None, objects: Sequence[KubeObject]
) -> Iterator[Violation]:
    guarded = _guarded(objects)
    seen: set[str] = set()
    for container in all_containers(objects):
        requested = any(get(container.spec, "resources", kind, GPU_RESOURCE) is not None
                        for kind in ("requests", "limits"))
        owner = container.pod.owner
        namespace = str(get(owner, "metadata", "namespace") or "")
        key = ref(owner)
        if not requested or namespace in guarded or key in seen:
            continue
        seen.add(key)
        yield Violation(
            f"{container.path}.resources",
            f"GPU work in namespace {namespace!r} is not guarded: without the "
            "ValidatingAdmissionPolicy `<cluster>-gpu-guard-<namespace>` and its Deny "
            "binding anyone with `edit` there may name the top PriorityClass, another "
            "scheduler or another namespace's queue; render it with the spec (the "
            "scheduler component) and serve the namespace (scheduler.namespaces)",
            key,
        )
