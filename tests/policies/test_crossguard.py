"""The CrossGuard pack, driven the way the Pulumi engine drives it, without the engine.

TrainingCluster is registered under Pulumi's mocks to get the resources Pulumi would see
(type token and inputs). Each is then sent, as the engine does, through a protobuf Struct to
pulumi-policy's analyzer servicer (`Analyze` per resource, `AnalyzeStack` for the stack).
The Python SDK has no public test harness; its servicer is what `PolicyPack()` serves over
gRPC, so this exercises the pack's own code paths end to end except the gRPC transport.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from google.protobuf import json_format, struct_pb2
from pulumi.runtime import proto
from pulumi_policy import EnforcementLevel
from pulumi_policy.policy import _PolicyAnalyzerServicer

from policies import RULES
from policies._crossguard import PACK_NAME, build_policies, kube_object
from tests.helpers import ROOT, stack_doc
from tests.policies.builders import spec_from, stack
from trainmaster.spec import ClusterSpec


@dataclass
class Recorder(pulumi.runtime.Mocks):
    resources: list[pulumi.runtime.MockResourceArgs] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(args)
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        return {}, []


@dataclass(frozen=True)
class Resource:
    type: str
    name: str
    urn: str
    inputs: dict[str, Any]


def registered(spec: ClusterSpec) -> list[Resource]:
    """The custom resources TrainingCluster registers for a spec, with their inputs."""
    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, preview=True)
    from components import TrainingCluster, TrainingClusterArgs

    @pulumi.runtime.test  # type: ignore[untyped-decorator]
    def build() -> pulumi.Output[Any]:
        cluster = TrainingCluster(spec.metadata.name, TrainingClusterArgs(spec=spec))
        return cluster.namespace

    build()
    return [
        Resource(r.typ, r.name, f"urn:pulumi:test::trainmaster::{r.typ}::{r.name}", r.inputs)
        for r in recorder.resources
    ]


def _struct(props: dict[str, Any]) -> struct_pb2.Struct:
    # The engine sends properties as a Struct: every number becomes a float on the way.
    out = struct_pb2.Struct()
    json_format.ParseDict(props, out)
    return out


@dataclass(frozen=True)
class Violation:
    policy: str
    mandatory: bool
    urn: str
    message: str


def _violations(response: Any) -> list[Violation]:
    return [
        Violation(d.policyName, d.enforcementLevel == proto.MANDATORY, d.urn, d.message)
        for d in response.diagnostics
    ]


def servicer() -> Any:
    """What PolicyPack() serves over gRPC (the SDK leaves its handlers untyped)."""
    return _PolicyAnalyzerServicer(PACK_NAME, "0.1.0", build_policies(), EnforcementLevel.MANDATORY)


def analyze(resources: list[Resource]) -> list[Violation]:
    """Every violation the pack reports for a stack: per resource, then for the stack."""
    pack = servicer()
    found: list[Violation] = []
    for r in resources:
        request = proto.AnalyzeRequest(
            type=r.type, properties=_struct(r.inputs), urn=r.urn, name=r.name
        )
        # A resource policy reports on the resource it was given.
        found += [
            Violation(v.policy, v.mandatory, v.urn or r.urn, v.message)
            for v in _violations(pack.Analyze(request, None))
        ]
    stack_request = proto.AnalyzeStackRequest(
        resources=[
            proto.AnalyzerResource(
                type=r.type, properties=_struct(r.inputs), urn=r.urn, name=r.name
            )
            for r in resources
        ]
    )
    return found + _violations(pack.AnalyzeStack(stack_request, None))


@pytest.fixture(scope="module")
def dev_resources() -> list[Resource]:
    return registered(stack("dev"))


def _urn(resources: list[Resource], kind: str, name: str) -> str:
    (match,) = [
        r.urn
        for r in resources
        if r.type.endswith(f":{kind}") and r.inputs["metadata"]["name"] == name
    ]
    return match


def test_pack_declares_one_policy_per_rule_with_its_enforcement() -> None:
    info = servicer().GetAnalyzerInfo(None, None)
    levels = {p.name: p.enforcementLevel for p in info.policies}
    assert levels == {
        r.id: proto.MANDATORY if r.severity == "mandatory" else proto.ADVISORY for r in RULES
    }
    kinds = {p.name: p.policy_type for p in info.policies}
    for r in RULES:
        expected = "POLICY_TYPE_RESOURCE" if r.scope == "object" else "POLICY_TYPE_STACK"
        assert kinds[r.id] == proto.PolicyType.Value(expected)


def test_clean_stack_has_no_violations(dev_resources: list[Resource]) -> None:
    assert {r.type for r in dev_resources} >= {
        "kubernetes:trainmaster.io/v1alpha1:TrainingJob",
        "kubernetes:core/v1:ConfigMap",
        "kubernetes:apps/v1:DaemonSet",
    }
    assert analyze(dev_resources) == []


def test_violating_spec_is_stopped_by_mandatory_policies() -> None:
    doc = stack_doc()
    doc["jobs"][0]["image"] = "nvcr.io/nvidia/pytorch:latest"
    doc["jobs"][1].pop("checkpoint")
    doc["scheduler"]["queues"][1]["gpuQuota"] = 16
    doc["jobs"][1]["queue"] = "research"  # 16 + 4 GPUs asked of a quota of 16: they wait
    resources = registered(spec_from(doc))
    found = analyze(resources)
    by_policy = {(v.policy, v.urn): v for v in found}
    gpt = _urn(resources, "TrainingJob", "gpt-small")
    bert = _urn(resources, "TrainingJob", "bert-finetune")
    spec_configmap = _urn(resources, "ConfigMap", "dev-spec")
    # Resource policy on the TrainingJob's own inputs.
    image = by_policy[("image-pinned", gpt)]
    assert image.mandatory and "spec.image: 'nvcr.io/nvidia/pytorch:latest' uses :latest" in (
        image.message
    )
    # The same rule on the gangs the operator will build from the spec ConfigMap.
    assert "jobs[0].image" in by_policy[("image-pinned", spec_configmap)].message
    # Stack policies load the spec from the ConfigMap and report on the job's resource.
    checkpoint = by_policy[("job-checkpoint", bert)]
    assert checkpoint.mandatory and "jobs[1].checkpoint: " in checkpoint.message
    quota = by_policy[("queue-quota", spec_configmap)]
    assert not quota.mandatory and "scheduler.queues[1].gpuQuota" in quota.message
    assert {v.policy for v in found} == {"image-pinned", "job-checkpoint", "queue-quota"}


def test_resource_policy_sees_a_hand_edited_object(dev_resources: list[Resource]) -> None:
    """Object rules judge each resource's inputs, whatever built them."""
    resources = [r for r in dev_resources]
    i = next(i for i, r in enumerate(resources) if r.type == "kubernetes:apps/v1:Deployment")
    inputs = yaml.safe_load(yaml.safe_dump(resources[i].inputs))
    inputs["spec"]["template"]["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    resources[i] = Resource(resources[i].type, resources[i].name, resources[i].urn, inputs)
    [violation] = analyze(resources)
    assert violation.policy == "privileged-system-daemonsets" and violation.mandatory
    assert violation.urn == resources[i].urn
    assert "spec.template.spec.containers[0].securityContext.privileged" in violation.message


def test_kube_object_fills_kind_from_the_type_token() -> None:
    assert kube_object("kubernetes:core/v1:ConfigMap", {"metadata": {"name": "x"}}) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x"},
    }
    assert kube_object("kubernetes:apps/v1:DaemonSet", {})["apiVersion"] == "apps/v1"  # type: ignore[index]
    assert kube_object("pulumi:providers:kubernetes", {"kubeconfig": "x"}) is None


def test_pack_project_file_runs_with_the_project_virtualenv() -> None:
    pack = yaml.safe_load((ROOT / "policies" / "PulumiPolicy.yaml").read_text())
    assert pack["runtime"]["name"] == "python"
    venv = (ROOT / "policies" / pack["runtime"]["options"]["virtualenv"]).resolve()
    assert venv == (ROOT / ".venv").resolve()
    assert Path(ROOT / "policies" / "__main__.py").is_file()
