"""jobs[].checkpoint.mirror: what a gang pod gets (the fetch before the trainer, the mirror
as a sidecar, both on the checkpoint volume with the S3 server's endpoint and keys) and the
spec errors for a mirror that cannot work."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.helpers import stack_doc
from trainmaster.objects import build_gang_job
from trainmaster.spec import ClusterSpec, SpecError, load_spec_text

MIRROR = {"url": "s3://checkpoints/dp-example",
          "endpoint": "http://datasets.trainmaster.svc.cluster.local:7070",
          "credentialsSecret": "datasets-s3"}


def _spec(doc: dict[str, Any]) -> ClusterSpec:
    return load_spec_text(yaml.safe_dump(doc), "dev.yaml")


def _with_mirror(**mirror: Any) -> dict[str, Any]:
    doc = stack_doc("dev")
    [job] = [j for j in doc["jobs"] if j["name"] == "dp-example"]
    job["checkpoint"]["mirror"] = mirror
    return doc


def _pod(spec: ClusterSpec, name: str) -> dict[str, Any]:
    [job] = [j for j in spec.jobs if j.name == name]
    pod: dict[str, Any] = build_gang_job(spec, job, 0)["spec"]["template"]["spec"]
    return pod


def test_a_mirrored_job_fetches_before_the_trainer_and_mirrors_beside_it() -> None:
    spec = _spec(_with_mirror(**MIRROR))
    pod = _pod(spec, "dp-example")
    launcher, fetch, mirror = pod["initContainers"]
    assert launcher["name"] == "launcher"
    assert fetch["name"] == "checkpoint-fetch" and "restartPolicy" not in fetch
    assert fetch["command"] == ["trainmaster", "checkpoints", "fetch", "--dir",
                                "/checkpoints/dp-example", "--url", MIRROR["url"]]
    assert mirror["name"] == "checkpoint-mirror" and mirror["restartPolicy"] == "Always"
    assert mirror["command"] == ["trainmaster", "checkpoints", "mirror", "--keep", "3",
                                 "--dir", "/checkpoints/dp-example", "--url", MIRROR["url"]]
    for container in (fetch, mirror):
        assert container["image"] == spec.image.reference
        assert container["volumeMounts"] == [{"name": "checkpoints",
                                              "mountPath": "/checkpoints/dp-example"}]
        env = {e["name"]: e for e in container["env"]}
        assert env["AWS_ENDPOINT_URL"]["value"] == MIRROR["endpoint"]
        assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {
            "name": "datasets-s3", "key": "AWS_SECRET_ACCESS_KEY"}
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    # Their route to the server: the pod's storage network interface.
    [trainer] = pod["containers"]
    assert trainer["name"] == "trainer"
    job = build_gang_job(spec, spec.jobs[2], 0)
    networks = job["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]
    assert networks.endswith("@storage0")


def test_a_job_without_a_mirror_gets_no_such_containers() -> None:
    spec = _spec(stack_doc("dev"))
    assert [c["name"] for c in _pod(spec, "dp-example")["initContainers"]] == ["launcher"]


def test_a_mirror_needs_the_storage_network() -> None:
    doc = _with_mirror(**MIRROR)
    del doc["networks"]["storage"]
    with pytest.raises(SpecError) as err:
        _spec(doc)
    message = str(err.value)
    assert "jobs[2].checkpoint.mirror" in message
    assert "add networks.storage" in message and "Traceback" not in message


@pytest.mark.parametrize(("mirror", "field"), [
    ({"url": MIRROR["url"]}, "endpoint"),  # no S3 server named
    ({**MIRROR, "url": "https://checkpoints/x"}, "url"),
])
def test_a_mirror_names_its_s3_server_and_bucket(mirror: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as err:
        _spec(_with_mirror(**mirror))
    assert f"jobs[2].checkpoint.mirror.{field}" in str(err.value)
