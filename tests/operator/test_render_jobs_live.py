"""`trainmaster render --jobs` shows what will run: on the real control plane, every object
it prints for a job (ServiceAccount, Role, RoleBinding, NetworkPolicy, Service, launch
ConfigMap, PodGroup, Indexed Job) is found, field for field, in the object the operator
really created for that job's TrainingJob. The API server adds defaults, status and the
TrainingJob's ownerReference; nothing the render shows may differ or be missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import dynamic

from tests.cli.entry import run
from tests.operator.kit import OperatorEnv, job_doc, wait_for
from trainmaster.spec import validate_data

pytestmark = pytest.mark.integration


def _differences(shown: Any, live: Any, where: str = "") -> list[str]:
    """Where `shown` is not contained in `live` (mappings: every key shown, same value;
    lists: same length, item by item)."""
    if isinstance(shown, dict):
        if not isinstance(live, dict):
            return [f"{where}: {live!r} is not a mapping"]
        # The API server leaves empty strings out (Go's omitempty): an env var shown with
        # `value: ''` is stored without `value`, which means the same.
        return [d for key, value in shown.items()
                for d in (_differences(value, live[key], f"{where}.{key}") if key in live
                          else [] if value == "" else [f"{where}.{key}: missing"])]
    if isinstance(shown, list):
        if not isinstance(live, list) or len(live) != len(shown):
            return [f"{where}: {len(shown)} items shown, live {live!r}"]
        return [d for i, (a, b) in enumerate(zip(shown, live, strict=True))
                for d in _differences(a, b, f"{where}[{i}]")]
    return [] if shown == live else [f"{where}: shown {shown!r}, live {live!r}"]


def test_render_jobs_matches_the_objects_the_operator_creates(
        env: OperatorEnv, tmp_path: Path) -> None:
    doc = job_doc("gpt", nodes=2)
    data = env.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    spec_file = tmp_path / "cluster.yaml"
    spec_file.write_text(yaml.safe_dump({**data, "jobs": [doc]}))
    validate_data(yaml.safe_load(spec_file.read_text()), str(spec_file))

    env.create_job(doc)
    env.wait_gang_running("gpt", 0, 2)

    proc = run("render", str(spec_file), "--job", "gpt")
    assert proc.returncode == 0, proc.stderr
    shown = [d for d in yaml.safe_load_all(proc.stdout) if d is not None]
    assert [d["kind"] for d in shown] == [
        "TrainingJob", "ServiceAccount", "Role", "RoleBinding", "NetworkPolicy", "Service",
        "ConfigMap", "PodGroup", "Job"]
    api = dynamic.DynamicClient(env.api)
    problems = []
    for obj in shown[1:]:
        meta = obj["metadata"]
        assert meta["namespace"] == env.namespace
        live = wait_for(lambda obj=obj, meta=meta: api.resources.get(
            api_version=obj["apiVersion"], kind=obj["kind"]).get(
                name=meta["name"], namespace=meta["namespace"]).to_dict(),
            f"{obj['kind']} {meta['name']}")
        problems += [f"{obj['kind']} {meta['name']}{d}" for d in _differences(obj, live)]
        owners = live["metadata"].get("ownerReferences") or []
        assert [o["kind"] for o in owners] == ["TrainingJob"], obj["kind"]
    assert problems == []
    # The TrainingJob shown is the one applied (its spec as the API server stored it).
    tj = env.tj("gpt")
    assert _differences(shown[0]["spec"], tj["spec"]) == []
