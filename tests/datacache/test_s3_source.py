"""`trainmaster cache warm` from s3:// against a real S3-compatible server (versitygw, the
pinned Go build, on 127.0.0.1): many objects byte for byte, a copy killed half-way and
resumed, profiles, and the errors a user meets first (credentials, bucket)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.datacache.s3env import server_env
from tests.helpers import ROOT
from trainmaster.datacache import MARKER
from trainmaster.datacache._s3 import JOURNAL, _client
from trainmaster.s3server import S3Server


def _args(tmp: Path, name: str, source: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "trainmaster", "cache", "warm", "--dataset", name,
            "--source", source, "--path", str(tmp / "cache" / name), "--capacity", "1Gi",
            "--termination-log", str(tmp / f"term-{name}"), *extra]


def _warm(tmp: Path, name: str, source: str, env: dict[str, str], *extra: str
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_args(tmp, name, source, *extra), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def _objects(count: int, seed: int, size: int) -> dict[str, bytes]:
    rng = random.Random(seed)
    out: dict[str, bytes] = {}
    for i in range(count):
        key = f"tokens/shard-{i // 50:02d}/part-{i:04d}.bin"
        out[key] = rng.randbytes(rng.randint(0, size))
    return out


def test_a_prefix_of_many_objects_is_copied_byte_for_byte(tmp_path: Path,
                                                          s3_server: S3Server) -> None:
    objects = _objects(240, seed=1, size=8192)
    s3_server.seed("corpus", objects)
    # Beside the prefix, not under it: never copied.
    s3_server.seed("corpus", {"tokens-old/part-0.bin": b"old", "readme.txt": b"hi"})
    result = _warm(tmp_path, "tokens", "s3://corpus/tokens", server_env(s3_server))
    assert result.returncode == 0, result.stderr
    cached = tmp_path / "cache" / "tokens"
    files = {p.relative_to(cached).as_posix(): p.read_bytes()
             for p in cached.rglob("*") if p.is_file() and p.name != MARKER}
    assert files == {key.removeprefix("tokens/"): data for key, data in objects.items()}
    marker = json.loads((cached / MARKER).read_text())
    assert marker["bytes"] == sum(len(d) for d in objects.values())
    assert marker["source"] == "s3://corpus/tokens"
    # Progress as plain lines (stderr is not a terminal here), with object counts.
    assert "240 of 240 objects" in result.stderr.splitlines()[-2]
    assert "\r" not in result.stderr
    assert json.loads((tmp_path / "term-tokens").read_text())["held"] == ["tokens"]
    assert not (tmp_path / "cache" / ".partial-tokens").exists()


def _journal_lines(partial: Path) -> int:
    try:
        return len((partial / JOURNAL).read_text().splitlines())
    except OSError:
        return 0


def test_a_killed_copy_resumes_and_skips_complete_objects(tmp_path: Path,
                                                          s3_server: S3Server) -> None:
    objects = _objects(300, seed=2, size=512 * 1024)
    s3_server.seed("corpus", objects)
    env = server_env(s3_server)
    partial = tmp_path / "cache" / ".partial-tokens"
    proc = subprocess.Popen(_args(tmp_path, "tokens", "s3://corpus/tokens", "--workers", "2"),
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while _journal_lines(partial) < 30 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL, "the copy ended before it was killed"
    assert not (tmp_path / "cache" / "tokens").exists()
    done = [json.loads(line)["key"] for line in (partial / JOURNAL).read_text().splitlines()
            if line.endswith("}")]
    assert 30 <= len(done) < len(objects)
    inodes = {key: (partial / key.removeprefix("tokens/")).stat().st_ino for key in done}
    # One complete object changes at the source (same size, new bytes, so a new ETag):
    # it must be fetched again, and only it.
    changed = done[0]
    new = bytes(b ^ 0xFF for b in objects[changed])
    s3_server.seed("corpus", {changed: new})
    objects[changed] = new

    result = _warm(tmp_path, "tokens", "s3://corpus/tokens", env)
    assert result.returncode == 0, result.stderr
    assert "resuming the copy" in result.stderr
    assert f"{len(done) - 1} already complete" in result.stderr
    cached = tmp_path / "cache" / "tokens"
    for key, data in objects.items():
        assert (cached / key.removeprefix("tokens/")).read_bytes() == data, key
    # Skipped objects are the very files the killed run wrote (never rewritten).
    for key in done[1:]:
        assert (cached / key.removeprefix("tokens/")).stat().st_ino == inodes[key], key
    assert (cached / changed.removeprefix("tokens/")).stat().st_ino != inodes[changed]
    assert not (cached / JOURNAL).exists() and not partial.exists()


def _error_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


def test_wrong_credentials_are_one_clear_line(tmp_path: Path, s3_server: S3Server) -> None:
    s3_server.seed("corpus", {"tokens/a": b"a"})
    result = _warm(tmp_path, "tokens", "s3://corpus/tokens",
                   server_env(s3_server, AWS_SECRET_ACCESS_KEY="not-the-secret"))
    assert result.returncode == 1
    line = _error_line(result)
    assert "refused the credentials" in line and "AWS_SECRET_ACCESS_KEY" in line
    # The operator shows this on the jobs that wait for the dataset.
    term = json.loads((tmp_path / "term-tokens").read_text())
    assert term["dataset"] == "tokens" and "refused the credentials" in term["error"]


def test_a_missing_bucket_is_one_clear_line(tmp_path: Path, s3_server: S3Server) -> None:
    result = _warm(tmp_path, "tokens", "s3://no-such-bucket/tokens", server_env(s3_server))
    assert result.returncode == 1
    line = _error_line(result)
    assert "no bucket 'no-such-bucket'" in line and s3_server.endpoint in line


def test_an_empty_prefix_is_one_clear_line(tmp_path: Path, s3_server: S3Server) -> None:
    s3_server.seed("corpus", {"tokens/a": b"a"})
    result = _warm(tmp_path, "tokens", "s3://corpus/tokenz", server_env(s3_server))
    assert result.returncode == 1
    assert "no objects under s3://corpus/tokenz" in _error_line(result)


def test_a_profile_supplies_the_credentials(tmp_path: Path, s3_server: S3Server) -> None:
    s3_server.seed("corpus", {"tokens/a.bin": b"from a profile"})
    credentials = tmp_path / "credentials"
    credentials.write_text(f"[datasets]\naws_access_key_id = {s3_server.access_key}\n"
                           f"aws_secret_access_key = {s3_server.secret_key}\n")
    env = server_env(s3_server, AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None,
               AWS_PROFILE="datasets", AWS_SHARED_CREDENTIALS_FILE=str(credentials),
               AWS_CONFIG_FILE=str(tmp_path / "no-config"))
    result = _warm(tmp_path, "tokens", "s3://corpus/tokens", env)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "cache" / "tokens" / "a.bin").read_bytes() == b"from a profile"


def test_the_standard_variables_configure_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS_REGION (which botocore alone does not read) and AWS_ENDPOINT_URL, with
    path-style addressing for an on-prem endpoint."""
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://rgw.storage.example:7480")
    client = _client(4)
    assert client.meta.region_name == "eu-west-3"
    assert client.meta.endpoint_url == "http://rgw.storage.example:7480"
    assert client.meta.config.s3["addressing_style"] == "path"
