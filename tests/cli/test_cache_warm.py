"""`trainmaster cache warm` on a real directory: copy with progress, completion marker,
LRU eviction over capacity, the termination message, and clear errors."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT
from trainmaster.datacache import MARKER, CacheStore


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainmaster", "cache", "warm", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def _dataset(root: Path, name: str, size: int) -> Path:
    src = root / "sources" / name
    (src / "shards").mkdir(parents=True)
    (src / "shards" / "0.bin").write_bytes(os.urandom(size // 2))
    (src / "meta.json").write_bytes(b"x" * (size - size // 2))
    return src


def _warm(tmp: Path, name: str, src: str, capacity: str = "10Ki", *extra: str
          ) -> subprocess.CompletedProcess[str]:
    return _cli("--dataset", name, "--source", src, "--path", str(tmp / "cache" / name),
                "--capacity", capacity, "--termination-log", str(tmp / f"term-{name}"), *extra)


def test_a_local_dataset_is_copied_and_marked_complete(tmp_path: Path) -> None:
    src = _dataset(tmp_path, "tokens", 4096)
    result = _warm(tmp_path, "tokens", f"file://{src}")
    assert result.returncode == 0, result.stderr
    assert "warming tokens: 4.0 KiB of 4.0 KiB (100%)" in result.stderr
    cached = tmp_path / "cache" / "tokens"
    assert (cached / "shards" / "0.bin").read_bytes() == (src / "shards" / "0.bin").read_bytes()
    marker = json.loads((cached / MARKER).read_text())
    assert marker["bytes"] == 4096 and marker["source"] == f"file://{src}"
    assert json.loads((tmp_path / "term-tokens").read_text()) == {
        "dataset": "tokens", "held": ["tokens"], "evicted": []}
    again = _warm(tmp_path, "tokens", f"file://{src}")
    assert again.returncode == 0 and "already complete" in again.stderr


def test_least_recently_used_datasets_are_evicted_over_capacity(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        _dataset(tmp_path, name, 4096)
    assert _warm(tmp_path, "a", str(tmp_path / "sources" / "a")).returncode == 0
    time.sleep(0.05)
    assert _warm(tmp_path, "b", str(tmp_path / "sources" / "b")).returncode == 0
    time.sleep(0.05)
    # `a` is used again (its warm-up finds it complete), so `b` is now the least recent.
    assert _warm(tmp_path, "a", str(tmp_path / "sources" / "a")).returncode == 0
    result = _warm(tmp_path, "c", str(tmp_path / "sources" / "c"), "10Ki", "--size", "4Ki")
    assert result.returncode == 0, result.stderr
    assert "evicted b (least recently used)" in result.stderr
    assert sorted(h.name for h in CacheStore(tmp_path / "cache", 10240).held()) == ["a", "c"]
    assert not (tmp_path / "cache" / "b").exists()
    assert json.loads((tmp_path / "term-c").read_text()) == {
        "dataset": "c", "held": ["a", "c"], "evicted": ["b"]}


def test_a_dataset_over_capacity_is_refused_with_the_fix(tmp_path: Path) -> None:
    src = _dataset(tmp_path, "big", 8192)
    result = _warm(tmp_path, "big", str(src), "4Ki")
    assert result.returncode == 1
    assert "larger than the cache capacity" in result.stderr and "cache.capacity" in \
        result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "cache" / ".partial-big").exists()
    assert not (tmp_path / "cache" / "big").exists()


@pytest.mark.parametrize(("source", "message"), [
    ("gs://bucket/tokens", "gs:// scheme is not supported; use one of file://, http://, "
     "https://, s3://"),
    ("file:///no/such/dir", "no such file or directory"),
])
def test_unusable_sources_are_clear_errors(tmp_path: Path, source: str, message: str) -> None:
    result = _warm(tmp_path, "x", source)
    assert result.returncode == 1 and message in result.stderr
    assert "Traceback" not in result.stderr
    # The failure is the pod's termination message, for the operator to show.
    assert message in json.loads((tmp_path / "term-x").read_text())["error"]


def test_a_bad_capacity_is_a_usage_error(tmp_path: Path) -> None:
    result = _warm(tmp_path, "x", str(tmp_path), "lots")
    assert result.returncode == 2 and "--capacity" in result.stderr


@pytest.fixture()
def http_root(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    served = tmp_path / "www"
    served.mkdir()

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(served), **kwargs)  # type: ignore[arg-type]

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", served
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_an_http_source_is_downloaded(tmp_path: Path, http_root: tuple[str, Path]) -> None:
    base, served = http_root
    (served / "tokens.tar").write_bytes(b"t" * 3000)
    result = _warm(tmp_path, "web", f"{base}/tokens.tar")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "cache" / "web" / "tokens.tar").read_bytes() == b"t" * 3000
    missing = _warm(tmp_path, "gone", f"{base}/missing.tar")
    assert missing.returncode == 1 and "answered 404" in missing.stderr
