"""The rules as Pulumi CrossGuard policies, run on the resources Pulumi sees.

TrainingCluster registers every object of build_all() as a generic resource whose type is
``kubernetes:<group>/<version>:<Kind>`` and whose inputs are the object dict, so a rule reads
a resource's inputs exactly as it reads a rendered object. Two things are not resources:

- the spec: the operator's ConfigMap ``<cluster>-spec`` holds it (key ``cluster.yaml``,
  validated and with defaults filled in), so spec rules load it from there;
- the gangs (Indexed Job, PodGroup, ...) the operator creates per job at run time: they are
  built from that same spec with trainmaster.objects.build_gang, as `policy check` does.

Object-scope rules become ResourceValidationPolicies (a violation shows on the resource;
the spec ConfigMap also answers for its jobs' gangs); cluster-scope rules become
StackValidationPolicies over all resources plus the gangs, reported on the TrainingJob of
the job concerned, else on the spec ConfigMap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    ReportViolation,
    ResourceValidation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidation,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy import Severity as PulumiSeverity

from policies._core import Finding, KubeObject, Rule
from policies._k8s import get, labels, ref
from policies._registry import RULES
from trainmaster.objects import SPEC_KEY, build_gang
from trainmaster.spec import ClusterSpec, SpecError, load_spec_text

PACK_NAME = "trainmaster"
SPEC_LABEL = "cluster-spec"
"""app.kubernetes.io/name of the ConfigMap that holds the spec (trainmaster.objects)."""


def plain(value: Any) -> Any:
    """Resource properties as plain dicts and lists.

    pulumi-policy wraps them in read-only proxies that raise UnknownValueError on values not
    known during preview; copying reads every value, so an unknown one surfaces here and the
    SDK reports "can't run policy during preview" instead of the rule guessing.
    """
    if isinstance(value, Mapping):
        return {str(k): plain(value[k]) for k in value}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [plain(v) for v in value]
    return value


def kube_object(resource_type: str, props: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Kubernetes object behind a resource; None for providers, components, others."""
    if not resource_type.startswith("kubernetes:"):
        return None
    obj: dict[str, Any] = plain(props)
    # Typed pulumi-kubernetes resources leave apiVersion/kind to the type token.
    _, api, kind = resource_type.split(":", 2)
    group, _, version = api.partition("/")
    obj.setdefault("apiVersion", version if group == "core" else api)
    obj.setdefault("kind", kind)
    return obj


def is_spec_configmap(obj: KubeObject) -> bool:
    return (
        obj.get("kind") == "ConfigMap"
        and labels(obj).get("app.kubernetes.io/name") == SPEC_LABEL
        and isinstance(get(obj, "data", SPEC_KEY), str)
    )


def spec_of(obj: KubeObject) -> ClusterSpec:
    """The spec held by the spec ConfigMap; raises SpecError when it is not a valid spec."""
    return load_spec_text(str(get(obj, "data", SPEC_KEY)), f"{ref(obj)} data[{SPEC_KEY}]")


def gangs(spec: ClusterSpec) -> list[dict[str, Any]]:
    """What the operator creates for each job's first attempt (not Pulumi resources)."""
    return [obj for job in spec.jobs for obj in build_gang(spec, job, 0)]


def _level(r: Rule) -> EnforcementLevel:
    return EnforcementLevel.MANDATORY if r.severity == "mandatory" else EnforcementLevel.ADVISORY


def _pulumi_severity(r: Rule) -> PulumiSeverity:
    return PulumiSeverity.HIGH if r.severity == "mandatory" else PulumiSeverity.LOW


def _report(findings: Iterable[Finding], report: ReportViolation, urn: str | None = None) -> None:
    for finding in findings:
        report(finding.render(), urn)


def _resource_validation(r: Rule) -> ResourceValidation:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        obj = kube_object(args.resource_type, args.props)
        if obj is None:
            return
        _report(r(None, [obj]), report)
        if is_spec_configmap(obj):
            try:
                spec = spec_of(obj)
            except SpecError as exc:
                report(f"cannot check the operator's gangs: {exc}", None)
                return
            _report(r(spec, gangs(spec)), report)

    return validate


def _stack_validation(r: Rule) -> StackValidation:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        urns: dict[str, str] = {}
        objects: list[dict[str, Any]] = []
        spec_urn: str | None = None
        spec: ClusterSpec | None = None
        for resource in args.resources:
            obj = kube_object(resource.resource_type, resource.props)
            if obj is None:
                continue
            objects.append(obj)
            urns[ref(obj)] = resource.urn
            if spec_urn is None and is_spec_configmap(obj):
                spec_urn = resource.urn
                try:
                    spec = spec_of(obj)
                except SpecError as exc:
                    report(f"cannot check the spec: {exc}", resource.urn)
                    return
        if spec is None and not objects:
            args.not_applicable("no Kubernetes objects in this stack")
        if spec is not None:
            objects.extend(gangs(spec))
        for finding in r(spec, objects):
            urn = urns.get(finding.resource or "")
            if urn is None and finding.job is not None and spec is not None:
                urn = urns.get(f"TrainingJob {spec.metadata.namespace}/{finding.job}")
            report(finding.render(), urn or spec_urn)

    return validate


def build_policies(rules: Iterable[Rule] = RULES) -> list[Policy]:
    """One CrossGuard policy per rule, named by the rule's id, enforced by its severity."""
    policies: list[Policy] = []
    for r in rules:
        if r.scope == "object":
            policies.append(
                ResourceValidationPolicy(
                    r.id,
                    r.summary,
                    validate=_resource_validation(r),
                    enforcement_level=_level(r),
                    severity=_pulumi_severity(r),
                    tags=["trainmaster", r.scope],
                )
            )
        else:
            policies.append(
                StackValidationPolicy(
                    r.id,
                    r.summary,
                    validate=_stack_validation(r),
                    enforcement_level=_level(r),
                    severity=_pulumi_severity(r),
                    tags=["trainmaster", r.scope],
                )
            )
    return policies
