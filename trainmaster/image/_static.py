"""Images of one static Go binary each (the monitoring stack's), without Docker or a registry.

Each image is one layer: the binary in /bin, /etc/passwd and /etc/group naming `nobody`, a
world-writable /tmp, and the folder its process writes to (Prometheus' /prometheus,
Alertmanager's /alertmanager; the operator mounts volumes there). The binaries are built
with CGO off, so no libc is needed. All images go into one OCI-layout tar that
`ctr -n k8s.io images import` loads into a real node's containerd; `io.containerd.image.name`
names each.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
_CONFIG = "application/vnd.oci.image.config.v1+json"
_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_INDEX = "application/vnd.oci.image.index.v1+json"
_ETC = {
    "etc/passwd": "root:x:0:0:root:/:/bin/false\nnobody:x:65534:65534::/:/bin/false\n",
    "etc/group": "root:x:0:\nnobody:x:65534:\n",
}


@dataclass(frozen=True)
class StaticImage:
    reference: str
    """e.g. trainmaster.local/prometheus:v3.16.0 (a tag, not `latest`: IfNotPresent works)."""
    binary: Path
    workdir: str = "/"
    """Created empty in the image and the process' working directory."""


def _tar_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


def _tar_dir(tar: tarfile.TarFile, name: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, mode
    tar.addfile(info)


def layer_tar(image: StaticImage) -> bytes:
    """The uncompressed layer (its digest is the image's diff ID)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder in ("bin", "etc"):
            _tar_dir(tar, folder)
        _tar_dir(tar, "tmp", 0o1777)
        workdir = image.workdir.strip("/")
        if workdir:
            # Written by the non-root user the operator runs the pods as (when no volume is
            # mounted there), as the upstream images' are.
            _tar_dir(tar, workdir, 0o777)
        _tar_bytes(tar, f"bin/{image.binary.name}", image.binary.read_bytes(), 0o755)
        for name, text in _ETC.items():
            _tar_bytes(tar, name, text.encode(), 0o644)
    return buf.getvalue()


def _blob(blobs: dict[str, bytes], data: bytes, media_type: str) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"mediaType": media_type, "digest": digest, "size": len(data)}


def write_static_archive(images: list[StaticImage], archive: Path) -> list[str]:
    """Write the OCI layout tar holding every image; return their references."""
    blobs: dict[str, bytes] = {}
    manifests = []
    for image in images:
        raw = layer_tar(image)
        # mtime 0: the same binary gives the same layer digest on every run.
        layer = _blob(blobs, gzip.compress(raw, mtime=0), _LAYER)
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Entrypoint": [f"/bin/{image.binary.name}"],
                "Env": ["PATH=/bin"],
                "WorkingDir": image.workdir,
                "User": "65534",
            },
            "rootfs": {"type": "layers",
                       "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]},
        }
        config_ref = _blob(blobs, json.dumps(config, sort_keys=True).encode(), _CONFIG)
        manifest = {"schemaVersion": 2, "mediaType": _MANIFEST, "config": config_ref,
                    "layers": [layer]}
        ref = _blob(blobs, json.dumps(manifest, sort_keys=True).encode(), _MANIFEST)
        manifests.append({
            **ref,
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {
                "io.containerd.image.name": image.reference,
                "org.opencontainers.image.ref.name": image.reference.rsplit(":", 1)[1],
            },
        })
    files = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(
            {"schemaVersion": 2, "mediaType": _INDEX, "manifests": manifests}).encode(),
        **{f"blobs/sha256/{d.split(':')[1]}": data for d, data in blobs.items()},
    }
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(archive.name + ".partial")
    with tarfile.open(partial, "w") as tar:
        _tar_dir(tar, "blobs")
        _tar_dir(tar, "blobs/sha256")
        for name, data in files.items():
            _tar_bytes(tar, name, data, 0o644)
    partial.rename(archive)
    return [image.reference for image in images]
