"""Checkpoints mirrored to and fetched from a real S3-compatible server (versitygw, the
pinned Go build, on 127.0.0.1): what the mirror uploads and when, what a fetch brings back
and what it leaves alone, how the launcher then resumes, and the errors a user meets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT
from trainmaster.api import GANG_UID_ENV, RESUME_ARGS_ENV, RESUME_FROM_ENV, RESUME_TEMPLATE_ENV
from trainmaster.datacache import CheckpointStore, Mirror, fetch_newest
from trainmaster.launch import newest_complete
from trainmaster.launch._resume import plan_start
from trainmaster.s3server import S3Server

BUCKET = "checkpoints"
URL = f"s3://{BUCKET}/dp-example"


def _store(server: S3Server) -> CheckpointStore:
    client = server.client()
    client.create_bucket(Bucket=BUCKET)
    return CheckpointStore(URL, client)


def _write(directory: Path, step: int, size: int = 4096, marker: bool = True) -> Path:
    """A checkpoint as examples/data-parallel/train.py writes one: a folder, COMPLETE last."""
    entry = directory / f"step-{step}"
    entry.mkdir(parents=True)
    (entry / "weights.npy").write_bytes(os.urandom(size))
    (entry / "shards").mkdir()
    (entry / "shards" / "rank-0.bin").write_bytes(os.urandom(size // 2))
    (entry / "state.json").write_text(json.dumps({"step": step}))
    if marker:
        (entry / "COMPLETE").touch()
    return entry


def _keys(server: S3Server) -> set[str]:
    listed = server.client().list_objects_v2(Bucket=BUCKET).get("Contents") or []
    return {str(item["Key"]) for item in listed}


def _same_tree(a: Path, b: Path) -> None:
    files_a = {p.relative_to(a).as_posix(): p.read_bytes() for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b).as_posix(): p.read_bytes() for p in b.rglob("*") if p.is_file()}
    assert files_a == files_b


def test_complete_checkpoints_are_mirrored_and_fetched_byte_for_byte(
        tmp_path: Path, s3_server: S3Server) -> None:
    store = _store(s3_server)
    written = tmp_path / "node-a"
    mirror = Mirror(store, written, keep=3, settle_seconds=3600)
    assert mirror.poll() is None  # nothing yet (the directory does not even exist)
    _write(written, 20)
    (written / "step-40.tmp").mkdir()  # being written: never a checkpoint
    _write(written, 60, marker=False)  # no marker, not settled: not complete yet
    done = mirror.poll()
    assert done is not None and (done.entry, done.step) == ("step-20", 20)
    assert done.files == {"COMPLETE": 0, "shards/rank-0.bin": 2048, "state.json": 12,
                          "weights.npy": 4096}
    assert mirror.poll() is None
    assert _keys(s3_server) == {
        "dp-example/step-20/COMPLETE", "dp-example/step-20/shards/rank-0.bin",
        "dp-example/step-20/state.json", "dp-example/step-20/weights.npy",
        "dp-example/.trainmaster-checkpoints/step-20.json"}

    # Another node, whose checkpoint directory is empty, fetches it whole.
    elsewhere = tmp_path / "node-b"
    fetched = fetch_newest(store, elsewhere)
    assert fetched.path == elsewhere / "step-20" and fetched.step == 20
    assert fetched.size == 4096 + 2048 + 12
    _same_tree(written / "step-20", elsewhere / "step-20")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["step-20"]  # no landing left
    found = newest_complete(elsewhere)
    assert found is not None and (found.path, found.step, found.how) == (
        elsewhere / "step-20", 20, "marker")

    # Fetching again: the directory holds it, nothing moves.
    again = fetch_newest(store, elsewhere)
    assert again.path is None and "step 20" in again.reason


def test_the_mirror_keeps_the_newest_and_never_uploads_one_twice(
        tmp_path: Path, s3_server: S3Server) -> None:
    store = _store(s3_server)
    written = tmp_path / "ckpt"
    mirror = Mirror(store, written, keep=2, settle_seconds=3600)
    for step in (20, 40, 60, 80):
        _write(written, step, size=64)
        done = mirror.poll()
        assert done is not None and done.step == step
    assert [m.step for m in store.mirrored()] == [80, 60]
    assert {k.split("/")[1] for k in _keys(s3_server)} == {
        "step-80", "step-60", ".trainmaster-checkpoints"}
    # A mirror started again (the sidecar restarted) starts past what is there.
    restarted = Mirror(store, written, keep=2, settle_seconds=3600)
    assert restarted.poll() is None
    _write(written, 100, size=64)
    done = restarted.poll()
    assert done is not None and done.step == 100
    assert [m.step for m in store.mirrored()] == [100, 80]


def test_a_fetch_takes_only_whole_newer_checkpoints(tmp_path: Path,
                                                    s3_server: S3Server) -> None:
    store = _store(s3_server)
    written = tmp_path / "ckpt"
    Mirror(store, written, keep=3, settle_seconds=3600).poll()
    assert fetch_newest(store, tmp_path / "empty").path is None  # nothing mirrored yet
    _write(written, 40)
    assert Mirror(store, written, keep=3, settle_seconds=3600).poll() is not None
    # A mirror killed before its manifest: objects of step-90, no manifest.
    s3_server.client().put_object(Bucket=BUCKET, Key="dp-example/step-90/weights.npy",
                                  Body=b"half")

    local = tmp_path / "local"
    _write(local, 60)  # newer than anything mirrored: kept, nothing fetched
    kept = fetch_newest(store, local)
    assert kept.path is None and "step 60" in kept.reason
    assert not (local / "step-40").exists()

    # An entry of the mirrored step's name lying incomplete here (a write cut short by a
    # node's loss) is replaced by the whole one.
    stale = tmp_path / "stale"
    _write(stale, 40, size=7, marker=False)
    fetched = fetch_newest(store, stale)
    assert fetched.step == 40
    _same_tree(written / "step-40", stale / "step-40")


def test_the_gangs_pods_fetching_into_one_shared_volume_at_once_all_succeed(
        tmp_path: Path, s3_server: S3Server) -> None:
    """Every pod of a gang fetches; on a volume they share (the local cluster's host folder,
    an NFS claim) they do it at once: each lands its own copy, one is placed, none fails."""
    store = _store(s3_server)
    written = tmp_path / "a"
    _write(written, 40, size=1 << 20)
    assert Mirror(store, written, keep=3, settle_seconds=3600).poll() is not None
    shared = tmp_path / "shared"
    shared.mkdir()
    # A copy a killed fetcher left long ago: removed; a recent one (another fetcher's) kept.
    stale = shared / "step-40.old-host.1.abcdef.partial"
    stale.mkdir()
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: fetch_newest(CheckpointStore(URL, s3_server.client()),
                                                       shared), range(4)))
    assert sum(1 for r in results if r.size) >= 1
    for r in results:
        if r.reason.startswith(f"{shared}/step-40 (step 40) is here"):
            # A fetcher that started once another had placed it: nothing to bring.
            assert (r.path, r.step, r.size) == (None, None, 0), r
        else:
            assert (r.path, r.step) == (shared / "step-40", 40), r
            assert r.reason.startswith(("fetched step-40",
                                        "step-40 (step 40) was placed here")), r.reason
    _same_tree(written / "step-40", shared / "step-40")
    assert sorted(p.name for p in shared.iterdir()) == ["step-40"]


def test_a_checkpoint_vouched_for_by_a_pointer_or_a_zip_resumes_after_a_fetch(
        tmp_path: Path, s3_server: S3Server) -> None:
    store = _store(s3_server)
    deepspeed = tmp_path / "deepspeed"
    tag = deepspeed / "global_step300"
    tag.mkdir(parents=True)
    (tag / "mp_rank_00_model_states.pt").write_bytes(os.urandom(1000))
    (deepspeed / "latest").write_text("global_step300")
    done = Mirror(store, deepspeed, keep=3, settle_seconds=3600).poll()
    assert done is not None and done.step == 300
    fetched = fetch_newest(store, tmp_path / "b")
    # No `latest` beside it here: the fetch marks it complete itself.
    assert fetched.path is not None and (fetched.path / ".complete").exists()
    found = newest_complete(tmp_path / "b")
    assert found is not None and (found.step, found.how) == (300, "marker")

    # A single-file checkpoint (torch.save's zip): as the launcher's watcher judges it, once
    # it stayed unchanged (settle_seconds), mirrored and fetched as one object.
    files = tmp_path / "files"
    files.mkdir()
    with zipfile.ZipFile(files / "step_500.pt", "w") as archive:
        archive.writestr("data.pkl", os.urandom(300))
    watching = Mirror(store, files, keep=3, settle_seconds=0)
    assert watching.poll() is None  # seen once: not yet known unchanged
    done = watching.poll()
    assert done is not None and done.files == {"": (files / "step_500.pt").stat().st_size}
    fetched = fetch_newest(store, tmp_path / "c")
    assert fetched.path == tmp_path / "c" / "step_500.pt"
    assert fetched.path.read_bytes() == (files / "step_500.pt").read_bytes()


def test_the_launcher_resumes_from_the_fetched_checkpoint(tmp_path: Path,
                                                          s3_server: S3Server) -> None:
    """The operator passed step-20 (the newest it heard of); the directory here is empty,
    the mirror holds step-40: the fetch brings step-40, and the launcher's start-up look
    moves the resume point to it."""
    store = _store(s3_server)
    written = tmp_path / "a"
    mirror = Mirror(store, written, keep=3, settle_seconds=3600)
    for step in (20, 40):
        _write(written, step)
        mirror.poll()
    here = tmp_path / "b"
    assert fetch_newest(store, here).step == 40
    env = {RESUME_TEMPLATE_ENV: "--resume-from {path}", RESUME_FROM_ENV: f"{here}/step-20",
           RESUME_ARGS_ENV: f"--resume-from {here}/step-20", GANG_UID_ENV: "uid-1"}
    start = plan_start(["python", "train.py", "--resume-from", f"{here}/step-20"], env, here)
    assert start.command == ["python", "train.py", "--resume-from", f"{here}/step-40"]
    assert start.resumed == (f"{here}/step-40", 40)


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trainmaster", "checkpoints", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _env(server: S3Server, **changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return {**env, **server.env(), **changes}


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_the_commands_mirror_until_sigterm_and_fetch(tmp_path: Path,
                                                     s3_server: S3Server) -> None:
    _store(s3_server)
    written = tmp_path / "a"
    written.mkdir()
    mirror = subprocess.Popen(
        [sys.executable, "-m", "trainmaster", "checkpoints", "mirror", "--dir", str(written),
         "--url", URL, "--keep", "2", "--every", "0.2"], cwd=ROOT, env=_env(s3_server),
        stderr=subprocess.PIPE, text=True)
    try:
        _write(written, 20)
        deadline = time.monotonic() + 60
        while "dp-example/.trainmaster-checkpoints/step-20.json" not in _keys(s3_server):
            assert time.monotonic() < deadline and mirror.poll() is None
            time.sleep(0.2)
        # Written just before the pod stops: the last look after SIGTERM uploads it.
        _write(written, 40)
        mirror.send_signal(signal.SIGTERM)
        _, err = mirror.communicate(timeout=60)
    finally:
        if mirror.poll() is None:
            mirror.kill()
            mirror.wait()
    assert mirror.returncode == 0, err
    assert "uploaded step-20 (step 20, 6156 bytes)" in err
    assert "uploaded step-40 (step 40, 6156 bytes)" in err
    result = _cli("fetch", "--dir", str(tmp_path / "b"), "--url", URL, env=_env(s3_server))
    assert result.returncode == 0, result.stderr
    assert _one_line(result) == (f"checkpoints fetch: fetched step-40 (step 40, 6156 bytes) "
                                 f"from {URL}")
    _same_tree(written / "step-40", tmp_path / "b" / "step-40")


@pytest.mark.parametrize(("changes", "url", "says"), [
    ({}, "s3://no-such-bucket/x", "no bucket 'no-such-bucket' on the S3 server at http"),
    ({"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}, URL, "cannot reach the S3 server at "
     "http://127.0.0.1:9"),
    ({}, "https://example/x", "write s3://bucket or s3://bucket/prefix"),
])
def test_fetch_errors_are_one_clear_line(tmp_path: Path, s3_server: S3Server,
                                         changes: dict[str, Any], url: str, says: str) -> None:
    _store(s3_server)
    result = _cli("fetch", "--dir", str(tmp_path / "b"), "--url", url,
                  env=_env(s3_server, **changes))
    assert result.returncode == 1, result.stderr
    assert says in _one_line(result)
    assert not (tmp_path / "b").exists()
