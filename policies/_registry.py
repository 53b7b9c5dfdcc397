"""The rules, in the order they are reported. Adding a rule means adding it here."""

from __future__ import annotations

from policies._core import Rule
from policies._guards import gpu_work_guarded
from policies._jobs import (
    capacity_fits,
    job_checkpoint,
    job_max_restarts,
    multi_node_whole_nodes,
    queue_quota,
    topology_domain_fits,
)
from policies._networks import networks_disjoint, roce_lossless
from policies._pods import (
    gpu_requests_equal_limits,
    image_pinned,
    privileged_system_daemonsets,
    training_pod_gang,
)
from policies._rbac import (
    rbac_namespaced_rights_in_roles,
    rbac_no_dangerous_rights,
    rbac_no_default_serviceaccount,
    rbac_no_wildcards,
)

RULES: tuple[Rule, ...] = (
    job_checkpoint,
    job_max_restarts,
    multi_node_whole_nodes,
    topology_domain_fits,
    queue_quota,
    capacity_fits,
    training_pod_gang,
    image_pinned,
    gpu_requests_equal_limits,
    privileged_system_daemonsets,
    gpu_work_guarded,
    rbac_no_wildcards,
    rbac_no_default_serviceaccount,
    rbac_namespaced_rights_in_roles,
    rbac_no_dangerous_rights,
    roce_lossless,
    networks_disjoint,
)

_BY_ID = {r.id: r for r in RULES}
if len(_BY_ID) != len(RULES):  # CrossGuard policy names must be unique too
    raise RuntimeError("two policies share an id")


def get_rule(rule_id: str) -> Rule:
    """The rule with this id; KeyError names the known ids."""
    try:
        return _BY_ID[rule_id]
    except KeyError:
        raise KeyError(f"no rule {rule_id!r}; known: {', '.join(_BY_ID)}") from None
