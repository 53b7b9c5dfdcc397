"""The two images every real node has without a registry: its pod sandbox and a busybox.

Both are made here from Debian's static busybox: one layer (the busybox binary and a link per
applet) in an OCI image layout, packed as a tar that ``ctr images import`` loads into the node's
containerd. No registry is reachable, so pods that use them set ``imagePullPolicy: Never``.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

SANDBOX_IMAGE = "trainmaster.local/pause:busybox"
BUSYBOX_IMAGE = "trainmaster.local/busybox:latest"

# The sandbox only has to hold the pod's namespaces open and stop on SIGTERM.
_PAUSE = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"

_LAYER = "application/vnd.oci.image.layer.v1.tar"
_CONFIG = "application/vnd.oci.image.config.v1+json"
_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_INDEX = "application/vnd.oci.image.index.v1+json"


def _applets(busybox: str) -> list[str]:
    out = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout
    return sorted({a for a in out.split() if a and a != "busybox"})


def _layer(busybox: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add_dir(name: str, mode: int = 0o755) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            tar.addfile(info)

        for folder in ("bin", "dev", "etc", "proc", "sys", "var"):
            add_dir(folder)
        add_dir("tmp", 0o1777)
        data = Path(busybox).read_bytes()
        info = tarfile.TarInfo("bin/busybox")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
        for applet in _applets(busybox):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
        for name, text in (
            ("etc/passwd", "root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n"),
            ("etc/group", "root:x:0:\nnobody:x:65534:\n"),
        ):
            raw = text.encode()
            entry = tarfile.TarInfo(name)
            entry.size, entry.mode = len(raw), 0o644
            tar.addfile(entry, io.BytesIO(raw))
    return buf.getvalue()


def _blob(blobs: dict[str, bytes], data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"digest": digest, "size": len(data)}


def write_archive(busybox: str, path: Path) -> list[str]:
    """Write the OCI layout tar holding both images; return their names."""
    blobs: dict[str, bytes] = {}
    layer = _layer(busybox)
    layer_ref = {"mediaType": _LAYER, **_blob(blobs, layer)}
    diff_id = layer_ref["digest"]
    manifests = []
    for name, config in (
        (SANDBOX_IMAGE, {"Entrypoint": ["/bin/sh", "-c", _PAUSE]}),
        (BUSYBOX_IMAGE, {"Cmd": ["/bin/sh"]}),
    ):
        image_config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Env": ["PATH=/bin"], "WorkingDir": "/", **config},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }
        config_ref = {
            "mediaType": _CONFIG,
            **_blob(blobs, json.dumps(image_config, sort_keys=True).encode()),
        }
        manifest = {
            "schemaVersion": 2,
            "mediaType": _MANIFEST,
            "config": config_ref,
            "layers": [layer_ref],
        }
        ref = _blob(blobs, json.dumps(manifest, sort_keys=True).encode())
        manifests.append({
            "mediaType": _MANIFEST,
            **ref,
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {
                "io.containerd.image.name": name,
                "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
            },
        })
    index = {"schemaVersion": 2, "mediaType": _INDEX, "manifests": manifests}
    files = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index).encode(),
        **{f"blobs/sha256/{d.split(':')[1]}": data for d, data in blobs.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w") as tar:
        for folder in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return [SANDBOX_IMAGE, BUSYBOX_IMAGE]
