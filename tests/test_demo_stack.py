"""`make demo` deploys a committed Pulumi stack, `demo`: the dev stack with trainmaster's
controllers and the trainmaster-image job placed on the real nodes, and nothing else."""

from __future__ import annotations

import re

import yaml

from tests.helpers import ROOT, STACKS
from trainmaster.drill import placed_on_real_nodes
from trainmaster.drill._stack import pulumi_stack_spec
from trainmaster.spec import load_spec


def test_the_demo_stack_is_the_dev_stack_placed_on_the_real_nodes() -> None:
    dev = yaml.safe_load((STACKS / "dev" / "cluster.yaml").read_text())
    demo = yaml.safe_load((STACKS / "demo" / "cluster.yaml").read_text())
    placed, moved = placed_on_real_nodes(dev, load_spec(STACKS / "dev" / "cluster.yaml")
                                         .image.reference)
    assert moved == ["dp-example"]
    assert demo == placed, ("stacks/demo/cluster.yaml must be stacks/dev/cluster.yaml plus "
                            "the real-node placement (trainmaster.drill.placed_on_real_nodes)")


def test_make_demo_runs_pulumi_up_on_the_demo_stack() -> None:
    assert pulumi_stack_spec(ROOT, "demo") == ROOT / "stacks" / "demo" / "cluster.yaml"
    recipe = (ROOT / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"trainmaster demo --stack demo\b", recipe)
