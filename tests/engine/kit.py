"""Helpers of the engine tests: a project copy, the `trainmaster pulumi` subprocess, reading
objects back from the cluster."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import dynamic
from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError

from tests.helpers import ROOT
from trainmaster.kubeclient import generated_client
from trainmaster.polling import wait_until

# The engine waits for Deployments, DaemonSets and Jobs (pulumi-kubernetes' await logic); a
# failing run would otherwise sit out the provider's 10-minute timeouts per resource.
RUN_TIMEOUT = 1500.0


def copy_project(dest: Path) -> Path:
    """Pulumi.yaml, __main__.py and stacks/ of the repository, in `dest`.

    The stack files carry the committed `encryptionsalt` of the default local passphrase:
    with it, operations leave them as they are; with another passphrase they fail.
    """
    dest.mkdir(parents=True)
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(ROOT / "stacks", dest / "stacks")
    return dest


@dataclass(frozen=True)
class Engine:
    """`trainmaster pulumi ...` as a user runs it: a new process, in the project folder."""

    project: Path
    env: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "trainmaster", "pulumi", *args],
            cwd=self.project,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        proc = self.run(*args)
        assert proc.returncode == 0, f"trainmaster pulumi {' '.join(args)}:\n{output(proc)}"
        return proc


def output(proc: subprocess.CompletedProcess[str]) -> str:
    return f"--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def key(obj: dict[str, Any]) -> tuple[str, str, str | None, str]:
    meta = obj["metadata"]
    return (obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])


class Cluster:
    """Objects on the cluster by apiVersion, kind, namespace and name (CRDs included)."""

    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        self.api = generated_client(kubeconfig)
        self._cache = cache

    def read(self, obj: dict[str, Any]) -> Any | None:
        """The live object, or None when it (or its kind) does not exist."""
        # A fresh discovery each time: CRDs come and go with the stack.
        dyn = dynamic.DynamicClient(self.api, cache_file=str(self._cache))
        dyn.resources.invalidate_cache()
        api_version, kind, namespace, name = key(obj)
        try:
            resource = dyn.resources.get(api_version=api_version, kind=kind)
            return resource.get(name=name, namespace=namespace)
        except (NotFoundError, ResourceNotFoundError):
            return None

    def delete(self, obj: dict[str, Any]) -> None:
        dyn = dynamic.DynamicClient(self.api, cache_file=str(self._cache))
        api_version, kind, namespace, name = key(obj)
        dyn.resources.get(api_version=api_version, kind=kind).delete(name=name, namespace=namespace)


def wait_for(check: Callable[[], Any], what: str, timeout: float = 120) -> Any:
    return wait_until(check, what, timeout, 0.5)


# The engine modules' clusters run no Prometheus operator: under the default
# `thirdPartyCrds: Skip` a stack leaves its objects out and says so (docs/real-cluster.md).
SKIPPED_API_GROUP = "monitoring.coreos.com/"


def applied(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects `pulumi up` puts on such a cluster: all but the skipped group's."""
    return [o for o in objects if not o["apiVersion"].startswith(SKIPPED_API_GROUP)]
