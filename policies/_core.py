"""What a rule is, what it reports, and how a finding reads.

A rule is a plain function over the validated spec and the rendered Kubernetes objects that
yields Violations (where, what, and the fix). The Rule wrapper adds the id and severity, so
the same function runs in `trainmaster policy check`, in `trainmaster plan` and in the
CrossGuard pack.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from trainmaster.spec import ClusterSpec

Severity = Literal["mandatory", "advisory"]
"""mandatory: blocks `policy check` and `pulumi preview/up`; advisory: reported only."""

Scope = Literal["object", "cluster"]
"""object: the rule judges each object on its own (a spec, when given, only sharpens the
field paths it reports), so CrossGuard runs it per resource; cluster: it needs the spec or
several objects at once, so CrossGuard runs it once per stack."""

KubeObject = Mapping[str, Any]
"""A Kubernetes object as a plain mapping (camelCase keys): what Pulumi sees as inputs."""

_JOB_INDEX = re.compile(r"^jobs\[\d+\]")

CheckFn = Callable[[ClusterSpec | None, Sequence[KubeObject]], Iterable["Violation"]]


@dataclass(frozen=True)
class Violation:
    """One place that breaks a rule.

    `path` is a spec field path (``jobs[1].checkpoint``) when `resource` is None, else a
    field path inside that object (``spec.template.spec.containers[0].image``). `message`
    says what is wrong and how to fix it. `job` names the job a finding belongs to, so the
    CrossGuard pack can attach it to that job's TrainingJob resource.
    """

    path: str
    message: str
    resource: str | None = None
    job: str | None = None


@dataclass(frozen=True)
class Finding:
    """A violation of a rule, with the rule's id and severity."""

    rule: str
    severity: Severity
    path: str
    message: str
    resource: str | None = None
    job: str | None = None

    @property
    def key(self) -> tuple[str, str | None, str]:
        """Identity across revisions: not the message, which may quote values that change,
        and a job by name, not by its index in `jobs` (an edit above it shifts the index)."""
        path = self.path
        if self.job is not None and self.resource is None:
            path = _JOB_INDEX.sub(f"jobs[{self.job}]", path, count=1)
        return (self.rule, self.resource, path)

    @property
    def where(self) -> str:
        return f"{self.resource}: {self.path}" if self.resource else self.path

    def render(self) -> str:
        return f"{self.where}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "path": self.path,
            "resource": self.resource,
            "job": self.job,
            "message": self.message,
        }


@dataclass(frozen=True)
class Rule:
    """A platform rule: an id, a severity and the check function."""

    id: str
    severity: Severity
    scope: Scope
    summary: str
    """One sentence: what the rule requires (the CrossGuard policy description)."""
    check: CheckFn
    defense_in_depth: str | None = None
    """What already enforces the rule for specs (spec validation, the object builders), if
    anything: then the rule guards against hand-built objects and regressions in that code."""

    def __call__(self, spec: ClusterSpec | None, objects: Sequence[KubeObject]) -> list[Finding]:
        return [
            Finding(self.id, self.severity, v.path, v.message, v.resource, v.job)
            for v in self.check(spec, objects)
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "scope": self.scope,
            "summary": self.summary,
            "defenseInDepth": self.defense_in_depth,
        }


def rule(
    rule_id: str,
    severity: Severity,
    scope: Scope,
    summary: str,
    *,
    defense_in_depth: str | None = None,
) -> Callable[[CheckFn], Rule]:
    """Declare a check function as a Rule (registered in policies._registry.RULES)."""

    def wrap(check: CheckFn) -> Rule:
        return Rule(rule_id, severity, scope, summary, check, defense_in_depth)

    return wrap
