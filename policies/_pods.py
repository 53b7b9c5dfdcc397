"""Rules about the pods the rendered objects run: images, GPUs, privileges, gang scheduling."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from policies._core import KubeObject, Violation, rule
from policies._k8s import (
    PodTemplate,
    all_containers,
    as_int,
    containers,
    get,
    labels,
    mapping,
    pod_templates,
    ref,
)
from trainmaster.api import GPU_RESOURCE, JOB_LABEL, MAX_MEMBERS_ANNOTATION, POD_GROUP_LABEL
from trainmaster.spec import ClusterSpec

_DIGEST = re.compile(r"^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-fA-F]{32,}$")
PRIVILEGED_COMPONENTS = ("networks", "monitoring")
"""app.kubernetes.io/component of the DaemonSets that may run privileged: the RDMA device
plugin manages host devices, the GPU exporter reads DCGM profiling counters."""


def image_problem(image: object) -> str | None:
    """Why an image reference does not pin a version, or None when it does."""
    if not isinstance(image, str) or not image.strip():
        return "has no image: name one with a version tag or digest"
    if "@" in image:
        digest = image.split("@", 1)[1]
        return None if _DIGEST.match(digest) else f"{image!r} has a malformed digest"
    name = image.rsplit("/", 1)[-1]  # a registry host may carry a port: reg:5000/img
    if ":" not in name:
        return f"{image!r} has no tag, which means :latest"
    tag = name.split(":", 1)[1]
    if tag == "latest":
        return f"{image!r} uses :latest"
    return None


@rule(
    "image-pinned",
    "mandatory",
    "object",
    "Every container image names a version tag or digest, never :latest or no tag.",
)
def image_pinned(spec: ClusterSpec | None, objects: Sequence[KubeObject]) -> Iterator[Violation]:
    fix = (
        ": a restarted gang could start a different image than the one it checkpointed with; "
        "pin a version tag (e.g. :24.05-py3) or a digest"
    )
    # A job's image is what its TrainingJob and every gang built from it run: report it
    # once, at the spec field when there is a spec, else at the TrainingJob.
    reported: set[tuple[Any, Any, Any]] = set()
    for i, spec_job in enumerate(spec.jobs if spec else []):
        problem = image_problem(spec_job.image)
        if problem and spec:
            reported.add((spec.metadata.namespace, spec_job.name, spec_job.image))
            yield Violation(f"jobs[{i}].image", problem + fix, job=spec_job.name)
    for obj in objects:
        if obj.get("kind") != "TrainingJob":
            continue
        image = get(obj, "spec", "image")
        job = get(obj, "metadata", "name")
        key = (get(obj, "metadata", "namespace"), job, image)
        problem = image_problem(image)
        if problem and key not in reported:
            reported.add(key)
            yield Violation("spec.image", problem + fix, ref(obj), str(job) if job else None)
    for container in all_containers(objects):
        owner = container.pod.owner
        image = container.spec.get("image")
        job = labels(owner).get(JOB_LABEL)
        if (get(owner, "metadata", "namespace"), job, image) in reported:
            continue
        problem = image_problem(image)
        if problem:
            yield Violation(
                f"{container.path}.image", problem + fix, ref(owner), str(job) if job else None
            )


@rule(
    "gpu-requests-equal-limits",
    "mandatory",
    "object",
    f"A container that asks for {GPU_RESOURCE} requests and limits the same whole number.",
    defense_in_depth="the object builders",
)
def gpu_requests_equal_limits(
    spec: ClusterSpec | None, objects: Sequence[KubeObject]
) -> Iterator[Violation]:
    for container in all_containers(objects):
        resources = mapping(container.spec.get("resources"))
        request = get(resources, "requests", GPU_RESOURCE)
        limit = get(resources, "limits", GPU_RESOURCE)
        if request is None and limit is None:
            continue
        req, lim = as_int(request), as_int(limit)
        if req is None or lim is None or req != lim:
            # GPUs cannot be overcommitted: a request below the limit lets the scheduler
            # place a pod where its limit does not fit, a lone limit hides the request.
            yield Violation(
                f"{container.path}.resources",
                f"requests {GPU_RESOURCE} {request!r} but limits {limit!r}: set both to the "
                "same whole number",
                ref(container.pod.owner),
            )


def _is_training_pod(pod: PodTemplate) -> bool:
    if JOB_LABEL in pod.labels:
        return True
    return any(
        get(c.spec, "resources", kind, GPU_RESOURCE) is not None
        for c in containers(pod)
        for kind in ("requests", "limits")
    )


def _pod_groups(objects: Sequence[KubeObject]) -> dict[tuple[str, str], KubeObject]:
    out: dict[tuple[str, str], KubeObject] = {}
    for obj in objects:
        if obj.get("kind") == "PodGroup":
            meta = mapping(obj.get("metadata"))
            out[(str(meta.get("namespace") or ""), str(meta.get("name")))] = obj
    return out


@rule(
    "training-pod-gang",
    "mandatory",
    "cluster",
    "Training pods use the trainmaster scheduler and belong to a PodGroup of their full size.",
    defense_in_depth="the object builders",
)
def training_pod_gang(
    spec: ClusterSpec | None, objects: Sequence[KubeObject]
) -> Iterator[Violation]:
    expected = spec.scheduler.name if spec else None
    groups = _pod_groups(objects)
    for obj in objects:
        for pod in pod_templates(obj):
            if not _is_training_pod(pod):
                continue
            where = ref(obj)
            job_label = labels(obj).get(JOB_LABEL) or pod.labels.get(JOB_LABEL)
            job = str(job_label) if job_label else None
            scheduler = pod.spec.get("schedulerName")
            if (expected and scheduler != expected) or scheduler in (None, "", "default-scheduler"):
                # The default scheduler places pods one by one: half a gang can sit on GPUs
                # forever waiting for the other half.
                want = f"`{expected}`" if expected else "the trainmaster scheduler"
                yield Violation(
                    f"{pod.path}.schedulerName",
                    f"training pods are scheduled by {scheduler or 'default-scheduler'}: set "
                    f"schedulerName to {want} so the gang is placed all at once",
                    where,
                    job,
                )
            group = pod.labels.get(POD_GROUP_LABEL)
            if not group:
                yield Violation(
                    f"{pod.labels_path}[{POD_GROUP_LABEL}]",
                    f"training pods carry no {POD_GROUP_LABEL} label: without a PodGroup they "
                    "are not gang-scheduled; label them with their PodGroup's name",
                    where,
                    job,
                )
                continue
            namespace = str(get(obj, "metadata", "namespace") or "")
            pod_group = groups.get((namespace, str(group)))
            if pod_group is None:
                yield Violation(
                    f"{pod.labels_path}[{POD_GROUP_LABEL}]",
                    f"PodGroup {namespace}/{group} does not exist: create it with minMember "
                    "equal to the number of pods",
                    where,
                    job,
                )
                continue
            problem = _gang_size_problem(as_int(get(obj, "spec", "parallelism")), pod_group)
            if problem:
                yield Violation(f"{pod.labels_path}[{POD_GROUP_LABEL}]", problem, where, job)


def _gang_size_problem(size: int | None, pod_group: KubeObject) -> str | None:
    """Why the PodGroup does not hold the gang's `size` pods all or nothing, or None.

    A rigid gang needs minMember = size. An elastic one (the PodGroup names its most pods in
    trainmaster.io/max-members) has size = that maximum and starts at minMember, which may
    be lower: a gang of minMember pods is a whole gang (the job's `elastic.minNodes`)."""
    if size is None:
        return None
    name = get(pod_group, "metadata", "name")
    raw_min = get(pod_group, "spec", "minMember")
    min_member = as_int(raw_min)
    raw_max = get(pod_group, "metadata", "annotations", MAX_MEMBERS_ANNOTATION)
    if raw_max is None:
        if min_member == size:
            return None
        return (f"the gang has {size} pods but PodGroup {name} has minMember {raw_min!r}: a "
                f"partial gang could start; set minMember to {size} (or make the job "
                f"elastic: jobs[].elastic.minNodes)")
    max_members = as_int(raw_max)
    if max_members != size:
        return (f"the elastic gang has {size} pods but PodGroup {name} says "
                f"{MAX_MEMBERS_ANNOTATION}: {raw_max!r}: the scheduler would bind the wrong "
                f"number; set it to {size} (the job's elastic.maxNodes)")
    if min_member is None or not 1 <= min_member <= size:
        return (f"the elastic gang has {size} pods but PodGroup {name} has minMember "
                f"{raw_min!r}: set minMember between 1 and {size} (the job's "
                f"elastic.minNodes)")
    return None


@rule(
    "privileged-system-daemonsets",
    "mandatory",
    "object",
    "Only the network (RDMA device plugin) and monitoring (GPU exporter) DaemonSets run "
    "privileged containers.",
)
def privileged_system_daemonsets(
    spec: ClusterSpec | None, objects: Sequence[KubeObject]
) -> Iterator[Violation]:
    for container in all_containers(objects):
        if get(container.spec, "securityContext", "privileged") is not True:
            continue
        owner = container.pod.owner
        owner_labels = labels(owner)
        if (
            owner.get("kind") == "DaemonSet"
            and owner_labels.get("app.kubernetes.io/part-of") == "trainmaster"
            and owner_labels.get("app.kubernetes.io/component") in PRIVILEGED_COMPONENTS
        ):
            continue
        yield Violation(
            f"{container.path}.securityContext.privileged",
            "a privileged container owns the host (every device, every process): only the "
            "network and monitoring DaemonSets may run one; drop `privileged` and add just "
            "the capabilities it needs (e.g. IPC_LOCK for RDMA)",
            ref(owner),
        )
