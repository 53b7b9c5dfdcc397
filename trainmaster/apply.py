"""Server-side apply of rendered objects, in order: for `trainmaster apply` and the demo.

Pulumi is the way a platform team applies a spec from git; this is the short path for a
local cluster (and for GitOps users who want to see what Argo CD would do). Objects come
from trainmaster.objects.build_all, the same ones Pulumi registers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import dynamic
from kubernetes.client.exceptions import ApiException

from trainmaster.errors import TrainmasterError
from trainmaster.kube import sync_client
from trainmaster.objects import FIELD_MANAGER, all_objects, object_key
from trainmaster.spec import ClusterSpec


class ApplyError(TrainmasterError):
    """An object could not be applied."""


def _wait_established(client: dynamic.DynamicClient, names: list[str], timeout: float) -> None:
    crds = client.resources.get(
        api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition"
    )
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending and time.monotonic() < deadline:
        for name in list(pending):
            conditions = crds.get(name=name).status.conditions or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                pending.discard(name)
        time.sleep(0.2)
    if pending:
        raise ApplyError(f"CRDs not established after {timeout:.0f}s: {', '.join(pending)}")


def apply_objects(
    kubeconfig: Path | None,
    objs: list[dict[str, Any]],
    report: Callable[[str], None] = lambda _: None,
) -> list[str]:
    """Apply each object with the trainmaster field manager; return their keys."""
    client = dynamic.DynamicClient(sync_client(kubeconfig))
    applied = []
    crds = [o["metadata"]["name"] for o in objs if o["kind"] == "CustomResourceDefinition"]
    done_crds = False
    for obj in objs:
        if crds and not done_crds and obj["kind"] != "CustomResourceDefinition":
            report("waiting for CRDs to be established")
            _wait_established(client, crds, 60)
            client.resources.invalidate_cache()  # discover the new kinds
            done_crds = True
        meta = obj["metadata"]
        try:
            resource = client.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            resource.server_side_apply(
                body=obj,
                name=meta["name"],
                namespace=meta.get("namespace"),
                field_manager=FIELD_MANAGER,
                force_conflicts=True,
            )
        except ApiException as exc:
            raise ApplyError(
                f"applying {object_key(obj)} failed: {exc.status} {exc.reason}: {exc.body}"
            ) from None
        except dynamic.exceptions.ResourceNotFoundError:
            raise ApplyError(
                f"the API server does not serve {obj['apiVersion']} "
                f"{obj['kind']} (is its CRD installed?)"
            ) from None
        applied.append(object_key(obj))
        report(f"applied {obj['kind']}/{meta['name']}")
    return applied


def apply_spec(
    kubeconfig: Path | None, spec: ClusterSpec, report: Callable[[str], None] = lambda _: None
) -> list[str]:
    return apply_objects(kubeconfig, all_objects(spec), report)
