"""A local cluster for the length of a benchmark: started from a spec document in a
temporary folder and stopped after, unless the caller brought its own kubeconfig."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml


@contextlib.contextmanager
def temporary_cluster(
    spec_doc: dict[str, Any],
    kubeconfig: Path | None,
    report: Callable[[str], None],
    *,
    nodes: int,
    kube_scheduler: bool,
    apiserver_args: Sequence[str] = (),
) -> Iterator[Path]:
    """Yield a kubeconfig: ``kubeconfig`` itself when given, else that of a fresh local
    cluster of ``spec_doc`` and its ``nodes`` (stopped, its folder removed, on exit)."""
    if kubeconfig is not None:
        yield kubeconfig
        return
    from trainmaster.cluster._control_plane import down_state_dir, up

    scheduler = "+ kube-scheduler" if kube_scheduler else "(no kube-scheduler)"
    with tempfile.TemporaryDirectory(prefix="trainmaster-bench-") as tmp:
        spec = Path(tmp) / "cluster.yaml"
        spec.write_text(yaml.safe_dump(spec_doc, sort_keys=False))
        state = Path(tmp) / "state"
        report(f"starting a local control plane: {nodes} kwok nodes {scheduler}")
        result = up(spec, state_dir=state, kube_scheduler=kube_scheduler, report=report,
                    apiserver_args=apiserver_args)
        try:
            report(f"cluster up in {result.seconds:.1f}s")
            yield Path(result.record.kubeconfig)
        finally:
            report("stopping the local control plane")
            down_state_dir(state)
