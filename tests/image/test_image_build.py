"""The built image: a valid OCI archive whose rootfs runs trainmaster's entry points.

Marked `image`: the first build downloads Debian packages and wheels (minutes); later runs
reuse the cached archive. The chroot tests need root (chroot(2) needs CAP_SYS_CHROOT);
that is their one skip reason. The import test needs a containerd built by
`trainmaster tools build containerd` (the real-node toolchain); without it, it skips.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT
from trainmaster.image import BuiltImage, build_image
from trainmaster.image._build import IMAGE_ENV
from trainmaster.spec import ImageSpec
from trainmaster.toolchain import cache_root

pytestmark = pytest.mark.image
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chroot(2) needs root")


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name: tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile()}


def _blob(files: dict[str, bytes], descriptor: dict[str, Any]) -> bytes:
    data = files[f"blobs/sha256/{descriptor['digest'].split(':', 1)[1]}"]
    assert len(data) == descriptor["size"], descriptor
    assert _sha256(data) == descriptor["digest"], descriptor
    return data


def test_archive_is_an_oci_layout_whose_digests_match_their_blobs(
        built_image: BuiltImage) -> None:
    files = _members(built_image.archive)
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, data in files.items():  # content addressing holds for every blob
        if name.startswith("blobs/sha256/"):
            assert _sha256(data) == "sha256:" + name.rsplit("/", 1)[1]
    index = json.loads(files["index.json"])
    assert index["schemaVersion"] == 2
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    [entry] = index["manifests"]
    assert entry["annotations"]["io.containerd.image.name"] == ImageSpec().reference
    assert entry["platform"] == {"architecture": "amd64", "os": "linux"}
    assert entry["digest"] == built_image.digest
    manifest = json.loads(_blob(files, entry))
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    config = json.loads(_blob(files, manifest["config"]))
    [layer] = manifest["layers"]
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
    assert layer["size"] == built_image.layer_bytes
    plain = gzip.decompress(_blob(files, layer))
    assert config["rootfs"] == {"type": "layers", "diff_ids": [_sha256(plain)]}
    assert len(plain) == built_image.rootfs_bytes
    assert config["os"] == "linux" and config["architecture"] == "amd64"
    assert config["config"]["Env"] == list(IMAGE_ENV)


def test_an_unchanged_tree_is_not_built_again(built_image: BuiltImage) -> None:
    start = time.monotonic()
    again = build_image(ROOT, ImageSpec().reference)
    assert again.cached and time.monotonic() - start < 30
    assert (again.archive, again.digest) == (built_image.archive, built_image.digest)


def test_cli_reports_the_cached_build_as_json(built_image: BuiltImage) -> None:
    proc = subprocess.run(
        ["trainmaster", "image", "build", "--json", "--source", str(ROOT)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"},
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["cached"] is True and result["digest"] == built_image.digest


@pytest.fixture(scope="module")
def rootfs(built_image: BuiltImage, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The image's layer unpacked, as a runtime would."""
    files = _members(built_image.archive)
    manifest = json.loads(files[f"blobs/sha256/{built_image.digest.split(':')[1]}"])
    layer = files[f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}"]
    root = tmp_path_factory.mktemp("rootfs")
    subprocess.run(["tar", "-xz", "--numeric-owner", "-C", str(root)], input=layer,
                   check=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _in_image(rootfs: Path, *argv: str, user: str | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a command in the unpacked image with the image config's environment."""
    chroot = ["chroot", *([f"--userspec={user}"] if user else []), str(rootfs)]
    return subprocess.run([*chroot, "/usr/bin/env", "-i", *IMAGE_ENV, "HOME=/root", *argv],
                          capture_output=True, text=True, timeout=timeout)


@needs_root
@pytest.mark.parametrize("argv", [
    ("trainmaster", "--help"),
    ("trainmaster", "operator", "run", "--help"),
    ("trainmaster", "launch", "--help"),
    ("trainmaster-scheduler", "--help"),
])
def test_entry_points_run_in_the_image(rootfs: Path, argv: tuple[str, ...]) -> None:
    proc = _in_image(rootfs, *argv)
    assert proc.returncode == 0, proc.stderr
    assert "Usage" in proc.stdout or "usage" in proc.stdout


@needs_root
def test_the_deployments_uid_can_run_it(rootfs: Path) -> None:
    """The scheduler and operator run as uid 65532 with a read-only root filesystem."""
    proc = _in_image(rootfs, "trainmaster-scheduler", "--help", user="65532:65532")
    assert proc.returncode == 0, proc.stderr


@needs_root
def test_the_launcher_wraps_the_example_training_run(rootfs: Path) -> None:
    proc = _in_image(
        rootfs, "trainmaster", "launch", "--", "python",
        "/opt/trainmaster/examples/data-parallel/train.py", "--train-steps=3",
        "--checkpoint-every=3", "--checkpoint-dir=/tmp/ckpt",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "rank 0 step 3 loss" in proc.stdout
    assert (rootfs / "tmp" / "ckpt" / "step-3" / "COMPLETE").exists()


@needs_root
def test_deploy_only_tools_are_not_in_the_image(rootfs: Path) -> None:
    proc = _in_image(rootfs, "python", "-c", "import pulumi")
    assert proc.returncode == 1 and "No module named 'pulumi'" in proc.stderr
    assert not (rootfs / "usr" / "bin" / "apt-get").exists()


def _containerd() -> Path | None:
    for directory in sorted((cache_root() / "tools").glob("containerd-v*")):
        if (directory / "containerd").is_file() and (directory / "ctr").is_file() \
                and not directory.name.endswith(".partial"):
            return directory
    return None


@needs_root
@pytest.mark.skipif(_containerd() is None,
                    reason="no containerd built (trainmaster tools build containerd)")
def test_ctr_imports_the_archive_into_k8s_io(built_image: BuiltImage, tmp_path: Path) -> None:
    """A private containerd (own root, state and socket; CRI off) imports and unpacks it."""
    bins = _containerd()
    assert bins is not None
    base = Path("/tmp") / f"tm-ctr-{os.getpid()}"  # unix socket paths must stay short
    base.mkdir()
    config = base / "config.toml"
    config.write_text(f"""\
version = 3
root = "{base}/root"
state = "{base}/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime",
                    "io.containerd.cri.v1.images"]
[grpc]
  address = "{base}/sock"
[ttrpc]
  address = "{base}/ttrpc"
""")
    log = (base / "containerd.log").open("w")
    daemon = subprocess.Popen([str(bins / "containerd"), "--config", str(config)],
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    ctr = [str(bins / "ctr"), "--address", f"{base}/sock", "-n", "k8s.io"]
    try:
        deadline = time.monotonic() + 60
        while subprocess.run([*ctr, "version"], capture_output=True).returncode != 0:
            assert daemon.poll() is None, (base / "containerd.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "containerd did not answer"
            time.sleep(0.5)
        imported = subprocess.run([*ctr, "images", "import", str(built_image.archive)],
                                  capture_output=True, text=True, timeout=600)
        assert imported.returncode == 0, imported.stderr
        listed = subprocess.run([*ctr, "images", "ls"], capture_output=True, text=True,
                                check=True).stdout
        line = next(ln for ln in listed.splitlines() if ln.startswith(ImageSpec().reference))
        assert built_image.digest in line
        checked = subprocess.run([*ctr, "images", "check"], capture_output=True, text=True,
                                 check=True).stdout
        assert "complete" in checked
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()
        log.close()
        mounts = [ln.split()[1] for ln in Path("/proc/mounts").read_text().splitlines()
                  if ln.split()[1].startswith(str(base))]
        for mount in sorted(mounts, reverse=True):
            subprocess.run(["umount", "-l", mount], check=False)
        shutil.rmtree(base, ignore_errors=True)
