"""One small local cluster (stacks/dev/cluster.yaml, 8 nodes) per test module, with its own
TRAINMASTER_HOME, Pulumi home and file state backend, and a copy of the project.

Not the session's 500-node cluster: destroy and refresh here must not disturb other tests.
kube-scheduler runs so that the Deployments and DaemonSets the engine waits for get Ready
pods (kwok runs them on the simulated nodes).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.engine.kit import Cluster, Engine, copy_project
from trainmaster.engine import DEFAULT_PASSPHRASE
from trainmaster.spec import ClusterSpec, load_spec


@dataclass(frozen=True)
class Project:
    engine: Engine
    cluster: Cluster
    kubeconfig: Path
    spec: ClusterSpec


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    # What `trainmaster pulumi` defaults must not come from the developer's shell.
    for name in ("KUBECONFIG", "PULUMI_HOME", "PULUMI_CONFIG_PASSPHRASE_FILE"):
        env.pop(name, None)
    (tmp / "state").mkdir()
    env.update(
        TRAINMASTER_HOME=str(tmp / "home"),
        PULUMI_BACKEND_URL=(tmp / "state").as_uri(),
        # The passphrase of the salts committed in stacks/Pulumi.*.yaml.
        PULUMI_CONFIG_PASSPHRASE=DEFAULT_PASSPHRASE,
    )
    return env


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    from trainmaster import cluster

    tmp = tmp_path_factory.mktemp("engine")
    env = _env(tmp)
    project_dir = copy_project(tmp / "project")
    spec_path = project_dir / "stacks" / "dev" / "cluster.yaml"
    # cluster.up finds its state folder through TRAINMASTER_HOME: this module's own.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRAINMASTER_HOME", env["TRAINMASTER_HOME"])
        result = cluster.up(spec_path, kube_scheduler=True)
    state_dir = Path(result.record.state_dir)
    kubeconfig = Path(result.record.kubeconfig)
    # kubectl's rule: a local cluster is never found behind the user's back, so the
    # engine is told which one, as a user exports it.
    engine = Engine(project_dir, {**env, "KUBECONFIG": str(kubeconfig)})
    try:
        yield Project(
            engine,
            Cluster(kubeconfig, tmp / "discovery.json"),
            kubeconfig,
            load_spec(spec_path),
        )
    finally:
        try:
            _remove_stacks(engine)
        finally:
            cluster.down_state_dir(state_dir)


def _remove_stacks(engine: Engine) -> None:
    """Every stack this module made, resources forgotten (the cluster goes away next)."""
    import json

    proc = engine.run("stack", "ls", "--json")
    if proc.returncode != 0:
        return
    for stack in json.loads(proc.stdout or "[]"):
        engine.run("stack", "rm", "--yes", "--force", "--stack", stack["name"])
