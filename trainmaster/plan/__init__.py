"""`trainmaster plan`: what a change to spec files does, for a pull-request comment.

It reads the spec files at two git revisions (`git show REF:path`; the head defaults to the
working tree) and compares them: jobs added, removed and changed (with the fields), GPU demand
per queue before and after, each queue's and cohort's fair-sharing entitlement before and
after (when a quota, weight or cohort changes), changed cluster settings, and policy
findings the change adds or resolves (the rules of `policies/`).
"""

from trainmaster.plan._build import (
    DEFAULT_SPECS,
    JobChange,
    JobSummary,
    Plan,
    QueueDemand,
    SpecState,
    StackPlan,
    build_plan,
    plan_stack,
)
from trainmaster.plan._diff import Change, diff, flatten
from trainmaster.plan._fair import Entitlement, EntitlementChange, entitlement_changes
from trainmaster.plan._git import PlanError, Repo, Revision
from trainmaster.plan._render import render_json, render_markdown

__all__ = [
    "DEFAULT_SPECS",
    "Change",
    "Entitlement",
    "EntitlementChange",
    "JobChange",
    "JobSummary",
    "Plan",
    "PlanError",
    "QueueDemand",
    "Repo",
    "Revision",
    "SpecState",
    "StackPlan",
    "build_plan",
    "diff",
    "entitlement_changes",
    "flatten",
    "plan_stack",
    "render_json",
    "render_markdown",
]
