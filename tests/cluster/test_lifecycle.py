"""`cluster up/down/status` as a user runs them, and what bad input leaves behind: nothing."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import small_spec_doc, write_spec
from trainmaster.toolchain import CLUSTER_FAMILIES, family_dir

pytestmark = pytest.mark.integration


def tm(*args: str, env: dict[str, str] | None = None,
       timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainmaster", *args], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def _pids_in(state_dir: Path) -> list[int]:
    record = json.loads((state_dir / "cluster.json").read_text())
    return [p["pid"] for p in record["processes"]]


def _ports_in(state_dir: Path) -> list[int]:
    record = json.loads((state_dir / "cluster.json").read_text())
    return [port for p in record["processes"] for port in p["ports"]]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_up_status_second_up_and_down(tmp_path: Path) -> None:
    home = {"TRAINMASTER_HOME": str(tmp_path / "home")}
    spec = write_spec(tmp_path / "small.yaml", small_spec_doc("lifecycle"))
    kubeconfig = tmp_path / "kc.yaml"
    up = tm("cluster", "up", "--spec", str(spec), "--kubeconfig", str(kubeconfig), env=home)
    assert up.returncode == 0, up.stderr
    assert "8 nodes Ready" in up.stderr and f"export KUBECONFIG={kubeconfig}" in up.stderr
    state_dir = tmp_path / "home" / "clusters" / "lifecycle"
    pids, ports = _pids_in(state_dir), _ports_in(state_dir)
    # The stock kube-scheduler runs by default, as on every real cluster.
    names = [p["name"] for p in json.loads((state_dir / "cluster.json").read_text())["processes"]]
    assert names == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
    assert len(pids) == 5 and all(_alive(p) for p in pids)

    again = tm("cluster", "up", "--spec", str(spec), "--kubeconfig", str(kubeconfig), env=home)
    assert again.returncode == 0 and "already running" in again.stderr
    assert _pids_in(state_dir) == pids

    status = tm("cluster", "status", "--kubeconfig", str(kubeconfig), "--json", env=home)
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["nodes"] == 8 and report["ready"] == 8
    assert [(leaf["leaf"], leaf["gpus"]) for leaf in report["leaves"]] == [
        ("leaf-0", 32), ("leaf-1", 32)]
    assert all(report["processes"].values())

    down = tm("cluster", "down", "--kubeconfig", str(kubeconfig), env=home)
    assert down.returncode == 0, down.stderr
    assert not any(_alive(p) for p in pids)
    assert not any(_listening(p) for p in ports)
    assert not state_dir.exists() and not kubeconfig.exists()


def test_missing_spec_is_a_clear_error(tmp_path: Path) -> None:
    proc = tm("cluster", "up", "--spec", str(tmp_path / "nope.yaml"), "--no-build",
              env={"TRAINMASTER_HOME": str(tmp_path)})
    assert proc.returncode == 2
    assert "cannot read the file" in proc.stderr and "Traceback" not in proc.stderr


def test_invalid_spec_starts_nothing(tmp_path: Path) -> None:
    doc = small_spec_doc("invalid")
    doc["networks"]["compute"]["fabric"] = "roce"
    proc = tm("cluster", "up", "--spec", str(write_spec(tmp_path / "s.yaml", doc)),
              "--no-build", env={"TRAINMASTER_HOME": str(tmp_path)})
    assert proc.returncode == 1
    assert "networks.compute.lossless" in proc.stderr
    assert not (tmp_path / "clusters").exists()


def test_too_many_real_nodes_is_named_and_nothing_runs(tmp_path: Path) -> None:
    proc = tm("cluster", "up", "--spec", str(write_spec(tmp_path / "s.yaml",
                                                          small_spec_doc("many"))),
              "--real-nodes", "9", "--no-build", env={"TRAINMASTER_HOME": str(tmp_path)})
    assert proc.returncode == 1
    assert "--real-nodes 9: choose 0 to 8" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "clusters").exists()


def test_port_in_use_is_named_and_nothing_runs(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = tm("cluster", "up", "--spec", str(write_spec(tmp_path / "s.yaml",
                                                              small_spec_doc("busy"))),
                  "--apiserver-port", str(port), "--no-build",
                  env={"TRAINMASTER_HOME": str(tmp_path)})
    assert proc.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use" in proc.stderr
    assert not (tmp_path / "clusters" / "busy").exists()


def test_missing_go_toolchain_is_named(tmp_path: Path) -> None:
    env = {"PATH": "/nonexistent", "TRAINMASTER_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "trainmaster", "tools", "build", "kwok"],
                          capture_output=True, text=True, timeout=60, env={**os.environ, **env})
    assert proc.returncode == 1
    assert "the Go toolchain is not on PATH" in proc.stderr and "Traceback" not in proc.stderr


def test_half_started_cluster_is_cleaned_up(tmp_path: Path) -> None:
    """kube-apiserver dies at start: up names it, and etcd (already running) is stopped."""
    cache = tmp_path / "cache"
    for family in CLUSTER_FAMILIES:
        real = family_dir(family)
        shutil.copytree(real, cache / "tools" / real.name, symlinks=True)
    broken = cache / "tools" / family_dir("k8s").name / "kube-apiserver"
    broken.write_text("#!/bin/sh\necho 'simulated crash: bad flag' >&2\nexit 3\n")
    broken.chmod(0o755)
    home = tmp_path / "home"
    env = {"TRAINMASTER_HOME": str(home), "TRAINMASTER_CACHE": str(cache)}
    spec = write_spec(tmp_path / "s.yaml", small_spec_doc("half"))
    proc = tm("cluster", "up", "--spec", str(spec), "--no-build", env=env)
    assert proc.returncode == 1
    assert "kube-apiserver: the process exited with code 3" in proc.stderr
    assert "simulated crash" in proc.stderr
    assert not (home / "clusters" / "half").exists()
    assert _etcd_pids(cache) == set()


def _etcd_pids(cache: Path) -> set[int]:
    """Live etcd processes run from the tools under `cache` (other tests' clusters run
    beside this one under pytest-xdist)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmd = stat.read_bytes().split(b"\0")
        except OSError:
            continue
        if (cmd and cmd[0].endswith(b"/etcd") and cmd[0].startswith(bytes(cache))
                and _alive(int(stat.parent.name))):
            out.add(int(stat.parent.name))
    return out
