"""Specs and rendered objects for the policy tests, and ways to break them.

Rules that spec validation also enforces cannot be broken through a spec file, so those
cases copy a valid model with `model_copy(update=...)` (which skips validation) or mutate
the rendered objects, as hand-written objects or a regression in trainmaster.objects would.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

from policies import rendered_objects
from tests.helpers import STACKS, stack_doc
from trainmaster.spec import ClusterSpec, load_spec, load_spec_text


def stack(name: str = "dev") -> ClusterSpec:
    return load_spec(STACKS / name / "cluster.yaml")


def spec_from(doc: dict[str, Any]) -> ClusterSpec:
    """A spec that passed validation, from a document."""
    return load_spec_text(yaml.safe_dump(doc, sort_keys=False), "test.yaml")


def dev_doc() -> dict[str, Any]:
    return stack_doc("dev")


def with_job(spec: ClusterSpec, index: int, **update: Any) -> ClusterSpec:
    """A copy with jobs[index] changed, not validated."""
    jobs = list(spec.jobs)
    jobs[index] = jobs[index].model_copy(update=update)
    return spec.model_copy(update={"jobs": jobs})


def objects_of(spec: ClusterSpec) -> list[dict[str, Any]]:
    """A private, mutable copy of everything the spec renders to (gangs included)."""
    return copy.deepcopy(rendered_objects(spec))


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise KeyError(f"{kind} {name}")


def trainer(objects: list[dict[str, Any]], gang: str = "gpt-small-r0") -> dict[str, Any]:
    """The trainer container of a gang's Indexed Job."""
    container: dict[str, Any] = find(objects, "Job", gang)["spec"]["template"]["spec"][
        "containers"
    ][0]
    return container
