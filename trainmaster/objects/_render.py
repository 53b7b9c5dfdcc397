"""Every object of a cluster spec, grouped by component, in apply order; and as YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from trainmaster.objects._cache import build_cache
from trainmaster.objects._crds import build_crds
from trainmaster.objects._jobs import build_training_jobs
from trainmaster.objects._monitoring import build_monitoring
from trainmaster.objects._networks import build_networks
from trainmaster.objects._operator import build_operator
from trainmaster.objects._scheduler import build_scheduler
from trainmaster.objects._security import build_default_deny, build_namespaces
from trainmaster.objects._ui import build_ui
from trainmaster.spec import ClusterSpec

COMPONENTS = (
    "crds",
    "namespace",
    "networks",
    "scheduler",
    "operator",
    "cache",
    "monitoring",
    "jobs",
    "ui",
)


def spec_text(spec: ClusterSpec) -> str:
    """The spec as the operator reads it back: validated, defaults filled in."""
    return yaml.safe_dump(
        spec.model_dump(by_alias=True, exclude_none=True, mode="json"), sort_keys=False
    )


def build_all(spec: ClusterSpec) -> dict[str, list[dict[str, Any]]]:
    """component -> objects. The single source every consumer (Pulumi, render, operator)
    takes its objects from."""
    return {
        "crds": build_crds(spec.third_party_crds),
        "namespace": build_namespaces(spec),
        "networks": [*build_default_deny(spec), *build_networks(spec)],
        "scheduler": build_scheduler(spec),
        "operator": build_operator(spec, spec_text(spec)),
        "cache": build_cache(spec),
        "monitoring": build_monitoring(spec),
        "jobs": build_training_jobs(spec),
        # Last: optional, and the file numbers of `render` stay what they were without it.
        "ui": build_ui(spec),
    }


def all_objects(spec: ClusterSpec) -> list[dict[str, Any]]:
    """Every object of build_all(spec) in one list, in apply order."""
    return [obj for objs in build_all(spec).values() for obj in objs]


def object_key(obj: dict[str, Any]) -> str:
    """apiVersion/kind/namespace/name: unique per object in a rendering."""
    meta = obj["metadata"]
    return f"{obj['apiVersion']}/{obj['kind']}/{meta.get('namespace', '')}/{meta['name']}"


def to_yaml(objs: list[dict[str, Any]]) -> str:
    return yaml.safe_dump_all(objs, sort_keys=False, width=100)


def render_to_dir(spec: ClusterSpec, directory: Path) -> list[Path]:
    """Write one multi-document YAML per component plus a kustomization.yaml; return the
    files written. Existing files of ours are replaced, nothing else is touched."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    resources = []
    for index, (component, objs) in enumerate(build_all(spec).items()):
        name = f"{index:02d}-{component}.yaml"
        path = directory / name
        if not objs:
            path.unlink(missing_ok=True)
            continue
        path.write_text(to_yaml(objs))
        written.append(path)
        resources.append(name)
    kustomization = directory / "kustomization.yaml"
    kustomization.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": resources,
            },
            sort_keys=False,
        )
    )
    written.append(kustomization)
    return written
