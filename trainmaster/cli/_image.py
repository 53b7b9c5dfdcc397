"""`trainmaster image build`: the project's image, without a container engine."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainmaster.cli._app import app
from trainmaster.cli._console import lazy_console

if TYPE_CHECKING:
    from trainmaster.image import BuiltImage, Progress

image_app = typer.Typer(
    help="The trainmaster image (scheduler, operator, launcher), built without Docker.",
    no_args_is_help=True,
)
app.add_typer(image_app, name="image")
_err = lazy_console(stderr=True, highlight=False)


# What the torch image's build says as it goes (trainmaster.image._torch_layer, _torch_image).
TORCH_STEPS = ("the torch layer", "installing ", "compiling bytecode", "no bytecode",
               "writing the layer", "packing ")


def _console_progress(verbose: bool) -> Progress:
    """The image build's progress on stderr (made here: the image package is imported
    only when an image is built)."""
    from trainmaster.image import STEPS, Progress

    class _ConsoleProgress(Progress):
        """Steps as numbered lines with their start time; tool output as a one-line status."""

        def __init__(self, verbose: bool) -> None:
            self.verbose = verbose
            self.start = time.monotonic()
            self.last_percent = -1

        def _elapsed(self) -> str:
            return f"{time.monotonic() - self.start:6.1f}s"

        def step(self, index: int, name: str, detail: str) -> None:
            _err.print(f"[dim]{self._elapsed()}[/dim] [bold][{index}/{len(STEPS)}] {name}[/bold]: "
                       f"{detail}")

        def line(self, text: str) -> None:
            # mmdebstrap and pip say a lot; show the steps they announce, all of it with -v.
            if self.verbose or text.startswith(("I: ", "E: ", "W: ")) or "wheels," in text \
                    or text.startswith(TORCH_STEPS):
                _err.print(f"[dim]{self._elapsed()}      {text[:150]}[/dim]")

        def bytes(self, done: int, total: int) -> None:
            percent = done * 100 // max(total, 1)
            if percent // 10 != self.last_percent // 10:
                self.last_percent = percent
                _err.print(f"[dim]{self._elapsed()}      layer {percent}% "
                           f"({done / 1e6:.0f}/{total / 1e6:.0f} MB)[/dim]")

    return _ConsoleProgress(verbose)


def _summary(built: BuiltImage) -> str:
    state = "cached (inputs unchanged)" if built.cached else f"built in {built.build_seconds}s"
    return (
        f"{built.reference}: {state}\n"
        f"  archive  {built.archive} ({built.archive_bytes / 1e6:.1f} MB)\n"
        f"  layer    {built.layer_bytes / 1e6:.1f} MB compressed, "
        f"{built.rootfs_bytes / 1e6:.1f} MB unpacked\n"
        f"  digest   {built.digest}\n"
        f"  load it  ctr -n k8s.io images import {built.archive}"
    )


@image_app.command("build")
def build_cmd(
    source: Annotated[Path, typer.Option(help="Root of the trainmaster tree to build.")] = Path(),
    tag: Annotated[str | None, typer.Option(
        help="Image reference; default: the spec's default `image` "
             "(trainmaster.local/trainmaster:<version>).")] = None,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Also copy the OCI archive here.")] = None,
    force: Annotated[bool, typer.Option(help="Rebuild even if the inputs are unchanged.")] = False,
    torch: Annotated[bool, typer.Option(
        "--torch", help="Build the torch image instead: this image with PyPI's torch (the "
                        "`torch` extra, pinned by uv.lock) in a layer beneath it "
                        "(<name>-torch:<version>).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v",
                                          help="Show every line of the tools.")] = False,
) -> None:
    """Build the image as an OCI archive (cached by the digest of its inputs)."""
    from trainmaster.image import build_image, build_torch_image, torch_reference
    from trainmaster.spec import ImageSpec  # the spec model: ~1 s, only when building

    reference = tag or ImageSpec().reference
    if torch:
        reference = reference if tag else torch_reference(reference)
        built = build_torch_image(source, reference, _console_progress(verbose), force=force)
        if output is not None:
            output.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(built.archive, output)
    else:
        built = build_image(source, reference, _console_progress(verbose), force=force,
                            output=output)
    if as_json:
        typer.echo(json.dumps(built.as_json(), indent=2))
    else:
        typer.echo(_summary(built))
