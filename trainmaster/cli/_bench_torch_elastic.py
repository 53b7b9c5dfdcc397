"""`bench recovery --real --job torch`: the elastic drill of the PyTorch job
(trainmaster.drill._torch_elastic) on a stack of its own, two real nodes."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from trainmaster.errors import TrainmasterError

JOB_CHOICES = ("cpu", "torch")
"""`--job`: the stack's CPU job (examples/data-parallel) or the PyTorch one."""
TORCH_REAL_NODES = 2
"""One node lost of two: the torch image costs about 9 GB of disk on each real node."""


class TorchElasticBenchError(TrainmasterError):
    """The torch job's elastic drill could not run."""


def torch_elastic_rows(spec: Path, repeat: int, report: Callable[[str], None]
                       ) -> list[dict[str, object]]:
    """The spec with the torch job (examples/transformer in the torch image, elastic 1..2)
    added, started on two real nodes; one shrink and one grow row per repeat."""
    import yaml

    from trainmaster.cluster import ClusterError, down_state_dir
    from trainmaster.drill import make_torch_elastic, run_torch_elastic_drill, start_real_stack
    from trainmaster.image import torch_reference
    from trainmaster.spec import load_spec

    image = torch_reference(load_spec(spec).image.reference)
    doc = make_torch_elastic(yaml.safe_load(spec.read_text()), image, 1, TORCH_REAL_NODES)
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="trainmaster-torch-elastic-") as folder:
        path = Path(folder) / spec.name
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        try:
            stack = start_real_stack(path, TORCH_REAL_NODES, report, job_images=[image])
        except ClusterError as exc:
            raise TorchElasticBenchError(str(exc)) from None
        try:
            for _ in range(repeat):
                rows += [result.row() for result in run_torch_elastic_drill(stack, report)]
        except ClusterError as exc:
            raise TorchElasticBenchError(str(exc)) from None
        finally:
            if stack.started:
                down_state_dir(stack.state_dir)
    return rows
