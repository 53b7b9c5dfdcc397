"""The tenancy guardrails as rendered: which namespaces, which queues and classes, who is
exempt. What the API server does with them is tests/scheduler/test_guards_live.py."""

from __future__ import annotations

from typing import Any

from tests.helpers import STACKS
from trainmaster.objects import build_all, build_guards, guarded_by, probe_pod
from trainmaster.objects._guards import allowed_classes, namespace_queues
from trainmaster.spec import ClusterSpec, Queue, load_spec, queue_issues


def _spec(**scheduler: Any) -> ClusterSpec:
    spec = load_spec(STACKS / "dev" / "cluster.yaml")
    doc = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    doc["scheduler"].update(scheduler)
    return ClusterSpec.model_validate(doc)


def _teams() -> ClusterSpec:
    return _spec(namespaces=["team-a", "team-b"],
                 queues=[{"name": "default"}, {"name": "research"},
                         {"name": "alpha", "priorityClasses": ["batch"]}, {"name": "beta"}],
                 localQueues=[{"name": "lq-a", "namespace": "team-a", "clusterQueue": "alpha"},
                              {"name": "lq-b", "namespace": "team-b", "clusterQueue": "beta"}])


def _variable(policy: dict[str, Any], name: str) -> str:
    return str(next(v["expression"] for v in policy["spec"]["variables"] if v["name"] == name))


def test_every_served_namespace_is_guarded_and_trainingjobs_too() -> None:
    spec = _teams()
    objs = build_guards(spec)
    policies = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"]
    bindings = {o["spec"]["policyName"]: o["spec"]["validationActions"]
                for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert sorted(bindings) == sorted(p["metadata"]["name"] for p in policies)
    assert set(map(tuple, bindings.values())) == {("Deny",)}
    assert guarded_by(objs) == ["trainmaster", "team-a", "team-b"]
    names = [p["metadata"]["name"] for p in policies]
    assert names == ["dev-gpu-guard-trainmaster", "dev-gpu-guard-team-a",
                     "dev-gpu-guard-team-b", "dev-trainingjob-guard"]
    # The scheduler's component renders them, so Pulumi and apply carry them.
    assert all(o in build_all(spec)["scheduler"] for o in objs)
    for policy in policies:
        assert policy["spec"]["failurePolicy"] == "Fail"
        exempt = policy["spec"]["matchConditions"][0]["expression"]
        assert '"system:masters" in request.userInfo.groups' in exempt
        assert "system:serviceaccount:trainmaster-system:trainmaster-scheduler" in exempt
        assert "system:serviceaccount:trainmaster-system:dev-operator" in exempt
        # Not the job controller: it creates a Job's pods, which are judged on their own.
        assert "job-controller" not in exempt and "kube-system" not in exempt


def test_each_namespace_names_its_own_queues_and_their_classes() -> None:
    spec = _teams()
    assert namespace_queues(spec, "team-a") == {"lq-a": "alpha"}
    assert namespace_queues(spec, "trainmaster") == {
        "default": "default", "research": "research", "alpha": "alpha", "beta": "beta"}
    classes = allowed_classes(spec)
    assert classes["alpha"] == ["batch", "dev-alpha"]  # its own, and its priorityClasses
    assert classes["beta"] == ["dev-beta"]  # the default: its own only
    team_a = next(o for o in build_guards(spec) if o["metadata"]["name"] == "dev-gpu-guard-team-a"
                  and o["kind"] == "ValidatingAdmissionPolicy")
    assert _variable(team_a, "allowed") == '{"lq-a": ["batch", "dev-alpha"]}'
    messages = " ".join(v.get("messageExpression", "") for v in team_a["spec"]["validations"])
    assert "a LocalQueue of namespace team-a" in messages and "name one of lq-a" in messages
    assert "spec.template." in messages  # a Job's refusal names its pod template's field


def test_spec_jobs_own_priority_classes_are_allowed_in_their_queue() -> None:
    spec = load_spec(STACKS / "dev" / "cluster.yaml")
    doc = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    doc["jobs"][0]["priority"] = 500
    queue = doc["jobs"][0]["queue"]
    classes = allowed_classes(ClusterSpec.model_validate(doc))
    assert f"dev-{queue}-p500" in classes[queue]


def test_system_classes_and_duplicates_are_refused_in_the_spec() -> None:
    queue = Queue.model_validate({"name": "default",
                                  "priorityClasses": ["system-cluster-critical", "x", "x"]})
    issues = {i.path: i.message for i in queue_issues([queue])}
    assert "system class" in issues["scheduler.queues[0].priorityClasses[0]"]
    assert issues["scheduler.queues[0].priorityClasses"] == "'x' is listed more than once"


def test_the_probe_is_judged_like_a_teams_request_only_as_a_dry_run() -> None:
    pod = probe_pod()
    policy = build_guards(_teams())[0]
    exempt = policy["spec"]["matchConditions"][0]["expression"]
    label = next(iter(pod["metadata"]["labels"]))
    assert label in exempt and "request.dryRun == true" in exempt
    # It asks for a GPU and names another scheduler: every workload guardrail refuses it.
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
