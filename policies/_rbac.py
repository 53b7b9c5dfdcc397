"""Rules about the rights the rendered RBAC grants: least privilege, checkable.

An excess right is invisible in every test that runs as an administrator, so these rules
read the Roles, ClusterRoles and bindings themselves: no wildcards, nothing for the
namespace's `default` ServiceAccount (every pod that names no account runs as it), no
cluster-wide rights on namespaced resources, and none of the rights that let a holder
become someone else (secrets, exec, bind, escalate, impersonate).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from policies._core import KubeObject, Violation, rule
from policies._k8s import get, items, labels, mapping, ref
from trainmaster.api import JOB_LABEL
from trainmaster.spec import ClusterSpec

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLE_KINDS = ("Role", "ClusterRole")
BINDING_KINDS = ("RoleBinding", "ClusterRoleBinding")

CLUSTER_SCOPED: frozenset[tuple[str, str]] = frozenset(
    {
        ("", "nodes"),
        ("", "namespaces"),
        ("", "persistentvolumes"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("scheduling.k8s.io", "priorityclasses"),
        ("storage.k8s.io", "storageclasses"),
        ("storage.k8s.io", "csinodes"),
        ("storage.k8s.io", "csidrivers"),
        ("storage.k8s.io", "volumeattachments"),
        ("node.k8s.io", "runtimeclasses"),
        ("networking.k8s.io", "ingressclasses"),
        (RBAC_GROUP, "clusterroles"),
        (RBAC_GROUP, "clusterrolebindings"),
        ("certificates.k8s.io", "certificatesigningrequests"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("apiregistration.k8s.io", "apiservices"),
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    }
)
"""(API group, resource) of the cluster-scoped resources a ClusterRole may rightly name."""

CLUSTER_WIDE_READS: frozenset[tuple[str, str]] = frozenset(
    {("", "pods"), ("scheduling.x-k8s.io", "podgroups"), ("scheduling.k8s.io", "podgroups"),
     ("scheduling.k8s.io", "workloads"), ("scheduling.k8s.io", "compositepodgroups"),
     ("jobset.x-k8s.io", "jobsets")}
)
"""Namespaced resources a scheduler must read everywhere: every pod on a node takes its
share of the node, whatever its namespace (and gangs are PodGroups, scheduler-plugins'
or the upstream API's, with the CompositePodGroups and the Workloads that hold a
composite group's policy, or JobSets). Read only."""

READ_VERBS = frozenset({"get", "list", "watch"})

CLUSTER_WIDE_REPORTS: Mapping[tuple[str, str], frozenset[str]] = {
    ("", "events"): frozenset({"create", "patch", "update"}),
    ("events.k8s.io", "events"): frozenset({"create", "patch", "update"}),
    ("", "pods/status"): frozenset({"patch"}),
}
"""What a scheduler writes wherever a pod names it, as kube-scheduler does: an Event and
the pod's PodScheduled condition (trainmaster narrows the latter outside its namespaces
with a ValidatingAdmissionPolicy). Exactly these verbs."""

DANGEROUS_RESOURCES: Mapping[str, str] = {
    "secrets": "reads every credential of the namespace",
    "pods/exec": "runs commands in any pod, with that pod's identity",
    "pods/attach": "attaches to any pod's processes",
    "pods/portforward": "reaches any pod's ports, past every NetworkPolicy",
    "serviceaccounts/token": "mints tokens for other identities",
}
DANGEROUS_VERBS: Mapping[str, str] = {
    "bind": "binds roles with rights the holder lacks",
    "escalate": "writes roles with rights the holder lacks",
    "impersonate": "acts as any other user or ServiceAccount",
}

DEFAULT_GROUPS = ("system:serviceaccounts", "system:authenticated", "system:unauthenticated")
"""Groups that include every `default` ServiceAccount (or everyone)."""


def _job(obj: KubeObject) -> str | None:
    job = labels(obj).get(JOB_LABEL)
    return str(job) if job else None


def _role_rules(objects: Sequence[KubeObject]) -> Iterator[tuple[KubeObject, int, Any]]:
    for obj in objects:
        if obj.get("kind") in ROLE_KINDS:
            for i, r in enumerate(items(obj.get("rules"))):
                yield obj, i, mapping(r)


def _strings(value: Any) -> list[str]:
    return [str(v) for v in items(value)]


def _base(resource: str) -> str:
    return resource.split("/", 1)[0]


@rule(
    "rbac-no-wildcards",
    "mandatory",
    "object",
    "Roles and ClusterRoles name their API groups, resources and verbs: no `*`.",
    defense_in_depth="the object builders",
)
def rbac_no_wildcards(
    spec: ClusterSpec | None, objects: Sequence[KubeObject]
) -> Iterator[Violation]:
    for obj, i, r in _role_rules(objects):
        for field in ("apiGroups", "resources", "verbs", "nonResourceURLs"):
            if any("*" in v for v in _strings(r.get(field))):
                yield Violation(
                    f"rules[{i}].{field}",
                    f"`*` in {field} grants whatever exists now and whatever is added later: "
                    f"list exactly the {field} the component uses",
                    ref(obj),
                    _job(obj),
                )


def _default_subject(subject: Mapping[str, Any], namespace: str | None) -> str | None:
    kind, name = subject.get("kind"), str(subject.get("name") or "")
    if kind == "ServiceAccount" and name == "default":
        return f"the ServiceAccount `{subject.get('namespace') or namespace}/default`"
    if kind == "Group" and (name in DEFAULT_GROUPS or name.startswith("system:serviceaccounts:")):
        return f"the group `{name}`, which holds every `default` ServiceAccount"
    return None


@rule(
    "rbac-no-default-serviceaccount",
    "mandatory",
    "object",
    "No binding grants rights to a namespace's `default` ServiceAccount (or a group that "
    "holds it).",
    defense_in_depth="the object builders",
)
def rbac_no_default_serviceaccount(
    spec: ClusterSpec | None, objects: Sequence[KubeObject]
) -> Iterator[Violation]:
    for obj in objects:
        if obj.get("kind") not in BINDING_KINDS:
            continue
        namespace = get(obj, "metadata", "namespace")
        for i, subject in enumerate(items(obj.get("subjects"))):
            who = _default_subject(mapping(subject), namespace)
            if who:
                yield Violation(
                    f"subjects[{i}]",
                    f"binds {who}: every pod that names no ServiceAccount runs as it, so "
                    "any pod of the namespace gets these rights; bind the component's own "
                    "ServiceAccount instead",
                    ref(obj),
                    _job(obj),
                )


def _cluster_roles(objects: Sequence[KubeObject]) -> dict[str, KubeObject]:
    return {str(get(o, "metadata", "name")): o for o in objects if o.get("kind") == "ClusterRole"}


@rule(
    "rbac-namespaced-rights-in-roles",
    "mandatory",
    "cluster",
    "Rights on namespaced resources are granted by Roles in the namespaces concerned; a "
    "ClusterRoleBinding grants only cluster-scoped resources (and a scheduler's reads of "
    "pods, PodGroups, Workloads and JobSets, and its Events and PodScheduled reports).",
    defense_in_depth="the object builders",
)
def rbac_namespaced_rights_in_roles(
    spec: ClusterSpec | None, objects: Sequence[KubeObject]
) -> Iterator[Violation]:
    roles = _cluster_roles(objects)
    for binding in objects:
        if binding.get("kind") != "ClusterRoleBinding":
            continue
        role_ref = mapping(binding.get("roleRef"))
        if role_ref.get("kind") != "ClusterRole":
            continue
        name = str(role_ref.get("name") or "")
        role = roles.get(name)
        if role is None:
            # Not rendered with it: a built-in or someone else's role, rights unknown.
            yield Violation(
                "roleRef.name",
                f"binds ClusterRole {name!r} cluster-wide, which this spec does not render, "
                "so its rights cannot be checked: render the role with exactly the rights "
                "needed",
                ref(binding),
                _job(binding),
            )
            continue
        for i, r in enumerate(items(role.get("rules"))):
            r = mapping(r)
            verbs = set(_strings(r.get("verbs")))
            for group in _strings(r.get("apiGroups")):
                for resource in _strings(r.get("resources")):
                    key = (group, _base(resource))
                    if key in CLUSTER_SCOPED:
                        continue
                    if key in CLUSTER_WIDE_READS and verbs <= READ_VERBS:
                        continue
                    if verbs <= CLUSTER_WIDE_REPORTS.get((group, resource), frozenset()):
                        continue
                    yield Violation(
                        f"rules[{i}].resources",
                        f"{resource!r} ({group or 'core'}) is namespaced, and "
                        f"ClusterRoleBinding {get(binding, 'metadata', 'name')} grants "
                        f"{', '.join(sorted(verbs))} on it in every namespace: move the rule "
                        "to a Role in the namespace the component manages",
                        ref(role),
                        _job(role),
                    )


@rule(
    "rbac-no-dangerous-rights",
    "mandatory",
    "object",
    "No role reads secrets, execs, attaches or port-forwards into pods, mints tokens, or "
    "binds, escalates or impersonates.",
    defense_in_depth="the object builders",
)
def rbac_no_dangerous_rights(
    spec: ClusterSpec | None, objects: Sequence[KubeObject]
) -> Iterator[Violation]:
    for obj, i, r in _role_rules(objects):
        for resource in _strings(r.get("resources")):
            why = DANGEROUS_RESOURCES.get(resource)
            if why:
                yield Violation(
                    f"rules[{i}].resources",
                    f"{resource!r} {why}: no trainmaster component needs it; remove it",
                    ref(obj),
                    _job(obj),
                )
        for verb in _strings(r.get("verbs")):
            why = DANGEROUS_VERBS.get(verb)
            if why:
                yield Violation(
                    f"rules[{i}].verbs",
                    f"{verb!r} {why}: no trainmaster component needs it; remove it",
                    ref(obj),
                    _job(obj),
                )
