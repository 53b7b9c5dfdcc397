"""Every rule: the example stacks pass it, and each way of breaking it is reported with the
field path. Rules that spec validation also enforces are broken on copied models or on the
rendered objects (see builders.py), and a test shows validation refuses them too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import RULES, Finding, evaluate, get_rule, image_problem, rendered_objects
from tests.policies import rbac_cases as rbac
from tests.policies.builders import (
    dev_doc,
    find,
    objects_of,
    spec_from,
    stack,
    trainer,
    with_job,
)
from trainmaster.api import POD_GROUP_LABEL
from trainmaster.spec import ClusterSpec, SpecInvalidError, TopologyRule
from trainmaster.spec._model import JobTopology

Objects = list[dict[str, Any]]
Case = Callable[[], tuple[ClusterSpec | None, Objects, str]]
"""Builds (spec, objects, the `where` a finding must name)."""


def _spec_case(spec: ClusterSpec, where: str) -> tuple[ClusterSpec, Objects, str]:
    return spec, objects_of(spec), where


def _doc_case(change: Callable[[dict[str, Any]], None], where: str) -> Case:
    def build() -> tuple[ClusterSpec | None, Objects, str]:
        doc = dev_doc()
        change(doc)
        return _spec_case(spec_from(doc), where)

    return build


def _objects_case(change: Callable[[Objects], str], with_spec: bool = True) -> Case:
    """Break the dev stack's rendered objects; `change` returns the expected `where`."""

    def build() -> tuple[ClusterSpec | None, Objects, str]:
        spec = stack()
        objects = objects_of(spec)
        where = change(objects)
        return (spec if with_spec else None), objects, where

    return build


GANG = "Job trainmaster/gpt-small-r0"
TRAINER = f"{GANG}: spec.template.spec.containers[0]"


# --- job rules -----------------------------------------------------------------------


def _restarts(value: object) -> Case:
    def build() -> tuple[ClusterSpec | None, Objects, str]:
        spec = stack()
        policy = spec.jobs[0].restart_policy.model_copy(update={"max_restarts": value})
        return _spec_case(
            with_job(spec, 0, restart_policy=policy), "jobs[0].restartPolicy.maxRestarts"
        )

    return build


def _mixed_nodes(doc: dict[str, Any]) -> None:
    leaf = doc["topology"]["switches"][0]["switches"][0]
    leaf["nodes"] = [{"name": "a", "gpus": 4}, {"name": "b", "gpus": 4}, {"name": "c"}]
    doc["jobs"][0].update(gpusPerPod=4, topology={"domain": "leaf", "mode": "preferred"})


def _add_research_job(gpus_nodes: int) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        job = {**doc["jobs"][0], "name": "extra", "nodes": gpus_nodes}
        job.pop("topology")
        doc["jobs"].append(job)

    return change


def _policy_requires_leaf() -> tuple[ClusterSpec | None, Objects, str]:
    spec = stack()
    scheduler = spec.scheduler.model_copy(
        update={"topology_policy": [TopologyRule(domain="leaf", mode="required")]}
    )
    spec = with_job(spec.model_copy(update={"scheduler": scheduler}), 1, nodes=5)
    return _spec_case(spec, "jobs[1].nodes")


# --- pod rules -----------------------------------------------------------------------


def _set_scheduler(name: str) -> Callable[[Objects], str]:
    def change(objects: Objects) -> str:
        find(objects, "Job", "gpt-small-r0")["spec"]["template"]["spec"]["schedulerName"] = name
        return f"{GANG}: spec.template.spec.schedulerName"

    return change


def _drop_group_label(objects: Objects) -> str:
    del find(objects, "Job", "gpt-small-r0")["spec"]["template"]["metadata"]["labels"][
        POD_GROUP_LABEL
    ]
    return f"{GANG}: spec.template.metadata.labels[{POD_GROUP_LABEL}]"


def _drop_pod_group(objects: Objects) -> str:
    objects.remove(find(objects, "PodGroup", "gpt-small-r0"))
    return f"{GANG}: spec.template.metadata.labels[{POD_GROUP_LABEL}]"


def _partial_gang(objects: Objects) -> str:
    find(objects, "PodGroup", "gpt-small-r0")["spec"]["minMember"] = 1
    return f"{GANG}: spec.template.metadata.labels[{POD_GROUP_LABEL}]"


def _gpu_deployment(objects: Objects) -> str:
    container = {"name": "x", "image": "x:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    objects.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "notebook", "namespace": "trainmaster"},
            "spec": {"template": {"metadata": {}, "spec": {"containers": [container]}}},
        }
    )
    return "Deployment trainmaster/notebook: spec.template.spec.schedulerName"


def _image_on(kind: str, name: str, image: str, init: bool = False) -> Callable[[Objects], str]:
    def change(objects: Objects) -> str:
        obj = find(objects, kind, name)
        pod, ns = obj["spec"]["template"]["spec"], obj["metadata"]["namespace"]
        if init:
            pod["initContainers"] = [{"name": "init", "image": image}]
            return f"{kind} {ns}/{name}: spec.template.spec.initContainers[0].image"
        pod["containers"][0]["image"] = image
        return f"{kind} {ns}/{name}: spec.template.spec.containers[0].image"

    return change


def _training_job_only(objects: Objects) -> str:
    # What CrossGuard sees for one TrainingJob resource: the object, no spec.
    job = find(objects, "TrainingJob", "gpt-small")
    job["spec"]["image"] = "nvcr.io/nvidia/pytorch:latest"
    objects[:] = [job]
    return "TrainingJob trainmaster/gpt-small: spec.image"


def _gpus(request: object, limit: object) -> Callable[[Objects], str]:
    def change(objects: Objects) -> str:
        resources = trainer(objects)["resources"]
        for part, value in (("requests", request), ("limits", limit)):
            if value is None:
                del resources[part]["nvidia.com/gpu"]
            else:
                resources[part]["nvidia.com/gpu"] = value
        return f"{TRAINER}.resources"

    return change


def _privileged(kind: str, name: str) -> Callable[[Objects], str]:
    def change(objects: Objects) -> str:
        obj = find(objects, kind, name)
        container = obj["spec"]["template"]["spec"]["containers"][0]
        container["securityContext"] = {"privileged": True}
        where = f"{kind} {obj['metadata']['namespace']}/{name}: spec.template.spec.containers[0]"
        return f"{where}.securityContext.privileged"

    return change


def _unguard(kind: str) -> Callable[[Objects], str]:
    """Drop the training namespace's guardrail policy, or its binding, or let it fail open."""

    def change(objects: Objects) -> str:
        name = "dev-gpu-guard-trainmaster"
        if kind == "open":
            find(objects, "ValidatingAdmissionPolicy", name)["spec"]["failurePolicy"] = "Ignore"
        else:
            objects.remove(find(objects, kind, name))
        return f"{TRAINER}.resources"

    return change


def _relabel_exporter(objects: Objects) -> str:
    exporter = find(objects, "DaemonSet", "dev-gpu-exporter")
    exporter["metadata"]["labels"]["app.kubernetes.io/component"] = "cache"
    where = "DaemonSet trainmaster/dev-gpu-exporter: spec.template.spec.containers[0]"
    return f"{where}.securityContext.privileged"


# --- network rules -------------------------------------------------------------------


def _networks(spec: ClusterSpec, **compute_or_storage: Any) -> ClusterSpec:
    nets = spec.networks
    update: dict[str, Any] = {}
    if "lossless" in compute_or_storage or "rails" in compute_or_storage:
        update["compute"] = nets.compute.model_copy(update=compute_or_storage)
    else:
        assert nets.storage is not None
        update["storage"] = nets.storage.model_copy(update=compute_or_storage)
    return spec.model_copy(update={"networks": nets.model_copy(update=update)})


def _overlapping_rails() -> tuple[ClusterSpec | None, Objects, str]:
    spec = stack()
    rails = list(spec.networks.compute.rails)
    rails[1] = rails[1].model_copy(update={"subnet": "10.100.0.0/19"})
    return _spec_case(_networks(spec, rails=rails), "networks.compute.rails[1].subnet")


def _cohort_of(first: int, second: int) -> Callable[[dict[str, Any]], None]:
    """The dev stack (64 GPUs) with its queues in one cohort of these quotas."""
    def change(doc: dict[str, Any]) -> None:
        doc["scheduler"]["queues"] = [
            {"name": "default", "nominalQuota": first, "cohort": "all"},
            {"name": "research", "nominalQuota": second, "cohort": "all"}]
    return change


def _two_datasets(size: str) -> Callable[[dict[str, Any]], None]:
    """gpt-small (jobs[0]) reads two datasets of `size` each from the dev stack's 2Ti cache."""
    def change(doc: dict[str, Any]) -> None:
        doc["cache"]["datasets"] = [
            {"name": "one", "source": "s3://d/one", "size": size},
            {"name": "two", "source": "s3://d/two", "size": size}]
        for job in doc["jobs"]:
            job.pop("datasets", None)
        doc["jobs"][0]["datasets"] = ["one", "two"]
    return change


VIOLATIONS: dict[str, dict[str, Case]] = {
    "job-checkpoint": {
        "missing": _doc_case(lambda d: d["jobs"][1].pop("checkpoint"), "jobs[1].checkpoint"),
    },
    "job-max-restarts": {
        "above-ceiling": _restarts(500),
        "unset": _restarts(None),
        "negative": _restarts(-1),
    },
    "multi-node-whole-nodes": {
        "half-nodes": _doc_case(lambda d: d["jobs"][0].update(gpusPerPod=4), "jobs[0].gpusPerPod"),
        "mixed-node-sizes": _doc_case(_mixed_nodes, "jobs[0].gpusPerPod"),
    },
    "topology-domain-fits": {
        "required-leaf-too-small": lambda: _spec_case(
            with_job(stack(), 0, nodes=6), "jobs[0].nodes"
        ),
        "larger-than-cluster": lambda: _spec_case(
            with_job(stack(), 0, nodes=9, topology=None), "jobs[0].nodes"
        ),
        "unknown-domain": lambda: _spec_case(
            with_job(stack(), 0, topology=JobTopology(domain="rack")), "jobs[0].topology.domain"
        ),
        "scheduler-policy": _policy_requires_leaf,
    },
    "queue-quota": {
        "over-quota": _doc_case(_add_research_job(3), "scheduler.queues[1].gpuQuota"),
    },
    "capacity-fits": {
        "dataset-above-cache": _doc_case(
            lambda d: d["cache"]["datasets"][0].update(size="3Ti"), "cache.datasets[0].size"),
        "quota-above-cluster": _doc_case(
            lambda d: d["scheduler"]["queues"][1].update(gpuQuota=65),
            "scheduler.queues[1].gpuQuota"),
        "cohort-above-cluster": _doc_case(_cohort_of(40, 40), "scheduler.queues"),
        "job-datasets-above-cache": _doc_case(_two_datasets("1500Gi"), "jobs[0].datasets"),
        # The dev stack: 8 nodes of 96 cores and 1024Gi.
        "cpu-quota-above-cluster": _doc_case(
            lambda d: d["scheduler"]["queues"][1].update(
                resources=[{"name": "cpu", "nominalQuota": 769}]),
            "scheduler.queues[1].resources[0].nominalQuota"),
        "memory-quota-above-cluster": _doc_case(
            lambda d: d["scheduler"]["queues"][1].update(
                resources=[{"name": "memory", "nominalQuota": "9Ti"}]),
            "scheduler.queues[1].resources[0].nominalQuota"),
    },
    "training-pod-gang": {
        "default-scheduler": _objects_case(_set_scheduler("default-scheduler")),
        "other-scheduler": _objects_case(_set_scheduler("volcano")),
        "no-scheduler-no-spec": _objects_case(_set_scheduler(""), with_spec=False),
        "no-pod-group-label": _objects_case(_drop_group_label),
        "pod-group-missing": _objects_case(_drop_pod_group),
        "partial-gang": _objects_case(_partial_gang),
        "gpu-pod-outside-gang": _objects_case(_gpu_deployment),
    },
    "image-pinned": {
        "latest-tag": _doc_case(
            lambda d: d["jobs"][0].update(image="nvcr.io/nvidia/pytorch:latest"), "jobs[0].image"
        ),
        "untagged": _doc_case(lambda d: d["jobs"][1].update(image="pytorch"), "jobs[1].image"),
        "exporter-untagged": _objects_case(
            _image_on("DaemonSet", "dev-gpu-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter")
        ),
        "init-container": _objects_case(
            _image_on("Deployment", "dev-operator", "busybox", init=True)
        ),
        "registry-port-untagged": _objects_case(
            _image_on("Deployment", "dev-operator", "registry.local:5000/trainmaster")
        ),
        "trainingjob-without-spec": _objects_case(_training_job_only, with_spec=False),
    },
    "gpu-requests-equal-limits": {
        "request-below-limit": _objects_case(_gpus("4", "8")),
        "limit-only": _objects_case(_gpus(None, "8")),
        "fractional": _objects_case(_gpus("0.5", "0.5")),
    },
    "privileged-system-daemonsets": {
        "trainer": _objects_case(_privileged("Job", "gpt-small-r0")),
        "operator": _objects_case(_privileged("Deployment", "dev-operator")),
        "other-daemonset": _objects_case(_relabel_exporter),
    },
    "gpu-work-guarded": {
        "no-policy": _objects_case(_unguard("ValidatingAdmissionPolicy")),
        "no-binding": _objects_case(_unguard("ValidatingAdmissionPolicyBinding")),
        "fails-open": _objects_case(_unguard("open")),
    },
    "rbac-no-wildcards": {
        "verb": _objects_case(rbac.wildcard("verbs")),
        "resource": _objects_case(rbac.wildcard("resources")),
        "api-group": _objects_case(rbac.wildcard("apiGroups")),
    },
    "rbac-no-default-serviceaccount": {
        "trainer-role-to-default": _objects_case(rbac.trainer_role_to_default),
        "group-of-all-accounts": _objects_case(rbac.scheduler_to_all_accounts),
    },
    "rbac-namespaced-rights-in-roles": {
        "operator-jobs-cluster-wide": _objects_case(rbac.operator_jobs_cluster_wide),
        "scheduler-binds-everywhere": _objects_case(rbac.scheduler_binds_everywhere),
        "scheduler-writes-pods-everywhere": _objects_case(rbac.scheduler_writes_pods_everywhere),
        "unrendered-cluster-role": _objects_case(rbac.binds_cluster_admin),
    },
    "rbac-no-dangerous-rights": {
        "secrets": _objects_case(rbac.trainer_reads("secrets")),
        "exec": _objects_case(rbac.trainer_reads("pods/exec")),
        "bind": _objects_case(rbac.operator_may("bind")),
        "escalate": _objects_case(rbac.operator_may("escalate")),
        "impersonate": _objects_case(rbac.operator_may("impersonate")),
    },
    "roce-lossless": {
        "missing": lambda: _spec_case(
            _networks(stack("prod-example"), lossless=None), "networks.compute.lossless"
        ),
    },
    "networks-disjoint": {
        "storage-overlaps-rail": lambda: _spec_case(
            _networks(stack(), subnet="10.100.0.0/16"), "networks.storage.subnet"
        ),
        "rails-overlap": _overlapping_rails,
        "not-a-subnet": lambda: _spec_case(
            _networks(stack(), subnet="10.200.0.1/20"), "networks.storage.subnet"
        ),
    },
}


def _four_gpu_nodes(doc: dict[str, Any]) -> None:
    doc["topology"]["node"]["gpus"] = 4
    for job in doc["jobs"]:
        if job["nodes"] > 1:  # multi-node jobs take the whole (now 4-GPU) nodes
            job["gpusPerPod"] = 4


PASSES: dict[str, dict[str, Case]] = {
    # The third element (where) is unused: these must yield no finding at all.
    "job-max-restarts": {
        "at-ceiling": _restarts(100),
        "zero": _restarts(0),
    },
    "multi-node-whole-nodes": {
        "four-gpu-nodes": _doc_case(_four_gpu_nodes, ""),
    },
    "topology-domain-fits": {
        "preferred-may-spread": lambda: _spec_case(
            with_job(stack(), 0, nodes=6, topology=JobTopology(domain="leaf", mode="preferred")),
            "",
        ),
    },
    "queue-quota": {
        "exactly-full": _doc_case(_add_research_job(2), ""),
    },
    "capacity-fits": {
        "cluster-sized": _doc_case(_cohort_of(32, 32), ""),
        "datasets-fill-the-cache": _doc_case(_two_datasets("1Ti"), ""),
        "cpu-and-memory-of-every-node": _doc_case(
            lambda d: d["scheduler"]["queues"][1].update(resources=[
                {"name": "cpu", "nominalQuota": 768}, {"name": "memory", "nominalQuota": "8Ti"}]),
            ""),
    },
    "training-pod-gang": {"objects-only": _objects_case(lambda o: "", with_spec=False)},
    "image-pinned": {
        "digest": _objects_case(
            _image_on("Job", "gpt-small-r0", "registry.local:5000/t/p@sha256:" + "a" * 64)
        ),
        "registry-port-tag": _objects_case(
            _image_on("Deployment", "dev-operator", "registry.local:5000/tm:1.0")
        ),
    },
    "gpu-requests-equal-limits": {
        # Through protobuf (CrossGuard) every number arrives as a float.
        "protobuf-floats": _objects_case(_gpus(8.0, "8")),
    },
    "roce-lossless": {"infiniband-needs-none": lambda: _spec_case(stack("dev"), "")},
}


def _cases(table: dict[str, dict[str, Case]]) -> list[Any]:
    return [
        pytest.param(r, case, id=f"{r}:{name}")
        for r, cases in table.items()
        for name, case in cases.items()
    ]


def test_every_rule_has_violation_cases() -> None:
    assert set(VIOLATIONS) == {r.id for r in RULES}


@pytest.mark.parametrize("stack_name", ["dev", "bench", "prod-example"])
@pytest.mark.parametrize("rule_id", [r.id for r in RULES])
def test_example_stacks_pass(rule_id: str, stack_name: str) -> None:
    spec = stack(stack_name)
    assert get_rule(rule_id)(spec, rendered_objects(spec)) == []


@pytest.mark.parametrize(("rule_id", "case"), _cases(VIOLATIONS))
def test_violation_is_reported_at_its_path(rule_id: str, case: Case) -> None:
    spec, objects, where = case()
    rule = get_rule(rule_id)
    findings = rule(spec, objects)
    assert where in [f.where for f in findings], [f.render() for f in findings]
    for finding in findings:
        assert finding.rule == rule_id and finding.severity == rule.severity
        # The message says what is wrong, then (after ":" or ";") what to do.
        assert ":" in finding.message or ";" in finding.message


@pytest.mark.parametrize(("rule_id", "case"), _cases(PASSES))
def test_allowed_variant_passes(rule_id: str, case: Case) -> None:
    spec, objects, _ = case()
    assert get_rule(rule_id)(spec, objects) == []


def test_rules_are_not_vacuous_on_the_example_objects() -> None:
    """The clean-stack passes mean something: the objects hold what the rules look at."""
    objects = rendered_objects(stack())
    privileged = [
        o["metadata"]["name"]
        for o in objects
        for c in o.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
        if c.get("securityContext", {}).get("privileged")
    ]
    assert sorted(privileged) == ["dev-gpu-exporter", "dev-rdma-device-plugin"]
    gangs = [o for o in objects if o["kind"] == "Job" and o["metadata"]["name"].endswith("-r0")]
    assert len(gangs) == len(stack().jobs) == 3


def test_job_rules_name_the_job() -> None:
    doc = dev_doc()
    doc["jobs"][1].pop("checkpoint")
    [finding] = get_rule("job-checkpoint")(spec_from(doc), [])
    assert finding.job == "bert-finetune"
    assert "checkpoint: {volume: <pvc>, path: /checkpoints/bert-finetune}" in finding.message


def test_quota_advisory_says_when_jobs_wait_for_each_other() -> None:
    doc = dev_doc()
    doc["scheduler"]["queues"][1]["gpuQuota"] = 16
    doc["jobs"][1]["queue"] = "research"  # 16 + 4 GPUs asked of a quota of 16
    [finding] = get_rule("queue-quota")(spec_from(doc), [])
    assert finding.severity == "advisory"
    assert "they will wait for each other" in finding.message


def test_a_job_its_queue_can_never_hold_is_refused_before_any_policy() -> None:
    # Not an advisory any more: validation refuses it, in the simulator's words.
    doc = dev_doc()
    doc["scheduler"]["queues"][1]["gpuQuota"] = 8
    with pytest.raises(SpecInvalidError, match="the job needs 16 GPUs, queue 'research' "
                       "can never hold more than 8"):
        spec_from(doc)


def test_one_bad_image_is_reported_once() -> None:
    """jobs[0].image reaches the TrainingJob and the gang: one finding, at the spec field."""
    doc = dev_doc()
    doc["jobs"][0]["image"] = "pytorch"
    findings = [f for f in evaluate(spec_from(doc)) if f.rule == "image-pinned"]
    assert [f.where for f in findings] == ["jobs[0].image"]


def _refused(change: Callable[[dict[str, Any]], None], stack_name: str = "dev") -> str:
    from tests.helpers import stack_doc

    doc = stack_doc(stack_name)
    change(doc)
    with pytest.raises(SpecInvalidError) as exc:
        spec_from(doc)
    return str(exc.value)


@pytest.mark.parametrize(
    ("rule_id", "change", "stack_name", "needle"),
    [
        ("topology-domain-fits", lambda d: d["jobs"][0].update(nodes=6), "dev", "jobs[0].nodes"),
        (
            "roce-lossless",
            lambda d: d["networks"]["compute"].pop("lossless"),
            "prod-example",
            "networks.compute.lossless",
        ),
        (
            "networks-disjoint",
            lambda d: d["networks"]["storage"].update(subnet="10.100.0.0/16"),
            "dev",
            "networks.storage.subnet",
        ),
    ],
    ids=["topology-domain-fits", "roce-lossless", "networks-disjoint"],
)
def test_defense_in_depth_rules_are_also_refused_by_validation(
    rule_id: str, change: Callable[[dict[str, Any]], None], stack_name: str, needle: str
) -> None:
    assert get_rule(rule_id).defense_in_depth == "spec validation"
    assert needle in _refused(change, stack_name)


def test_defense_in_depth_is_declared_for_exactly_these_rules() -> None:
    assert {r.id: r.defense_in_depth for r in RULES if r.defense_in_depth} == {
        "topology-domain-fits": "spec validation",
        "roce-lossless": "spec validation",
        "networks-disjoint": "spec validation",
        "training-pod-gang": "the object builders",
        "gpu-requests-equal-limits": "the object builders",
        "gpu-work-guarded": "the object builders",
        "rbac-no-wildcards": "the object builders",
        "rbac-no-default-serviceaccount": "the object builders",
        "rbac-namespaced-rights-in-roles": "the object builders",
        "rbac-no-dangerous-rights": "the object builders",
    }


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        ("nvcr.io/nvidia/pytorch:24.05-py3", True),
        ("pytorch:2.3", True),
        ("registry.local:5000/team/pytorch:1.0", True),
        ("ghcr.io/x/y@sha256:" + "0" * 64, True),
        ("ghcr.io/x/y:latest@sha256:" + "0" * 64, True),
        ("pytorch", False),
        ("pytorch:latest", False),
        ("registry.local:5000/team/pytorch", False),
        ("ghcr.io/x/y@sha256:abc", False),
        ("", False),
        (None, False),
    ],
)
def test_image_problem(image: object, pinned: bool) -> None:
    assert (image_problem(image) is None) is pinned


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "spec",
                    "template",
                    "metadata",
                    "containers",
                    "labels",
                    "resources",
                    "image",
                    "securityContext",
                    "privileged",
                    "limits",
                    "requests",
                    "nvidia.com/gpu",
                    "schedulerName",
                    "name",
                    "namespace",
                    "minMember",
                    "parallelism",
                ]
            ),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)
_kinds = st.sampled_from(
    ["Pod", "Job", "Deployment", "DaemonSet", "CronJob", "PodGroup", "TrainingJob"]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.builds(
            lambda k, body: {**(body if isinstance(body, dict) else {}), "kind": k}, _kinds, _json
        ),
        max_size=4,
    )
)
def test_rules_never_raise_on_malformed_objects(objects: Objects) -> None:
    """A resource Pulumi hands the pack may be anything; a rule reports or stays silent."""
    for rule in RULES:
        findings = rule(None, objects)
        assert all(isinstance(f, Finding) for f in findings)
