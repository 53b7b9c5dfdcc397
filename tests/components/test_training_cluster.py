"""TrainingCluster under Pulumi's mocks: which resources it registers, with what inputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pytest

from tests.helpers import STACKS
from trainmaster.spec import load_spec


@dataclass
class Recorder(pulumi.runtime.Mocks):
    resources: list[pulumi.runtime.MockResourceArgs] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(args)
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        return {}, []


def _register(
    stack: str, kubeconfig: str | None = None, keep_crds: frozenset[str] = frozenset(),
    third_party: str | None = None, skip_objects: frozenset[str] = frozenset(),
) -> Recorder:
    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, preview=False)
    from components import TrainingCluster, TrainingClusterArgs

    spec = load_spec(STACKS / stack / "cluster.yaml")
    if third_party is not None:
        spec = spec.model_copy(update={"third_party_crds": third_party})

    @pulumi.runtime.test
    def build() -> pulumi.Output[Any]:
        cluster = TrainingCluster(
            spec.metadata.name,
            TrainingClusterArgs(spec=spec, kubeconfig=kubeconfig, keep_crds=keep_crds,
                                skip_objects=skip_objects),
        )
        return pulumi.Output.all(cluster.namespace, cluster.job_names)

    build()
    return recorder


@pytest.fixture(scope="module")
def dev() -> Recorder:
    return _register("dev")


def _of(rec: Recorder, token: str) -> list[pulumi.runtime.MockResourceArgs]:
    return [r for r in rec.resources if r.typ == token]


def _named(rec: Recorder, token: str, name: str) -> dict[str, Any]:
    (match,) = [r.inputs for r in _of(rec, token) if r.inputs["metadata"]["name"] == name]
    return match


def test_components_and_parts_are_registered(dev: Recorder) -> None:
    components = sorted(r.typ for r in dev.resources if r.typ.startswith("trainmaster:"))
    assert components == sorted(
        [
            "trainmaster:k8s:TrainingCluster",
            "trainmaster:k8s:CustomResourceDefinitions",
            "trainmaster:k8s:Namespace",
            "trainmaster:k8s:Networks",
            "trainmaster:k8s:Scheduler",
            "trainmaster:k8s:Operator",
            "trainmaster:k8s:UI",
            "trainmaster:k8s:DatasetCache",
            "trainmaster:k8s:Monitoring",
            "trainmaster:k8s:TrainingJobs",
        ]
    )


def _crd_names(rec: Recorder) -> set[str]:
    return {
        r.inputs["metadata"]["name"]
        for r in _of(rec, "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
    }


def test_crds_present_and_no_stand_in_by_default(dev: Recorder) -> None:
    crds = _crd_names(dev)
    assert {"trainingjobs.trainmaster.io", "podgroups.scheduling.x-k8s.io"} <= crds
    # No inert stand-in for the Prometheus operator's CRDs unless the spec asks.
    assert not any(name.endswith(".monitoring.coreos.com") for name in crds)
    # No stand-in for Multus's CRD: the cluster must have Multus (docs/real-cluster.md).
    assert "network-attachment-definitions.k8s.cni.cncf.io" not in crds


def test_stand_ins_only_when_asked_and_never_over_another_managers() -> None:
    assert "prometheusrules.monitoring.coreos.com" in _crd_names(
        _register("dev", third_party="IfAbsent"))
    keep = frozenset({"servicemonitors.monitoring.coreos.com",
                      "prometheusrules.monitoring.coreos.com"})
    crds = _crd_names(_register("dev", keep_crds=keep, third_party="IfAbsent"))
    assert not crds & keep
    assert {"trainingjobs.trainmaster.io", "podmonitors.monitoring.coreos.com"} <= crds


def test_objects_of_an_absent_operator_are_not_registered() -> None:
    from trainmaster.objects import all_objects, object_key

    spec = load_spec(STACKS / "dev" / "cluster.yaml")
    monitors = frozenset(object_key(o) for o in all_objects(spec)
                         if o["apiVersion"].startswith("monitoring.coreos.com/"))
    assert monitors
    rec = _register("dev", skip_objects=monitors)
    assert not [r for r in rec.resources if r.typ.startswith("kubernetes:monitoring.coreos.com")]
    assert _of(rec, "kubernetes:apps/v1:DaemonSet")  # the rest of monitoring is there


def test_one_attachment_per_rail_and_storage(dev: Recorder) -> None:
    nads = _of(dev, "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition")
    assert sorted(r.inputs["metadata"]["name"] for r in nads) == [
        "dev-rail0",
        "dev-rail1",
        "dev-rail2",
        "dev-rail3",
        "dev-storage",
    ]
    rail0 = next(r.inputs for r in nads if r.inputs["metadata"]["name"] == "dev-rail0")
    assert '"type": "ipoib"' in rail0["spec"]["config"]
    assert '"range": "10.100.0.0/20"' in rail0["spec"]["config"]


def test_scheduler_rbac_is_least_privilege(dev: Recorder) -> None:
    cluster = _named(
        dev, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "dev-trainmaster-scheduler"
    )
    # Cluster-wide it reads, records Events (as kube-scheduler's role does), and patches
    # pods/status only to tell a pod outside scheduler.namespaces why it is not bound (a
    # ValidatingAdmissionPolicy holds that to the PodScheduled condition, docs/security.md);
    # every other write is in the served namespaces.
    writes = {(tuple(r["resources"]), tuple(sorted(r["verbs"])))
              for r in cluster["rules"] if set(r["verbs"]) - {"get", "list", "watch"}}
    assert writes == {(("events",), ("create", "patch", "update")),
                      (("pods/status",), ("patch",))}, writes
    role = _named(dev, "kubernetes:rbac.authorization.k8s.io/v1:Role", "dev-trainmaster-scheduler")
    assert role["metadata"]["namespace"] == "trainmaster"
    verbs = {(tuple(r["resources"]), tuple(r["verbs"])) for r in role["rules"]}
    assert (("pods/binding",), ("create",)) in verbs
    assert (("pods",), ("delete",)) in verbs  # gang undo
    assert all("*" not in r["verbs"] for r in role["rules"] + cluster["rules"])
    assert [r["resources"] for r in role["rules"] if "delete" in r["verbs"]] == [["pods"]]
    lease = _named(
        dev, "kubernetes:rbac.authorization.k8s.io/v1:Role", "trainmaster-scheduler-leader-election"
    )
    assert lease["rules"][0]["resources"] == ["leases"]
    assert lease["metadata"]["namespace"] == "trainmaster-system"


def test_priority_class_per_queue(dev: Recorder) -> None:
    classes = {
        r.inputs["metadata"]["name"]: r.inputs["value"]
        for r in _of(dev, "kubernetes:scheduling.k8s.io/v1:PriorityClass")
    }
    assert classes == {"dev-default": 1000, "dev-research": 100}


def test_training_jobs_carry_the_spec(dev: Recorder) -> None:
    jobs = _of(dev, "kubernetes:trainmaster.io/v1alpha1:TrainingJob")
    assert sorted(r.inputs["metadata"]["name"] for r in jobs) == [
        "bert-finetune", "dp-example", "gpt-small"]
    gpt = next(r.inputs for r in jobs if r.inputs["metadata"]["name"] == "gpt-small")
    assert gpt["spec"]["nodes"] == 2 and gpt["metadata"]["namespace"] == "trainmaster"
    assert gpt["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "trainmaster"


def test_every_object_has_app_labels(dev: Recorder) -> None:
    objects = [
        r
        for r in dev.resources
        if r.typ.startswith("kubernetes:") and "CustomResourceDefinition" not in r.typ
    ]
    assert objects
    for r in objects:
        labels = r.inputs["metadata"].get("labels", {})
        assert labels.get("app.kubernetes.io/part-of") == "trainmaster", r.name


def test_children_are_parented_to_their_part() -> None:
    pulumi.runtime.set_mocks(Recorder(), preview=False)
    from components import TrainingCluster, TrainingClusterArgs

    spec = load_spec(STACKS / "dev" / "cluster.yaml")

    @pulumi.runtime.test
    def check() -> pulumi.Output[Any]:
        cluster = TrainingCluster("dev", TrainingClusterArgs(spec=spec))
        child = cluster.parts["networks"].objects[0]

        def assert_chain(urn: str) -> None:
            # urn:pulumi:<stack>::<project>::<parent type>$<own type>::<name>
            chain = urn.split("::")[2].split("$")
            assert chain == [
                "trainmaster:k8s:Networks",
                "kubernetes:networking.k8s.io/v1:NetworkPolicy",
            ]

        return child.urn.apply(assert_chain)

    check()


def test_roce_stack_gets_nccl_env_and_macvlan() -> None:
    rec = _register("prod-example")
    nads = _of(rec, "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition")
    rail = next(r.inputs for r in nads if r.inputs["metadata"]["name"] == "prod-rail3")
    assert (
        '"type": "macvlan"' in rail["spec"]["config"]
        and '"master": "mlx5_3"' in rail["spec"]["config"]
    )
    spec_cm = _named(rec, "kubernetes:core/v1:ConfigMap", "prod-spec")
    assert "gidIndex: 3" in spec_cm["data"]["cluster.yaml"]


def test_explicit_provider_when_kubeconfig_given() -> None:
    rec = _register("dev", kubeconfig="/tmp/kubeconfig")
    providers = [r for r in rec.resources if r.typ == "pulumi:providers:kubernetes"]
    assert len(providers) == 1 and providers[0].inputs["kubeconfig"] == "/tmp/kubeconfig"
