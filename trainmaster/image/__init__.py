"""The trainmaster container image, built without a container engine: a Debian rootfs
from Debian's packages (mmdebstrap), the project's wheel and its runtime wheels in a venv,
written as an OCI image archive that `ctr images import` loads (docs/image.md); and the
torch image, the same with a layer of PyPI's torch beneath it (_torch_image)."""

from trainmaster.image._build import STEPS, BuiltImage, Progress, build_image, images_dir
from trainmaster.image._errors import ImageError
from trainmaster.image._inputs import DEPLOY_ONLY, Inputs, read_inputs
from trainmaster.image._static import StaticImage, write_static_archive
from trainmaster.image._torch_image import build_torch_image, torch_reference

__all__ = [
    "DEPLOY_ONLY",
    "STEPS",
    "BuiltImage",
    "ImageError",
    "Inputs",
    "Progress",
    "StaticImage",
    "build_image",
    "build_torch_image",
    "images_dir",
    "read_inputs",
    "torch_reference",
    "write_static_archive",
]
