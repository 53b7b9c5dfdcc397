"""A commented starter spec from a few answers (`trainmaster init`): the switch tree, the
node's GPUs, the compute fabric and its rails, and one queue per team.

The text is written by hand, not dumped, so that it carries comments saying what each
section is for and where to read more; `tests/cli/test_init.py` checks that what it writes
passes `validate`, `policy check`, `plan` and `simulate` for many shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainmaster.api import API_VERSION

FABRICS = ("infiniband", "roce")
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
"""A pinned image (the `image-pinned` policy refuses :latest)."""


@dataclass(frozen=True)
class StarterShape:
    """The answers `trainmaster init` asks for."""

    name: str = "lab"
    spines: int = 1
    leaves_per_spine: int = 4
    nodes_per_leaf: int = 8
    gpus: int = 8
    fabric: str = "infiniband"
    rails: int = 8
    storage: bool = True
    teams: tuple[str, ...] = ("research",)

    @property
    def nodes(self) -> int:
        return self.spines * self.leaves_per_spine * self.nodes_per_leaf

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus

    def quotas(self) -> list[int]:
        """Each team's GPU quota: the cluster split evenly, the remainder to the first."""
        share, rest = divmod(self.total_gpus, len(self.teams))
        return [share + (rest if i == 0 else 0) for i in range(len(self.teams))]


def _rail_subnet(i: int) -> str:
    # One /16 per rail (room for 65,534 nodes), clear of the storage network's 10.200/16.
    return f"10.{100 + i}.0.0/16"


def starter_spec(shape: StarterShape) -> str:
    """The spec's YAML text, with comments."""
    s = shape
    job_nodes = min(2, s.nodes_per_leaf)
    lines = [
        f"# {s.name}: a starter spec written by `trainmaster init` "
        f"({s.spines} spine(s) x {s.leaves_per_spine} leaves x {s.nodes_per_leaf} nodes x "
        f"{s.gpus} GPUs = {s.total_gpus} GPUs).",
        "# Every field is described in docs/spec.md; check it with",
        "#   trainmaster validate FILE && trainmaster policy check FILE",
        f"apiVersion: {API_VERSION}",
        "kind: TrainingCluster",
        "metadata:",
        f"  name: {s.name}",
        "  namespace: trainmaster        # where the jobs run; the scheduler and operator "
        "run in <namespace>-system",
        "topology:",
        "  levels: [spine, leaf]          # switch levels, top first; the last is the leaf",
        "  node:                          # the hardware of every node: edit to yours",
        f"    gpus: {s.gpus}",
        f"    nics: {s.rails}                        # RDMA NICs, one per compute rail",
        "    cpu: 128",
        "    memory: 2048Gi",
        "    localDisk: 15Ti               # node-local NVMe; holds the dataset cache",
        "  generate:                      # a regular tree; `switches:` lists one by hand",
        f"    switchesPerLevel: [{s.spines}, {s.leaves_per_spine}]    "
        f"# {s.spines} spine(s), each with {s.leaves_per_spine} leaves",
        f"    nodesPerLeaf: {s.nodes_per_leaf}",
        "networks:",
        "  compute:                       # the RDMA network: one subnet per rail",
        f"    fabric: {s.fabric}",
    ]
    if s.fabric == "roce":
        lines.append("    lossless: {pfcPriority: 3, ecn: true, gidIndex: 3}   "
                     "# RoCE needs lossless settings: your switches' values")
    lines.append("    rails:")
    lines += [f"      - {{subnet: {_rail_subnet(i)}}}" for i in range(s.rails)]
    if s.storage:
        lines += ["  storage:                       # shared storage, kept off the compute "
                  "rails",
                  "    subnet: 10.200.0.0/16"]
    lines += [
        "scheduler:",
        "  # One queue per team, in one cohort: each may borrow what the others leave idle,",
        "  # and takes it back by preemption when it needs it (docs/scheduler.md). A job",
        "  # names its queue in `queue:`; there is no `default` queue, so a job without",
        "  # `queue:` is refused by `trainmaster validate`.",
        "  fairSharing: {enable: true}    # borrowers share by weight (Kueue's fair sharing)",
        "  queues:",
    ]
    for team, quota in zip(s.teams, shape.quotas(), strict=True):
        lines.append(f"    - {{name: {team}, nominalQuota: {quota}, cohort: teams, "
                     f"fairSharing: {{weight: 1}}}}")
    lines += [
        "cache:                           # the node-local dataset cache (docs/datasets.md)",
        "  capacity: 10Ti                 # per node; at most the node's localDisk",
        "  datasets: []",
        "  # datasets:",
        "  #   - {name: corpus, source: \"s3://my-bucket/corpus\", size: 2Ti}",
        "jobs:",
        "  # Each job runs as a gang of `nodes` pods, one per node, restarted from its",
        "  # latest checkpoint when a pod, a GPU or a NIC fails (docs/operator.md).",
        "  - name: example",
        f"    image: {IMAGE}   # pinned: a restarted gang gets the same image",
        "    launcher: torchrun",
        f"    nodes: {job_nodes}",
        f"    gpusPerPod: {s.gpus}                  # multi-node jobs take whole nodes",
        "    command: [python, train.py]",
        f"    queue: {s.teams[0]}",
        "    checkpoint: {volume: checkpoints, path: /checkpoints/example}",
        "    restartPolicy: {maxRestarts: 10}",
        "    topology: {domain: leaf, mode: required}   # all pods under one leaf switch",
    ]
    return "\n".join(lines) + "\n"
