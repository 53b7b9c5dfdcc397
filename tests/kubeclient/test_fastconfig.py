"""The small kubeconfig loader: the common shapes without kubernetes_asyncio, the rest
through it, and errors that name what is wrong."""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainmaster.kubeclient import KubeConfig, KubeConfigError, load_configuration
from trainmaster.kubeclient._fastconfig import Unsupported, load_incluster, load_kubeconfig


def _write(tmp: Path, users: dict[str, dict[str, Any]], *, current: str = "a",
           cluster: dict[str, Any] | None = None) -> Path:
    """A kubeconfig with one cluster and one context per user (context name = user name)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "clusters": [{"name": "c", "cluster": cluster or {"server": "https://127.0.0.1:6443/"}}],
        "contexts": [{"name": n, "context": {"cluster": "c", "user": n}} for n in users],
        "users": [{"name": n, "user": u} for n, u in users.items()],
    }
    path = tmp / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _auth(cfg: KubeConfig) -> dict[str, dict[str, str]]:
    return asyncio.run(cfg.auth_settings())


def test_cert_files_relative_to_the_kubeconfig_and_a_ca_file(tmp_path: Path) -> None:
    for name in ("ca.crt", "admin.crt", "admin.key"):
        (tmp_path / name).write_text(name)
    path = _write(tmp_path, {"a": {"client-certificate": "admin.crt",
                                   "client-key": str(tmp_path / "admin.key")}},
                  cluster={"server": "https://127.0.0.1:6443/", "certificate-authority": "ca.crt"})
    cfg = load_kubeconfig(path)
    assert cfg.host == "https://127.0.0.1:6443"
    assert cfg.ssl_ca_cert == str(tmp_path / "ca.crt")
    assert cfg.cert_file == str(tmp_path / "admin.crt")
    assert cfg.key_file == str(tmp_path / "admin.key")
    assert cfg.verify_ssl and _auth(cfg) == {}


def test_data_fields_become_private_files_with_the_decoded_bytes(tmp_path: Path) -> None:
    path = _write(tmp_path, {"a": {"client-certificate-data": _b64("CERT"),
                                   "client-key-data": _b64("KEY")}},
                  cluster={"server": "https://h:1", "certificate-authority-data": _b64("CA")})
    cfg = load_kubeconfig(path)
    assert cfg.ssl_ca_cert and cfg.cert_file and cfg.key_file
    assert Path(cfg.ssl_ca_cert).read_text() == "CA"
    assert Path(cfg.cert_file).read_text() == "CERT"
    assert Path(cfg.key_file).read_text() == "KEY"
    assert Path(cfg.key_file).stat().st_mode & 0o077 == 0  # not readable by others


def test_token_and_insecure_skip_tls_verify(tmp_path: Path) -> None:
    path = _write(tmp_path, {"a": {"token": "abc"}},
                  cluster={"server": "https://h:1", "insecure-skip-tls-verify": True})
    cfg = load_kubeconfig(path)
    assert not cfg.verify_ssl
    assert _auth(cfg)["BearerToken"]["value"] == "Bearer abc"
    assert cfg.refresh_api_key_hook is None  # a fixed token: Kube may cache the header


def test_token_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    token = tmp_path / "tok"
    token.write_text("one\n")
    cfg = load_kubeconfig(_write(tmp_path, {"a": {"tokenFile": "tok"}}))
    assert cfg.refresh_api_key_hook is not None
    assert _auth(cfg)["BearerToken"]["value"] == "Bearer one"
    token.write_text("two-rotated\n")
    assert _auth(cfg)["BearerToken"]["value"] == "Bearer two-rotated"


def test_current_context_picks_the_user_and_an_explicit_context_overrides(
    tmp_path: Path,
) -> None:
    users = {"a": {"token": "ta"}, "b": {"token": "tb"}}
    assert _auth(load_kubeconfig(_write(tmp_path, users, current="b")))[
        "BearerToken"]["value"] == "Bearer tb"
    assert _auth(load_kubeconfig(_write(tmp_path, users, current="b"), context="a"))[
        "BearerToken"]["value"] == "Bearer ta"


def test_unknown_context_and_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match="context 'nope' is not defined"):
        load_kubeconfig(_write(tmp_path, {"a": {"token": "t"}}, current="nope"))
    with pytest.raises(KubeConfigError, match=r"kubeconfig .*/missing does not exist"):
        load_kubeconfig(tmp_path / "missing")
    with pytest.raises(KubeConfigError, match=r"client-certificate file .*/gone.crt does not"):
        load_kubeconfig(_write(tmp_path, {"a": {"client-certificate": "gone.crt"}}))
    with pytest.raises(KubeConfigError, match=r"does not exist"):
        asyncio.run(load_configuration(tmp_path / "missing"))


def test_other_shapes_fall_back_to_kubernetes_asyncio(tmp_path: Path) -> None:
    path = _write(tmp_path, {"a": {"username": "u", "password": "p"}},
                  cluster={"server": "https://h:1", "insecure-skip-tls-verify": True})
    with pytest.raises(Unsupported, match="password, username"):
        load_kubeconfig(path)
    cfg = asyncio.run(load_configuration(path))
    assert type(cfg).__module__.startswith("kubernetes_asyncio")
    assert cfg.host == "https://h:1" and not cfg.verify_ssl
    headers = [v for v in asyncio.run(cfg.auth_settings()).values() if v.get("in") == "header"]
    assert [h["value"] for h in headers] == ["Basic " + _b64("u:p")]  # what Kube sends
    # kubernetes_asyncio's own failures come out as KubeConfigError too
    broken = _write(tmp_path, {"a": {"password": "p"}}, cluster={"proxy-url": "http://p:1"})
    with pytest.raises(KubeConfigError, match="server"):
        asyncio.run(load_configuration(broken))


def test_in_cluster_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_text("CA")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    cfg = load_incluster(tmp_path)
    assert cfg.host == "https://10.0.0.1:443" and cfg.ssl_ca_cert == str(tmp_path / "ca.crt")
    assert _auth(cfg)["BearerToken"]["value"] == "Bearer sa-token"
    (tmp_path / "token").unlink()
    with pytest.raises(KubeConfigError, match=r"service account file .*/token does not exist"):
        load_incluster(tmp_path)


def test_the_scheduler_loads_a_common_kubeconfig_without_kubernetes_asyncio(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, {"a": {"token": "t"}})
    code = (
        "import asyncio, sys, trainmaster.scheduler.cli\n"
        "from trainmaster.kubeclient import load_configuration\n"
        f"cfg = asyncio.run(load_configuration({str(path)!r}))\n"
        "assert cfg.host == 'https://127.0.0.1:6443', cfg.host\n"
        "print(sorted(m for m in sys.modules if m.startswith('kubernetes')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
