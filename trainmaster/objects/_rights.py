"""Who may do what, read off the rendered objects: the tables of docs/security.md, the
list of rights the integration test proves, and `trainmaster policy rights`.

Everything here reads objects, never the builders' rule constants, so what it reports is
what the API server will enforce.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trainmaster.objects._cache import build_node_warmup
from trainmaster.objects._job_render import job_objects
from trainmaster.objects._render import build_all
from trainmaster.spec import ClusterSpec

WORKLOAD_TEMPLATES = {
    "Deployment": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "Job": ("spec", "template"),
}


@dataclass(frozen=True)
class Grant:
    """One rule of one role, as held by one ServiceAccount in one scope."""

    account: str
    """`namespace/name` of the ServiceAccount."""
    scope: str
    """`cluster`, or the namespace the rights hold in."""
    api_group: str
    resource: str
    verbs: tuple[str, ...]
    names: tuple[str, ...]
    """resourceNames: the only objects the rule covers; () means all."""


@dataclass(frozen=True)
class Workload:
    """How one workload's pods run."""

    name: str
    """`Kind namespace/name`."""
    account: str
    token: bool
    """Whether an API token is mounted."""
    privileged: bool
    host_network: bool
    host_paths: tuple[str, ...]
    added_capabilities: tuple[str, ...]
    non_root: bool


def spec_objects(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Everything the spec puts on the cluster: build_all plus each job's first gang
    (which the operator creates and which holds the job's identity) and each dataset's
    warm-up on the spec's first node (the operator creates one per node that a job
    reading the dataset may use)."""
    objects = [obj for objs in build_all(spec).values() for obj in objs]
    for job in spec.jobs:
        # The same objects `render --jobs` prints (its TrainingJob is in build_all).
        objects.extend(job_objects(spec, job)[1:])
    if spec.cache is not None and spec.cache.warmup and spec.nodes:
        objects.extend(build_node_warmup(spec, d, spec.nodes[0].name, [])
                       for d in spec.cache.datasets)
    return objects


def _get(value: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def grants(objects: Iterable[Mapping[str, Any]]) -> list[Grant]:
    """Every right every ServiceAccount gets from the rendered bindings, sorted."""
    objects = list(objects)
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in objects
        if o.get("kind") in ("Role", "ClusterRole")
    }
    out: set[Grant] = set()
    for binding in objects:
        kind = binding.get("kind")
        if kind not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        namespace = binding["metadata"].get("namespace")
        ref = binding["roleRef"]
        role_ns = namespace if ref["kind"] == "Role" else None
        role = roles.get((ref["kind"], role_ns, ref["name"]))
        if role is None:
            continue
        scope = namespace if kind == "RoleBinding" else "cluster"
        for subject in binding.get("subjects") or []:
            if subject.get("kind") != "ServiceAccount":
                continue
            account = f"{subject.get('namespace') or namespace}/{subject['name']}"
            for rule in role.get("rules") or []:
                for group in rule.get("apiGroups") or [""]:
                    for resource in rule.get("resources") or []:
                        out.add(
                            Grant(
                                account,
                                str(scope),
                                group,
                                resource,
                                tuple(rule.get("verbs") or ()),
                                tuple(rule.get("resourceNames") or ()),
                            )
                        )
    return sorted(out, key=lambda g: (g.account, g.scope != "cluster", g.scope, g.api_group,
                                      g.resource))  # fmt: skip


def service_accounts(objects: Iterable[Mapping[str, Any]]) -> list[str]:
    """`namespace/name` of every ServiceAccount the objects create."""
    return sorted(
        f"{o['metadata']['namespace']}/{o['metadata']['name']}"
        for o in objects
        if o.get("kind") == "ServiceAccount"
    )


def workloads(objects: Iterable[Mapping[str, Any]]) -> list[Workload]:
    out = []
    for obj in objects:
        keys = WORKLOAD_TEMPLATES.get(str(obj.get("kind")))
        if keys is None:
            continue
        pod = _get(obj, *keys, "spec") or {}
        meta = obj["metadata"]
        containers = [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]
        contexts = [c.get("securityContext") or {} for c in containers]
        pod_context = pod.get("securityContext") or {}
        out.append(
            Workload(
                name=f"{obj['kind']} {meta.get('namespace')}/{meta['name']}",
                account=pod.get("serviceAccountName") or "default",
                token=pod.get("automountServiceAccountToken", True) is not False,
                privileged=any(c.get("privileged") for c in contexts),
                host_network=bool(pod.get("hostNetwork")),
                host_paths=tuple(
                    sorted(
                        v["hostPath"]["path"] for v in pod.get("volumes") or [] if "hostPath" in v
                    )
                ),
                added_capabilities=tuple(
                    sorted({cap for c in contexts for cap in _get(c, "capabilities", "add") or []})
                ),
                non_root=bool(contexts)
                and all(
                    c.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is True for c in contexts
                ),
            )
        )
    return sorted(out, key=lambda w: w.name)


def _cell(values: Iterable[str]) -> str:
    return ", ".join(values) or "—"


def grants_markdown(objects: Iterable[Mapping[str, Any]]) -> str:
    lines = [
        "| identity | where | API group | resource | verbs | only |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for g in grants(objects):
        lines.append(
            f"| `{g.account}` | {g.scope} | {g.api_group or 'core'} | {g.resource} | "
            f"{_cell(g.verbs)} | {_cell(g.names)} |"
        )
    return "\n".join(lines) + "\n"


def workloads_markdown(objects: Iterable[Mapping[str, Any]]) -> str:
    lines = [
        "| workload | runs as | API token | non-root | privileged | host network "
        "| host paths | added capabilities |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for w in workloads(objects):
        lines.append(
            f"| {w.name} | {w.account} | {'yes' if w.token else 'no'} | "
            f"{'yes' if w.non_root else 'no'} | {'**yes**' if w.privileged else 'no'} | "
            f"{'**yes**' if w.host_network else 'no'} | {_cell(w.host_paths)} | "
            f"{_cell(w.added_capabilities)} |"
        )
    return "\n".join(lines) + "\n"


def namespaces_markdown(objects: Iterable[Mapping[str, Any]]) -> str:
    lines = ["| namespace | enforces | warns and audits |", "| --- | --- | --- |"]
    for obj in objects:
        if obj.get("kind") != "Namespace":
            continue
        labels = obj["metadata"].get("labels") or {}
        lines.append(
            f"| {obj['metadata']['name']} | "
            f"{labels.get('pod-security.kubernetes.io/enforce', '—')} | "
            f"{labels.get('pod-security.kubernetes.io/warn', '—')} |"
        )
    return "\n".join(lines) + "\n"


def _selector(selector: Any) -> str:
    labels = _get(selector, "matchLabels") or {}
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "every pod"


def _peer(peer: Mapping[str, Any]) -> str:
    if "namespaceSelector" in peer:
        return f"namespace {_selector(peer['namespaceSelector'])}"
    return f"pods {_selector(peer.get('podSelector'))}"


def network_policies_markdown(objects: Iterable[Mapping[str, Any]]) -> str:
    lines = ["| policy | pods | accept from | ports |", "| --- | --- | --- | --- |"]
    for obj in objects:
        if obj.get("kind") != "NetworkPolicy":
            continue
        meta, spec = obj["metadata"], obj["spec"]
        name = f"{meta['namespace']}/{meta['name']}"
        ingress = spec.get("ingress") or []
        if not ingress:
            lines.append(f"| {name} | {_selector(spec.get('podSelector'))} | nobody | — |")
        for rule in ingress:
            ports = [str(p.get("port")) for p in rule.get("ports") or []]
            peers = [_peer(p) for p in rule.get("from") or []]
            lines.append(
                f"| {name} | {_selector(spec.get('podSelector'))} | {_cell(peers)} | "
                f"{', '.join(ports) or 'all'} |"
            )
    return "\n".join(lines) + "\n"
