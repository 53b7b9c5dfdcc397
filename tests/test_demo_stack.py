"""`make demo` deploys a committed Pulumi stack, `demo`: the dev stack with trainmaster's
controllers and the torch-image job placed on the real nodes, plus that job (lm, the
headline: examples/transformer under torchrun), and nothing else."""

from __future__ import annotations

import re

import yaml

from tests.helpers import ROOT, STACKS
from trainmaster.drill import placed_on_real_nodes
from trainmaster.drill._stack import pulumi_stack_spec
from trainmaster.image import torch_reference
from trainmaster.spec import load_spec

HEADLINE = "lm"


def test_the_demo_stack_is_the_dev_stack_placed_on_the_real_nodes() -> None:
    dev = yaml.safe_load((STACKS / "dev" / "cluster.yaml").read_text())
    demo = yaml.safe_load((STACKS / "demo" / "cluster.yaml").read_text())
    torch_image = torch_reference(load_spec(STACKS / "dev" / "cluster.yaml").image.reference)
    [headline] = [j for j in demo["jobs"] if j["name"] == HEADLINE]
    dev["jobs"].append(headline)
    placed, moved = placed_on_real_nodes(dev, torch_image)
    assert moved == [HEADLINE]
    assert demo == placed, ("stacks/demo/cluster.yaml must be stacks/dev/cluster.yaml plus "
                            "the job lm, with the real-node placement "
                            "(trainmaster.drill.placed_on_real_nodes)")


def test_the_headline_job_is_the_transformer_under_torchrun_reading_the_demo_dataset() -> None:
    spec = load_spec(STACKS / "demo" / "cluster.yaml")
    [job] = [j for j in spec.jobs if j.name == HEADLINE]
    assert job.image == torch_reference(spec.image.reference)
    assert job.launcher == "torchrun"
    assert job.command[-1].endswith("examples/transformer/train.py")
    assert job.datasets == ["tinystories"]
    # The other jobs on the real nodes would compete with it for their whole nodes.
    assert [j.name for j in spec.jobs if j.node_selector] == [HEADLINE]


def test_make_demo_runs_pulumi_up_on_the_demo_stack() -> None:
    assert pulumi_stack_spec(ROOT, "demo") == ROOT / "stacks" / "demo" / "cluster.yaml"
    recipe = (ROOT / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"trainmaster demo --stack demo\b", recipe)
