"""The torch image's pieces: the pins that key its torch layer (uv.lock's closure of the
`torch` extra, CUDA libraries included), the layer's file layout, and the two-layer OCI
archive written over the trainmaster image's own layer."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.helpers import ROOT
from trainmaster.image import ImageError, torch_reference
from trainmaster.image._oci import (
    MEDIA_LAYER,
    Descriptor,
    ImageConfig,
    LayerBlob,
    archive_layers,
    write_layered_archive,
)
from trainmaster.image._torch_layer import (
    SITE_PACKAGES,
    layer_key,
    torch_pins,
    torch_requirements,
    write_layer,
)


def test_the_torch_image_is_named_after_the_trainmaster_image() -> None:
    assert torch_reference("trainmaster.local/trainmaster:0.1.0") == \
        "trainmaster.local/trainmaster-torch:0.1.0"
    assert torch_reference("registry.example/ml/tm:1.2") == "registry.example/ml/tm-torch:1.2"


def test_the_layer_is_keyed_by_torch_and_every_library_it_imports() -> None:
    pins = torch_pins(ROOT / "uv.lock", torch_requirements(ROOT))
    names = {p.split("==")[0] for p in pins}
    assert "torch==2.15.0" in pins
    # The CUDA libraries come through cuda-toolkit's extras (torch -> cuda-toolkit[cufft,
    # ...]): without them `import torch` fails, so a change of their pins must rebuild.
    assert {"nvidia-cufft", "nvidia-cusolver", "nvidia-cuda-runtime", "nvidia-cublas",
            "nvidia-cudnn-cu13", "nvidia-nccl-cu13"} <= names
    # Nothing of trainmaster's own runtime that torch does not need.
    assert not {"kopf", "pydantic", "numpy"} & names
    key = layer_key(pins)
    assert key == layer_key(tuple(pins))
    changed = tuple(p if not p.startswith("nvidia-cufft==") else "nvidia-cufft==0.0.1"
                    for p in pins)
    assert layer_key(changed) != key


def test_a_tree_without_the_torch_extra_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1"\n')
    with pytest.raises(ImageError, match=r"optional-dependencies\.torch"):
        torch_requirements(tmp_path)


def test_the_layer_puts_the_wheels_in_the_venv_and_a_torchrun_for_its_python(
        tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "torch" / "lib").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("x = 1\n")
    (site / "torch" / "lib" / "libtorch.so").write_bytes(b"\x7fELF" + bytes(100))
    (site / "torch" / "lib" / "libtorch.so").chmod(0o755)
    (site / "torch" / "lib" / "link.so").symlink_to("libtorch.so")
    (site / "torch" / "__pycache__").mkdir()
    (site / "torch" / "__pycache__" / "x.pyc").write_bytes(b"stale")
    desc, diff_id, size = write_layer(site, tmp_path / "layer.tar.gz")
    blob = (tmp_path / "layer.tar.gz").read_bytes()
    plain = gzip.decompress(blob)
    assert desc.digest == f"sha256:{hashlib.sha256(blob).hexdigest()}"
    assert desc.size == len(blob) and desc.media_type == MEDIA_LAYER
    assert diff_id == f"sha256:{hashlib.sha256(plain).hexdigest()}" and size == len(plain)
    with tarfile.open(fileobj=io.BytesIO(plain)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        prefix = SITE_PACKAGES.lstrip("/")
        assert members[f"{prefix}/torch/__init__.py"].mode == 0o644
        assert members[f"{prefix}/torch/lib/libtorch.so"].mode == 0o755
        assert members[f"{prefix}/torch/lib/link.so"].linkname == "libtorch.so"
        assert f"{prefix}/torch/__pycache__/x.pyc" in members  # bytecode is kept
        assert all(m.uid == 0 and m.mtime == 0 for m in members.values())
        torchrun = tar.extractfile("opt/trainmaster/bin/torchrun")
        assert torchrun is not None
        script = torchrun.read().decode()
    assert script.startswith("#!/opt/trainmaster/bin/python\n")
    assert "from torch.distributed.run import main" in script
    # The same files give the same layer (no build time in it).
    again = write_layer(site, tmp_path / "again.tar.gz")
    assert again == (desc, diff_id, size)


def _layer(tmp_path: Path, name: str, data: bytes) -> LayerBlob:
    plain = io.BytesIO()
    with tarfile.open(fileobj=plain, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    raw = gzip.compress(plain.getvalue(), mtime=0)
    path = tmp_path / f"{name}.gz"
    path.write_bytes(raw)
    return LayerBlob(Descriptor(MEDIA_LAYER, f"sha256:{hashlib.sha256(raw).hexdigest()}",
                                len(raw)),
                     f"sha256:{hashlib.sha256(plain.getvalue()).hexdigest()}", path)


def test_a_layered_archive_stacks_a_layer_under_another_archives_layer(tmp_path: Path) -> None:
    config = ImageConfig(env=("A=1",), cmd=("sh",), labels={},
                         created=datetime(2026, 1, 1, tzinfo=UTC))
    top = _layer(tmp_path, "top", b"trainmaster")
    base = tmp_path / "base.oci.tar"
    write_layered_archive([top], config, "x.local/base:1", base)
    [copied] = archive_layers(base)  # read from inside the archive, not unpacked
    assert (copied.descriptor, copied.diff_id) == (top.descriptor, top.diff_id)
    bottom = _layer(tmp_path, "bottom", b"torch")
    image = tmp_path / "image.oci.tar"
    write_layered_archive([bottom, copied], config, "x.local/base-torch:1", image)
    layers = archive_layers(image)
    assert [(la.descriptor, la.diff_id) for la in layers] == [
        (bottom.descriptor, bottom.diff_id), (top.descriptor, top.diff_id)]
    with tarfile.open(image) as tar:
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
        assert index["manifests"][0]["annotations"]["io.containerd.image.name"] == \
            "x.local/base-torch:1"
        for layer in layers:
            blob = tar.extractfile(layer.member or "")
            assert blob is not None
            assert f"sha256:{hashlib.sha256(blob.read()).hexdigest()}" == \
                layer.descriptor.digest
        manifest = json.loads(tar.extractfile(  # type: ignore[union-attr]
            f"blobs/sha256/{index['manifests'][0]['digest'].split(':')[1]}").read())
        config_doc = json.loads(tar.extractfile(  # type: ignore[union-attr]
            f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}").read())
    assert config_doc["rootfs"]["diff_ids"] == [bottom.diff_id, top.diff_id]
    assert len(config_doc["history"]) == 2
