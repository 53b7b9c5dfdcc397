"""The in-cluster UI (`ui.enabled`): nothing by default; when on, a read-only identity
whose rights are exactly what the UI's store watches, a Deployment that runs `trainmaster
ui --in-cluster` with the same scope, a ClusterIP Service and an access policy; and the
policy pack passes it."""

from __future__ import annotations

from typing import Any

import pytest

from policies import evaluate
from tests.helpers import STACKS
from tests.security.documented import with_optional_identities
from trainmaster.errors import UsageError
from trainmaster.objects import build_all, build_ui, grants, ui_command, ui_name
from trainmaster.spec import ClusterSpec, SpecInvalidError, load_spec, load_spec_text

READS = ("get", "list", "watch")


def _dev(**ui: Any) -> ClusterSpec:
    spec = load_spec(STACKS / "dev" / "cluster.yaml")
    return spec.model_copy(update={"ui": spec.ui.model_copy(update={"enabled": True, **ui})})


def _kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


@pytest.mark.parametrize("stack", ["dev", "bench", "prod-example"])
def test_off_by_default(stack: str) -> None:
    spec = load_spec(STACKS / stack / "cluster.yaml")
    assert spec.ui.enabled is False
    assert build_all(spec)["ui"] == []


def test_the_spec_field_is_validated() -> None:
    text = (STACKS / "dev" / "cluster.yaml").read_text()
    on = load_spec_text(text + "ui: {enabled: true, replicas: 2, accessNamespaces: [ingress]}\n")
    assert (on.ui.enabled, on.ui.replicas, on.ui.access_namespaces) == (True, 2, ["ingress"])
    for bad in ("ui: {enabled: true, replicas: 0}", "ui: {replicas: 6}",
                "ui: {accessNamespaces: [Not_A_Name]}", "ui: {enabeld: true}"):
        with pytest.raises(SpecInvalidError) as exc:
            load_spec_text(text + bad + "\n")
        assert "ui" in str(exc.value)


def test_its_identity_only_reads_and_never_secrets() -> None:
    spec = _dev()
    account = f"trainmaster-system/{ui_name(spec)}"
    held = [g for g in grants(build_ui(spec)) if g.account == account]
    assert held and all(set(g.verbs) == set(READS) for g in held)
    assert {(g.scope, g.api_group, g.resource) for g in held} == {
        ("cluster", "", "nodes"), ("cluster", "", "pods"),
        ("cluster", "scheduling.x-k8s.io", "podgroups"),
        ("trainmaster", "trainmaster.io", "trainingjobs"),
        ("trainmaster", "", "events"), ("default", "", "events"),
        ("trainmaster-system", "", "configmaps"),
    }
    assert not any("secret" in g.resource for g in grants(build_ui(spec)))


def _teams(**ui: Any) -> ClusterSpec:
    """The dev stack with two team namespaces and a LocalQueue in one (the UI on)."""
    spec = _dev(**ui)
    scheduler = spec.scheduler.model_validate({
        **spec.scheduler.model_dump(by_alias=True), "namespaces": ["team-a", "team-b"],
        "localQueues": [{"name": "lq-a", "namespace": "team-a", "clusterQueue": "default"}]})
    return spec.model_copy(update={"scheduler": scheduler})


def test_it_reads_local_queues_where_the_scheduler_does_and_only_there() -> None:
    """LocalQueues resolve a team namespace's queue labels: the UI reads them in each team
    namespace (the scheduler's `localQueueNamespaces`), by Role, never cluster-wide; and
    its Deployment watches them there and nowhere else."""
    spec = _teams()
    account = f"trainmaster-system/{ui_name(spec)}"
    held = [g for g in grants(build_ui(spec)) if g.account == account]
    local = {(g.scope, tuple(g.verbs)) for g in held if g.resource == "localqueues"}
    assert local == {("team-a", READS), ("team-b", READS)}
    scheduler = [g for g in grants(build_all(spec)["scheduler"])
                 if g.resource == "localqueues" and g.account.endswith("-scheduler")]
    assert {g.scope for g in scheduler} == {s for s, _ in local}
    command = ui_command(spec)
    assert [command[i + 1] for i, a in enumerate(command)
            if a == "--localqueue-namespace"] == ["team-a", "team-b"]
    assert "--localqueue-namespace" not in ui_command(_dev())


def test_a_scoped_ui_reads_local_queues_only_where_named() -> None:
    from trainmaster.cli._ui import local_queue_scope

    assert local_queue_scope(["team-a"], "trainmaster-system") == ("team-a",)
    assert local_queue_scope(None, "trainmaster-system") == ()
    assert local_queue_scope(None, None) is None


def test_the_deployment_runs_in_cluster_with_the_scope_its_roles_allow() -> None:
    spec = _dev(replicas=2)
    objects = build_ui(spec)
    (deployment,) = _kind(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["serviceAccountName"] == ui_name(spec)
    assert container["image"] == spec.image.reference
    assert container["command"] == ui_command(spec)
    command = container["command"]
    assert command[:3] == ["trainmaster", "ui", "--in-cluster"] and "--host" not in command

    def values(flag: str) -> list[str]:
        return [command[i + 1] for i, arg in enumerate(command) if arg == flag]

    assert values("--jobs-namespace") == ["trainmaster"]
    assert values("--events-namespace") == ["trainmaster", "default"]
    assert values("--config-namespace") == ["trainmaster-system"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    (service,) = _kind(objects, "Service")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "http"}]
    assert service["spec"]["selector"].items() <= pod_labels(deployment).items()


def pod_labels(deployment: dict[str, Any]) -> dict[str, str]:
    return dict(deployment["spec"]["template"]["metadata"]["labels"])


def test_only_the_access_namespaces_reach_it() -> None:
    (closed,) = _kind(build_ui(_dev()), "NetworkPolicy")
    assert closed["spec"]["ingress"] == [] and closed["spec"]["policyTypes"] == ["Ingress"]
    (opened,) = _kind(build_ui(_dev(access_namespaces=["ingress"])), "NetworkPolicy")
    (rule,) = opened["spec"]["ingress"]
    assert rule["ports"] == [{"port": 8080}]
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": "ingress"}}}]


def test_the_policy_pack_finds_nothing_new_with_it() -> None:
    """Its ClusterRole holds only what rbac-namespaced-rights-in-roles lets one hold
    cluster-wide (nodes; reading pods and PodGroups); the rest is in Roles."""
    spec = load_spec(STACKS / "dev" / "cluster.yaml")
    assert evaluate(with_optional_identities(spec)) == evaluate(spec)


def test_in_cluster_only_in_a_pod() -> None:
    from trainmaster.cli._ui import in_cluster_host

    pod = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}
    assert in_cluster_host("127.0.0.1", None, pod) == "0.0.0.0"
    with pytest.raises(UsageError, match="not in a pod"):
        in_cluster_host("127.0.0.1", None, {})
    with pytest.raises(UsageError, match="drop --host"):
        in_cluster_host("10.0.0.1", None, pod)
    with pytest.raises(UsageError, match="ServiceAccount"):
        in_cluster_host("127.0.0.1", None, {**pod, "KUBECONFIG": "/x"})
