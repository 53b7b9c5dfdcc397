"""Where the warm-up pods and the NIC agent run and what they mount: the spec fields
`cache.nodeSelector`/`tolerations`, `cache.datasets[].volume` and
`monitoring.nicAgent.sysfsPath` (the real-node test, tests/cluster/test_real_node_features.py,
uses all three)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import small_spec_doc
from trainmaster.objects import build_all, build_node_warmup
from trainmaster.spec import SpecInvalidError, validate_data

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _kinds(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    objs = [o for group in build_all(validate_data(doc, "test")).values() for o in group]
    return [o for o in objs if o["kind"] == kind]


def _warmup_pod(doc: dict[str, Any], tolerations: list[dict[str, Any]] | None = None
                ) -> dict[str, Any]:
    """The pod of the warm-up the operator creates for node n-1 (what it tolerates comes
    from the jobs that may use the node: `tolerations`)."""
    spec = validate_data(doc, "test")
    assert spec.cache is not None
    job = build_node_warmup(spec, spec.cache.datasets[0], "n-1",
                            tolerations if tolerations is not None else [GPU_TOLERATION])
    pod: dict[str, Any] = job["spec"]["template"]["spec"]
    return pod


def test_the_stack_renders_no_warmup() -> None:
    """The operator creates the warm-ups, node by node (docs/datasets.md)."""
    assert [j["metadata"]["name"] for j in _kinds(small_spec_doc("c"), "Job")
            if "-warmup-" in j["metadata"]["name"]] == []


def test_a_warmup_is_pinned_to_its_node_and_tolerates_what_the_readers_tolerate() -> None:
    doc = small_spec_doc("c")
    pod = _warmup_pod(doc)
    assert pod["tolerations"] == [GPU_TOLERATION]
    assert "nodeSelector" not in pod
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] \
        == {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n-1"]}]}]}
    doc["cache"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    real = {"key": "trainmaster.io/real-node", "operator": "Exists", "effect": "NoSchedule"}
    pod = _warmup_pod(doc, [GPU_TOLERATION, real])
    assert pod["tolerations"] == [GPU_TOLERATION, real,
                                  {"key": "dedicated", "operator": "Exists"}]


def test_a_dataset_volume_is_mounted_read_only_at_its_file_source() -> None:
    doc = small_spec_doc("c")
    doc["cache"]["datasets"] = [{"name": "tiny", "source": "file:///datasets/tiny",
                                 "size": "1Gi", "volume": "tiny-source"}]
    pod = _warmup_pod(doc)
    assert {"name": "source", "persistentVolumeClaim": {
        "claimName": "tiny-source", "readOnly": True}} in pod["volumes"]
    mounts = pod["containers"][0]["volumeMounts"]
    assert {"name": "source", "mountPath": "/datasets/tiny", "readOnly": True} in mounts


def test_a_dataset_volume_needs_a_file_source() -> None:
    doc = small_spec_doc("c")
    doc["cache"]["datasets"][0]["volume"] = "tiny-source"  # its source is s3://
    with pytest.raises(SpecInvalidError) as err:
        validate_data(doc, "test")
    assert [i.path for i in err.value.issues] == ["cache.datasets[0].volume"]
    assert "file:///path" in str(err.value)


def test_the_nic_agent_mounts_the_sysfs_path_of_the_spec() -> None:
    def volumes(doc: dict[str, Any]) -> Any:
        [agent] = [d for d in _kinds(doc, "DaemonSet") if d["metadata"]["name"] == "c-nic-agent"]
        return agent["spec"]["template"]["spec"]["volumes"]

    doc = small_spec_doc("c")
    assert volumes(doc)[0]["hostPath"]["path"] == "/sys"
    doc["monitoring"] = {"nicAgent": {"sysfsPath": "/srv/fake-sys"}}
    assert volumes(doc) == [
        {"name": "sys", "hostPath": {"path": "/srv/fake-sys", "type": "Directory"}}]


def test_an_s3_dataset_gets_its_endpoint_and_its_secret_as_aws_variables() -> None:
    doc = small_spec_doc("c")
    doc["cache"]["datasets"] = [{"name": "tiny", "source": "s3://corpus/tiny", "size": "1Gi",
                                 "endpoint": "http://rgw.storage:7480", "region": "eu-1",
                                 "credentialsSecret": "corpus-s3"}]
    container = _warmup_pod(doc)["containers"][0]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["AWS_ENDPOINT_URL"] == "http://rgw.storage:7480"
    assert env["AWS_REGION"] == "eu-1"
    assert env["AWS_ACCESS_KEY_ID"] == {"secretKeyRef": {"name": "corpus-s3",
                                                         "key": "AWS_ACCESS_KEY_ID"}}
    assert env["AWS_SECRET_ACCESS_KEY"] == {"secretKeyRef": {"name": "corpus-s3",
                                                             "key": "AWS_SECRET_ACCESS_KEY"}}
    assert env["AWS_SESSION_TOKEN"] == {"secretKeyRef": {
        "name": "corpus-s3", "key": "AWS_SESSION_TOKEN", "optional": True}}
    # A failure's message reaches the operator even from a crash that wrote none.
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_a_dataset_without_s3_settings_gets_no_aws_variables() -> None:
    container = _warmup_pod(small_spec_doc("c"))["containers"][0]
    assert [e["name"] for e in container["env"]] == ["NODE_NAME"]


def _warmup_annotations(doc: dict[str, Any]) -> dict[str, str]:
    spec = validate_data(doc, "test")
    assert spec.cache is not None
    job = build_node_warmup(spec, spec.cache.datasets[0], "n-1", [GPU_TOLERATION])
    annotations: dict[str, str] = job["spec"]["template"]["metadata"].get("annotations", {})
    return annotations


def test_a_warmup_reads_its_source_over_the_storage_network() -> None:
    """The warm-up pod asks Multus for the storage network only (as `storage0`, like the
    training pods): its S3 reads go there, not over the pod network or a rail."""
    doc = small_spec_doc("c")
    assert _warmup_annotations(doc) == {}  # no storage network: the pod network only
    doc["networks"]["storage"] = {"subnet": "10.200.0.0/20", "mtu": 9000, "interface": "eth1"}
    assert _warmup_annotations(doc) == {
        "k8s.v1.cni.cncf.io/networks": "trainmaster/c-storage@storage0"}
