"""The local cluster's context in the user's own kubeconfig, as kind does: `cluster up` adds
`trainmaster-<name>` (cluster, user and context) and makes it the current context, so
kubectl and every trainmaster command target it by the one kubeconfig rule; `cluster
down` removes it again.

The user's kubeconfig is kubectl's: the first file of $KUBECONFIG, else ~/.kube/config.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from trainmaster.cluster._processes import ClusterError
from trainmaster.cluster._state import ClusterRecord, state_dir_from_kubeconfig


def user_kubeconfig() -> Path:
    """The file kubectl reads (and `kind create cluster` writes)."""
    first = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    return Path(first) if first else Path.home() / ".kube" / "config"


def context_name(cluster: str) -> str:
    return f"trainmaster-{cluster}"


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [],
                "contexts": []}
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ClusterError(f"{path} is not valid YAML ({err}); fix it, or start with "
                           "--no-user-context and use the cluster's own kubeconfig") from err
    if not isinstance(doc, dict):
        raise ClusterError(f"{path} is not a kubeconfig (not a YAML mapping); fix it, or "
                           "start with --no-user-context")
    return doc


def _write(path: Path, doc: dict[str, Any]) -> None:
    """Replace the file at once (a reader never sees half of it), mode 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".kubeconfig-")
    with os.fdopen(fd, "w") as out:
        yaml.safe_dump(doc, out, sort_keys=False)
    os.replace(tmp, path)


def _without(doc: dict[str, Any], name: str) -> None:
    for section in ("clusters", "users", "contexts"):
        doc[section] = [e for e in doc.get(section) or []
                        if not (isinstance(e, dict) and e.get("name") == name)]


def add_context(record: ClusterRecord, target: Path | None = None) -> tuple[Path, str]:
    """Merge the cluster's admin credentials into the user's kubeconfig as context
    `trainmaster-<name>` and make it current. Returns (file, context)."""
    target = target or user_kubeconfig()
    own = _read(Path(record.kubeconfig))
    name = context_name(record.name)
    ctx = next(c for c in own["contexts"] if c["name"] == own["current-context"])["context"]
    cluster = next(c for c in own["clusters"] if c["name"] == ctx["cluster"])["cluster"]
    user = next(u for u in own["users"] if u["name"] == ctx["user"])["user"]
    doc = _read(target)
    _without(doc, name)
    doc.setdefault("clusters", []).append({"name": name, "cluster": cluster})
    doc.setdefault("users", []).append({"name": name, "user": user})
    doc.setdefault("contexts", []).append(
        {"name": name, "context": {"cluster": name, "user": name}})
    doc["current-context"] = name
    _write(target, doc)
    return target, name


def remove_context(state_dir: Path, name: str, target: Path | None = None) -> Path | None:
    """Remove `trainmaster-<name>` from the user's kubeconfig if it is this cluster's (its
    state extension names `state_dir`); unset current-context if it was. Returns the file
    changed, else None."""
    target = target or user_kubeconfig()
    if not target.exists() or state_dir_from_kubeconfig(target) is None:
        return None
    try:
        doc = _read(target)
    except ClusterError:
        return None
    context = context_name(name)
    ours = [c for c in doc.get("clusters") or [] if isinstance(c, dict)
            and c.get("name") == context and _state_path(c) == state_dir.resolve()]
    if not ours:
        return None
    _without(doc, context)
    if doc.get("current-context") == context:
        doc["current-context"] = ""
    _write(target, doc)
    return target


def _state_path(entry: dict[str, Any]) -> Path | None:
    for ext in (entry.get("cluster") or {}).get("extensions") or []:
        if isinstance(ext, dict) and isinstance(ext.get("extension"), dict):
            path = ext["extension"].get("path")
            if path:
                return Path(path).resolve()
    return None
