"""Run the rules over a spec and the objects it renders to."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from policies._core import Finding, KubeObject, Rule
from policies._registry import RULES
from trainmaster.objects import all_objects, build_gang
from trainmaster.spec import ClusterSpec


def rendered_objects(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Every object the spec puts on the cluster: what Pulumi applies (build_all) plus the
    first gang of each job, which the operator creates and which holds the training pods."""
    objects = all_objects(spec)
    for job in spec.jobs:
        objects.extend(build_gang(spec, job, 0))
    return objects


def evaluate(
    spec: ClusterSpec | None,
    objects: Sequence[KubeObject] | None = None,
    rules: Iterable[Rule] = RULES,
) -> list[Finding]:
    """Findings of every rule, in rule order. `objects` defaults to the spec's rendering."""
    if objects is None:
        objects = rendered_objects(spec) if spec is not None else []
    return [finding for r in rules for finding in r(spec, objects)]


def blocking(findings: Iterable[Finding]) -> list[Finding]:
    """The findings that fail a check: those of mandatory rules."""
    return [f for f in findings if f.severity == "mandatory"]
