"""One mapping from job to gang: the PodGroup the operator creates for a spec job and the
gang the simulator submits for a trace job of the same shape ask for the same thing."""

from __future__ import annotations

import pytest
import yaml

from tests.helpers import small_spec_doc
from trainmaster import api
from trainmaster.objects import build_pod_group, scheduler_config
from trainmaster.scheduler import SchedulerConfig, TopologyConstraint, TopologyMode
from trainmaster.simulate import Job as TraceJob
from trainmaster.spec import ClusterSpec, load_spec_text, validate_job

POLICY = [{"maxNodes": 1, "domain": "node", "mode": "required"},
          {"maxNodes": 4, "domain": "leaf", "mode": "required"},
          {"maxNodes": 8, "domain": "spine", "mode": "preferred"}]


def _spec() -> ClusterSpec:
    doc = small_spec_doc("gangs", leaves=4, nodes_per_leaf=4)
    doc["scheduler"] = {"topologyPolicy": POLICY,
                        "queues": [{"name": "default"}, {"name": "team", "priority": 7}]}
    return load_spec_text(yaml.safe_dump(doc))


@pytest.mark.parametrize("own", [None, ("leaf", "preferred"), ("spine", "required")])
def test_the_operator_and_the_simulator_ask_for_the_same_gang(
        own: tuple[str, str] | None) -> None:
    spec = _spec()
    config = SchedulerConfig.from_mapping(scheduler_config(spec))
    for nodes in range(1, 17):
        raw = {"name": "j", "image": "img:1", "launcher": "torchrun", "nodes": nodes,
               "gpusPerPod": 2, "queue": "team", "priority": 3}
        if own is not None:
            raw["topology"] = {"domain": own[0], "mode": own[1]}
        group = build_pod_group(spec, validate_job(spec, raw, "probe"), attempt=0)
        trace = TraceJob("j", 0.0, 60.0, nodes, 2, queue="team", priority=3,
                         topology=TopologyConstraint(own[0], TopologyMode(own[1]))
                         if own else None)
        gang = trace.gang(config.policy)
        annotations = group["metadata"]["annotations"]
        assert (annotations[api.TOPOLOGY_DOMAIN_ANNOTATION],
                annotations[api.TOPOLOGY_MODE_ANNOTATION]) == (gang.domain, gang.mode), nodes
        assert group["spec"]["minMember"] == gang.pods
        assert group["spec"]["minResources"][api.GPU_RESOURCE] == str(gang.gpus)
        assert group["metadata"]["labels"][api.QUEUE_LABEL] == gang.queue
        # And what the live scheduler applies to a PodGroup that names no topology:
        if own is None:
            assert config.topology_for(nodes) == TopologyConstraint(gang.domain,
                                                                    TopologyMode(gang.mode))


def test_a_size_no_rule_covers_goes_anywhere_preferred() -> None:
    spec = _spec()
    assert api.rule_for_size(spec.scheduler.topology_policy, 9) == (
        api.CLUSTER_DOMAIN, api.PREFERRED)
    shape = api.gang_shape(9, 8, "default", None, None, spec.scheduler.topology_policy)
    assert (shape.domain, shape.mode, shape.gpus) == ("cluster", "preferred", 72)
