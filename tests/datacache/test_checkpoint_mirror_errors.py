"""The errors of `trainmaster checkpoints fetch|mirror` against a real S3-compatible server
(versitygw, the pinned Go build, on 127.0.0.1): wrong or missing keys, keys that may read
but not write, a missing bucket, an unreachable endpoint. Each is one line naming the
jobs[].checkpoint.mirror field to fix; a fetch exits 1 with it, the mirror (a sidecar: the
server may come back) says it and goes on looking, never with a traceback."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.datacache.s3env import server_env
from tests.helpers import ROOT
from trainmaster import s3server
from trainmaster.datacache import CheckpointStore, Mirror, S3Error, fetch_newest
from trainmaster.s3server import S3Server

BUCKET = "checkpoints"
URL = f"s3://{BUCKET}/gpt"
SECRET_FIELD = "jobs[].checkpoint.mirror.credentialsSecret"


def _write(directory: Path, step: int) -> Path:
    entry = directory / f"step-{step}"
    entry.mkdir(parents=True)
    (entry / "weights.bin").write_bytes(os.urandom(1024))
    (entry / "COMPLETE").touch()
    return entry


def _fetch(directory: Path, url: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainmaster", "checkpoints", "fetch",
                           "--dir", str(directory), "--url", url], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def _mirror_says(directory: Path, env: dict[str, str]) -> tuple[int, list[str]]:
    """Run the mirror until its first look has said something, then SIGTERM it: its exit
    code and its stderr lines."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainmaster", "checkpoints", "mirror", "--dir", str(directory),
         "--url", URL, "--every", "0.2"], cwd=ROOT, env=env, stderr=subprocess.PIPE,
        text=True)
    assert proc.stderr is not None
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 90
        while len(lines) < 2 and time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                lines.append(proc.stderr.readline().rstrip("\n"))
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, [line for line in [*lines, *rest.splitlines()] if line.strip()]


def test_a_wrong_secret_key_is_one_line_for_the_fetch_and_the_mirror(
        tmp_path: Path, s3_server: S3Server) -> None:
    s3_server.client().create_bucket(Bucket=BUCKET)
    env = server_env(s3_server, AWS_SECRET_ACCESS_KEY="not-the-secret")
    refused = (f"{URL}: the S3 server at {s3_server.endpoint} refused the credentials "
               "(SignatureDoesNotMatch); check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
               f"(the mirror's Secret, {SECRET_FIELD})")
    result = _fetch(tmp_path / "b", URL, env)
    assert result.returncode == 1, result.stderr
    assert _one_line(result) == f"error: {refused}"
    assert not (tmp_path / "b").exists()

    written = tmp_path / "a"
    _write(written, 20)
    code, lines = _mirror_says(written, env)
    assert code == 0, lines
    assert not any("Traceback" in line for line in lines), lines
    assert lines[0] == f"checkpoints mirror: {written} -> {URL}, keeping 3"
    assert set(lines[1:]) == {f"checkpoints mirror: {refused}"}, lines
    assert not s3_server.client().list_objects_v2(Bucket=BUCKET).get("Contents")


def test_no_credentials_at_all_is_one_line(tmp_path: Path, s3_server: S3Server) -> None:
    env = server_env(s3_server, AWS_ACCESS_KEY_ID=None, AWS_SECRET_ACCESS_KEY=None,
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
               AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_EC2_METADATA_DISABLED="true")
    result = _fetch(tmp_path / "b", URL, env)
    assert result.returncode == 1, result.stderr
    assert _one_line(result) == (
        f"error: {URL}: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or "
        f"AWS_PROFILE); in a stack, name the mirror's Secret in {SECRET_FIELD}")


def _read_only(bucket: str, user: str) -> str:
    """A bucket policy letting `user` list and read the bucket, and nothing else."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": [user]},
        "Action": ["s3:ListBucket", "s3:GetObject"],
        "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"]}]})


def test_keys_that_may_read_but_not_write_fetch_and_the_mirror_names_the_grants(
        tmp_path: Path) -> None:
    """The mirror's upload goes through boto3's upload_file, which wraps the server's
    AccessDenied in S3UploadFailedError: still the one line, never a traceback."""
    with s3server.running(tmp_path / "s3", users=True) as server:
        user, secret = "tmreader", "reader-secret-0123456789"
        server.create_user(user, secret)
        root = server.client()
        root.create_bucket(Bucket=BUCKET)
        root.put_bucket_policy(Bucket=BUCKET, Policy=_read_only(BUCKET, user))
        root.create_bucket(Bucket="elsewhere")  # no grant to the user at all
        written = tmp_path / "a"
        _write(written, 20)
        assert Mirror(CheckpointStore(URL, root), written, keep=3).poll() is not None
        env = server_env(server, AWS_ACCESS_KEY_ID=user, AWS_SECRET_ACCESS_KEY=secret)

        fetched = _fetch(tmp_path / "b", URL, env)
        assert fetched.returncode == 0, fetched.stderr
        assert (tmp_path / "b" / "step-20" / "weights.bin").read_bytes() == (
            written / "step-20" / "weights.bin").read_bytes()

        denied = _fetch(tmp_path / "c", "s3://elsewhere/gpt", env)
        assert denied.returncode == 1, denied.stderr
        assert _one_line(denied) == (
            f"error: s3://elsewhere/gpt: access denied to bucket 'elsewhere' at "
            f"{server.endpoint}; grant these credentials s3:ListBucket and s3:GetObject on it")

        _write(written, 40)
        code, lines = _mirror_says(written, env)
        assert code == 0, lines
        assert not any("Traceback" in line for line in lines), lines
        assert f"checkpoints mirror: {URL}: access denied to bucket '{BUCKET}' at " \
               f"{server.endpoint}; grant these credentials s3:ListBucket, s3:GetObject, " \
               "s3:PutObject and s3:DeleteObject on it" in lines, lines
        keys = {str(o["Key"]) for o in root.list_objects_v2(Bucket=BUCKET)["Contents"]}
        assert not any("step-40" in key for key in keys), keys

        # In-process, the same line; and, as docs/real-nodes.md says, the checkpoint whose
        # upload failed is not tried again (the next one to complete is).
        mirror = Mirror(CheckpointStore(URL, server.client(user, secret)), written, keep=3)
        with pytest.raises(S3Error, match="s3:PutObject and s3:DeleteObject on it"):
            mirror.poll()
        assert mirror.poll() is None


def test_the_mirror_names_a_missing_bucket_and_an_unreachable_endpoint(
        tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in server_env(s3_server).items():
        if key.startswith("AWS_"):
            monkeypatch.setenv(key, value)
    written = tmp_path / "a"
    _write(written, 20)
    with pytest.raises(S3Error) as missing:
        Mirror(CheckpointStore("s3://no-such-bucket/gpt"), written, keep=3).poll()
    assert str(missing.value) == (
        f"s3://no-such-bucket/gpt: no bucket 'no-such-bucket' on the S3 server at "
        f"{s3_server.endpoint}; fix jobs[].checkpoint.mirror.url or create the bucket")

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    with pytest.raises(S3Error) as unreachable:
        Mirror(CheckpointStore(URL), written, keep=3).poll()
    said = str(unreachable.value)
    assert said.startswith(f"{URL}: cannot reach the S3 server at http://127.0.0.1:9: ")
    assert said.endswith("; check AWS_ENDPOINT_URL (jobs[].checkpoint.mirror.endpoint)")
    with pytest.raises(S3Error) as fetching:
        fetch_newest(CheckpointStore(URL), tmp_path / "b")
    assert str(fetching.value) == said
