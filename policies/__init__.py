"""trainmaster's platform rules, as code.

Each rule is a plain function over the validated spec and the Kubernetes objects it renders
to (see RULES). The same functions run in `trainmaster policy check`, in `trainmaster plan`
and, through ``policies/__main__.py``, as a Pulumi CrossGuard policy pack during
``pulumi preview --policy-pack policies``.
"""

from policies._core import (
    Finding,
    KubeObject,
    Rule,
    Scope,
    Severity,
    Violation,
    rule,
)
from policies._evaluate import blocking, evaluate, rendered_objects
from policies._jobs import MAX_RESTARTS
from policies._pods import image_problem
from policies._registry import RULES, get_rule

__all__ = [
    "MAX_RESTARTS",
    "RULES",
    "Finding",
    "KubeObject",
    "Rule",
    "Scope",
    "Severity",
    "Violation",
    "blocking",
    "evaluate",
    "get_rule",
    "image_problem",
    "rendered_objects",
    "rule",
]
