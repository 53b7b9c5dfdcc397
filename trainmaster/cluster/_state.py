"""Where a local cluster keeps its state, and the record of what it started.

    <home>/clusters/<name>/
        cluster.json     this record: ports, pids, kubeconfig path
        kubeconfig       admin kubeconfig (unless --kubeconfig put it elsewhere)
        pki/ etcd/ logs/ kwok/ ...

``<home>`` is $TRAINMASTER_HOME or ~/.trainmaster. The kubeconfig carries the state
folder in a cluster extension, so `cluster down --kubeconfig PATH` finds it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from trainmaster.api import KUBECONFIG_STATE_EXTENSION as STATE_EXTENSION


def home() -> Path:
    return Path(os.environ.get("TRAINMASTER_HOME", Path.home() / ".trainmaster"))


def default_state_dir(name: str) -> Path:
    return home() / "clusters" / name


@dataclass
class ProcessRecord:
    name: str
    pid: int
    log: str
    ports: list[int] = field(default_factory=list)


@dataclass
class ClusterRecord:
    name: str
    state_dir: str
    kubeconfig: str
    spec: str
    apiserver_port: int
    etcd_port: int
    nodes: int
    processes: list[ProcessRecord] = field(default_factory=list)
    real_nodes: list[str] = field(default_factory=list)
    """Spec nodes run by a kubelet on this host (the rest are kwok's)."""
    net_slot: int | None = None
    """The host network slot of the real nodes (see cluster/_host.py)."""

    @property
    def path(self) -> Path:
        return Path(self.state_dir) / "cluster.json"

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(self.path)

    @classmethod
    def load(cls, state_dir: Path) -> ClusterRecord | None:
        path = state_dir / "cluster.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        data["processes"] = [ProcessRecord(**p) for p in data.get("processes", [])]
        return cls(**data)


def state_dir_from_kubeconfig(kubeconfig: Path) -> Path | None:
    """The state folder a trainmaster kubeconfig points at, or None for other clusters."""
    try:
        config = yaml.safe_load(kubeconfig.read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(config, dict):
        return None
    for entry in config.get("clusters") or []:
        for ext in (entry.get("cluster") or {}).get("extensions") or []:
            if ext.get("name") == STATE_EXTENSION:
                return Path(ext["extension"]["path"])
    return None


def known_clusters() -> list[Path]:
    root = home() / "clusters"
    return sorted(p for p in root.glob("*") if (p / "cluster.json").exists())
