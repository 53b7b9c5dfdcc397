"""The scheduler picks a gang's topology rule the way the spec picks a job's: one rule
chooser and one default policy (trainmaster.api), whatever the config holds."""

from __future__ import annotations

import pytest

from tests.helpers import stack_doc
from trainmaster.api import PolicyRule
from trainmaster.objects import scheduler_config
from trainmaster.scheduler import ConfigError, SchedulerConfig, TopologyMode
from trainmaster.scheduler.framework.model import TopologyConstraint
from trainmaster.spec import (
    ClusterSpec,
    TopologyRule,
    default_topology_policy,
    job_domain_rule,
    validate_data,
    validate_job,
)


def _spec(policy: list[dict[str, object]] | None) -> ClusterSpec:
    doc = stack_doc("bench")
    doc["jobs"] = []
    if policy is not None:
        doc.setdefault("scheduler", {})["topologyPolicy"] = policy
    return validate_data(doc, "bench.yaml")


@pytest.mark.parametrize(
    "policy",
    [
        None,
        [{"maxNodes": 4, "domain": "leaf", "mode": "required"}, {"domain": "spine"}],
        [{"maxNodes": 2, "domain": "node"}, {"maxNodes": 20, "domain": "leaf"}],
    ],
    ids=["default", "leaf-then-spine", "no-rule-for-large-gangs"],
)
def test_same_rule_as_the_spec_for_every_size(policy: list[dict[str, object]] | None) -> None:
    spec = _spec(policy)
    config = SchedulerConfig.from_mapping(scheduler_config(spec))
    probe = {"image": "img:1", "launcher": "torchrun", "name": "probe"}
    for nodes in range(1, 41):
        rule = job_domain_rule(spec, validate_job(spec, {**probe, "nodes": nodes}, "probe"))
        expected = TopologyConstraint(rule.domain, TopologyMode(rule.mode))
        assert config.topology_for(nodes) == expected, nodes


def test_without_a_policy_the_spec_default_applies() -> None:
    # The spec's documented default (docs/spec.md, SchedulerSpec.topologyPolicy): one-node
    # jobs on one node (required), larger ones prefer one leaf.
    assert default_topology_policy(("spine", "leaf")) == [
        TopologyRule(max_nodes=1, domain="node", mode="required"),
        TopologyRule(domain="leaf", mode="preferred"),
    ]
    assert _spec(None).scheduler.topology_policy == default_topology_policy(("spine", "leaf"))
    config = SchedulerConfig()
    assert [(r.max_nodes, r.domain, r.mode) for r in config.policy] == [
        (r.max_nodes, r.domain, r.mode) for r in default_topology_policy(config.levels)]
    assert config.topology_for(1) == TopologyConstraint("node", TopologyMode.REQUIRED)
    assert config.topology_for(2) == TopologyConstraint("leaf", TopologyMode.PREFERRED)
    # The leaf is the last level, whatever it is called.
    racks = SchedulerConfig(levels=("pod", "rack"))
    racks.validate()
    assert racks.topology_for(64) == TopologyConstraint("rack", TopologyMode.PREFERRED)


def test_a_policy_no_rule_covers_falls_back_to_the_cluster() -> None:
    config = SchedulerConfig.from_mapping(
        {"topologyPolicy": [{"maxNodes": 2, "domain": "leaf", "mode": "required"}]}
    )
    assert config.topology_for(2) == TopologyConstraint("leaf", TopologyMode.REQUIRED)
    assert config.topology_for(3) == TopologyConstraint("cluster", TopologyMode.PREFERRED)
    legacy = SchedulerConfig.from_mapping({"topologyPolicy": [{"maxPods": 1, "domain": "node"}]})
    assert legacy.policy == (PolicyRule(max_nodes=1, domain="node"),)


def test_a_bad_rule_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="topologyPolicy rule"):
        SchedulerConfig.from_mapping({"topologyPolicy": [{"domain": "leaf", "maxNodes": 0}]})
    with pytest.raises(ConfigError, match="topologyPolicy mode"):
        SchedulerConfig.from_mapping({"topologyPolicy": [{"domain": "leaf", "mode": "maybe"}]})
