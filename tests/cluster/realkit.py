"""The real-node tests' one way to start a stack: stacks/dev under the test's own cluster
name (so a `make demo` cluster of this host is left alone), edited by the test, on N real
nodes with its controllers up; `cluster down` after."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import STACKS
from trainmaster.drill import RealStack, start_real_stack, wait_controllers


def log(line: str) -> None:
    print(line, flush=True)


@contextmanager
def dev_stack(name: str, real_nodes: int, folder: Path,
              edit: Callable[[dict[str, Any]], None] | None = None,
              monitoring: bool = False, job_images: Collection[str] | None = None
              ) -> Iterator[RealStack]:
    """stacks/dev named `name`, `edit`ed, written to `folder`, started on `real_nodes`
    (with the jobs of `job_images` on them: default the trainmaster image's)."""
    from trainmaster import cluster

    doc = yaml.safe_load((STACKS / "dev" / "cluster.yaml").read_text())
    doc["metadata"]["name"] = name
    if edit is not None:
        edit(doc)
    path = folder / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    real = start_real_stack(path, real_nodes, log, monitoring=monitoring,
                            job_images=job_images)
    try:
        wait_controllers(real, log)
        yield real
    finally:
        cluster.down_state_dir(real.state_dir)


@contextmanager
def torch_stack(name: str, real_nodes: int, folder: Path,
                edit: Callable[[dict[str, Any]], None] | None = None) -> Iterator[RealStack]:
    """stacks/demo named `name`, `edit`ed, written to `folder`, started on `real_nodes`:
    its PyTorch job lm (examples/transformer under torchrun, in the torch image, loaded into
    every real node) and the S3 server of its dataset, as `make demo` has them, applied
    without the Pulumi engine. One real cluster with the torch image (about 9 GB per node)
    at a time on a host: `make test-drills` runs them one after another."""
    from trainmaster import cluster
    from trainmaster.drill import serve_demo_datasets, spec_real_images

    doc = yaml.safe_load((STACKS / "demo" / "cluster.yaml").read_text())
    doc["metadata"]["name"] = name
    if edit is not None:
        edit(doc)
    path = folder / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    real = start_real_stack(path, real_nodes, log, job_images=spec_real_images(path))
    try:
        serve_demo_datasets(real.record, real.spec, log)
        wait_controllers(real, log)
        yield real
    finally:
        cluster.down_state_dir(real.state_dir)
