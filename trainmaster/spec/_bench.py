"""How fast a large spec validates: generate one with an explicit node list (the worst case
for the parser and the semantic checks) and time load_spec_text on it."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import yaml

from trainmaster.spec._load import load_spec_text


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
        "apiVersion": "trainmaster.io/v1alpha1",
        "kind": "TrainingCluster",
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
