"""How fast a large spec validates: generate one with an explicit node list (the worst case
for the parser and the semantic checks) and time load_spec_text on it. And how fast one
job validates against a cluster spec that was validated already (what the operator does
for every TrainingJob), next to validating the whole spec with that job again."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

from trainmaster.api import API_VERSION, CLUSTER_KIND
from trainmaster.spec._load import load_spec_text, validate_data, validate_job
from trainmaster.spec._model import ClusterSpec


@dataclass(frozen=True)
class SpecBenchResult:
    nodes: int
    jobs: int
    bytes: int
    seconds_median: float
    seconds_min: float
    cpu_seconds_median: float
    """CPU time of this process: what the work costs, whatever else the machine runs."""
    runs: int


def large_spec_text(
    nodes: int, nodes_per_leaf: int = 20, leaves_per_spine: int = 10, jobs: int = 100
) -> str:
    """A valid spec with `nodes` nodes listed one by one under an explicit switch tree."""
    leaves = []
    for leaf in range(-(-nodes // nodes_per_leaf)):
        count = min(nodes_per_leaf, nodes - leaf * nodes_per_leaf)
        leaves.append(
            {
                "name": f"leaf-{leaf}",
                "nodes": [{"name": f"gpu-{leaf * nodes_per_leaf + i:05d}"} for i in range(count)],
            }
        )
    spines = [
        {"name": f"spine-{s}", "switches": leaves[i : i + leaves_per_spine]}
        for s, i in enumerate(range(0, len(leaves), leaves_per_spine))
    ]
    doc = {
        "apiVersion": API_VERSION,
        "kind": CLUSTER_KIND,
        "metadata": {"name": "large"},
        "topology": {"levels": ["spine", "leaf"], "switches": spines},
        "networks": {
            "compute": {
                "fabric": "infiniband",
                "rails": [{"subnet": f"10.{i}.0.0/16"} for i in range(8)],
            },
            "storage": {"subnet": "10.200.0.0/16"},
        },
        "scheduler": {"queues": [{"name": "default"}, {"name": "research", "gpuQuota": 4096}]},
        "jobs": [
            {
                "name": f"job-{j}",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "launcher": "torchrun",
                "nodes": 1 + j % 16,
                "queue": "research",
                "checkpoint": {"volume": "ckpt", "path": f"/ckpt/job-{j}"},
            }
            for j in range(jobs)
        ],
    }
    return yaml.safe_dump(doc, sort_keys=False)


def bench_spec(nodes: int = 10_000, runs: int = 5) -> SpecBenchResult:
    text = large_spec_text(nodes)
    times, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        spec = load_spec_text(text, "large.yaml")
        assert len(spec.nodes) == nodes
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return SpecBenchResult(
        nodes,
        len(spec.jobs),
        len(text.encode()),
        statistics.median(times),
        min(times),
        statistics.median(cpu),
        runs,
    )


@dataclass(frozen=True)
class JobBenchResult:
    nodes: int
    runs: int
    whole_median: float
    """Dump the cluster spec, put the job in, validate all of it (the operator until now)."""
    whole_min: float
    job_median: float
    """`validate_job`: the job's schema and rules against the validated cluster."""
    job_min: float


def probe_job(spec: ClusterSpec) -> dict[str, Any]:
    """A valid 2-node job of whole nodes that must share one leaf: every rule runs."""
    return {
        "name": "bench-probe",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "launcher": "torchrun",
        "nodes": 2,
        "gpusPerPod": min(n.gpus for n in spec.nodes),
        "command": ["python", "train.py"],
        "queue": spec.scheduler.queues[0].name,
        "topology": {"domain": spec.topology.levels[-1], "mode": "required"},
    }


def _whole_spec_again(spec: ClusterSpec, raw: dict[str, Any]) -> Any:
    data = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    data["jobs"] = [raw]
    return validate_data(data, "whole spec").jobs[0]


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_job(spec: ClusterSpec, runs: int = 20) -> JobBenchResult:
    raw = probe_job(spec)
    # Also the warm-up (imports, the cached schemas): both give the same Job.
    assert _whole_spec_again(spec, raw) == validate_job(spec, raw, "job")
    whole: list[float] = []
    alone: list[float] = []
    for _ in range(runs):  # taken in turns, so a busy machine slows both alike
        whole.append(_timed(lambda: _whole_spec_again(spec, raw)))
        alone.append(_timed(lambda: validate_job(spec, raw, "job")))
    return JobBenchResult(
        len(spec.nodes),
        runs,
        statistics.median(whole),
        min(whole),
        statistics.median(alone),
        min(alone),
    )
