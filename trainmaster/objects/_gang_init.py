"""The init containers of a gang pod: the launcher's, which brings the launcher bundle to
any training image, and, for a job that mirrors its checkpoints to an S3 server
(jobs[].checkpoint.mirror), one that fetches the newest mirrored checkpoint before the
trainer starts (when the checkpoint volume lacks it) and a sidecar that uploads each one
that completes. Both run the trainmaster image (`trainmaster checkpoints fetch|mirror`,
its boto3 client) in the pod's network namespace, so their traffic to the S3 server goes
over the pod's storage network interface (`storage0`)."""

from __future__ import annotations

from typing import Any

from trainmaster.objects._cache import s3_env
from trainmaster.objects._security import confined_container
from trainmaster.spec import ClusterSpec, Job

LAUNCHER_DIR = "/opt/trainmaster-launch"
"""Where the init container puts the launcher bundle (an emptyDir shared with the trainer)."""


def _launcher_init(spec: ClusterSpec) -> dict[str, Any]:
    """The init container that brings the launcher to any training image: the trainmaster
    image writes its self-contained bundle into the emptyDir the trainer runs it from."""
    return {
        "name": "launcher",
        "image": spec.image.reference,
        "imagePullPolicy": spec.image.pull_policy,
        "command": ["trainmaster", "launch-bundle", LAUNCHER_DIR],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                      "limits": {"cpu": "1", "memory": "256Mi"}},
        "securityContext": {**confined_container(), "readOnlyRootFilesystem": True},
        "volumeMounts": [{"name": "launcher", "mountPath": LAUNCHER_DIR}],
    }


def _container(spec: ClusterSpec, job: Job, name: str, args: list[str]) -> dict[str, Any]:
    checkpoint = job.checkpoint
    assert checkpoint is not None and checkpoint.mirror is not None
    mirror = checkpoint.mirror
    return {
        "name": name,
        "image": spec.image.reference,
        "imagePullPolicy": spec.image.pull_policy,
        "command": ["trainmaster", "checkpoints", *args, "--dir", checkpoint.path,
                    "--url", mirror.url],
        "env": s3_env(mirror.endpoint, mirror.region, mirror.credentials_secret),
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"},
                      "limits": {"cpu": "1", "memory": "512Mi"}},
        "securityContext": {**confined_container(), "readOnlyRootFilesystem": True},
        "volumeMounts": [{"name": "checkpoints", "mountPath": checkpoint.path}],
    }


def mirror_containers(spec: ClusterSpec, job: Job) -> list[dict[str, Any]]:
    """Init containers, in order: the fetch, then the mirror as a sidecar (an init container
    that keeps running: Kubernetes stops it after the trainer, with SIGTERM, on which it
    uploads a checkpoint written at the very end)."""
    if job.checkpoint is None or job.checkpoint.mirror is None:
        return []
    return [
        _container(spec, job, "checkpoint-fetch", ["fetch"]),
        {**_container(spec, job, "checkpoint-mirror",
                      ["mirror", "--keep", str(job.checkpoint.keep)]),
         "restartPolicy": "Always"},
    ]


def gang_init_containers(spec: ClusterSpec, job: Job) -> list[dict[str, Any]]:
    """In the order they start."""
    return [_launcher_init(spec), *mirror_containers(spec, job)]
