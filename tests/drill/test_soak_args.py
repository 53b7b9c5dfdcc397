"""`trainmaster drill soak`'s arguments and the spec copy it starts (no cluster needed)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tests.helpers import STACKS
from trainmaster.cli import app
from trainmaster.cluster import ClusterError
from trainmaster.drill import faults_in, soak_spec


@pytest.mark.parametrize(("args", "named"), [
    (["--minutes", "1", "--fault-every", "90"], "--fault-every"),
    (["--minutes", "0"], "--minutes"),
    (["--fault-every", "-5"], "--fault-every"),
    (["--spec", "no/such/cluster.yaml"], "--spec"),
    (["--plot", "soak.svg"], "--plot"),
])
def test_bad_arguments_exit_2_naming_the_option(args: list[str], named: str) -> None:
    out = CliRunner(env={"COLUMNS": "140"}).invoke(app, ["drill", "soak", *args])
    assert out.exit_code == 2, out.output
    assert named in out.output and "Traceback" not in out.output


def test_faults_fall_on_the_schedule_before_the_end() -> None:
    assert faults_in(30, 180) == 9  # at 3, 6, … 27 minutes
    assert faults_in(5, 60) == 4
    assert faults_in(4, 60) == 3
    assert faults_in(1, 90) == 0


def test_the_copy_is_renamed_and_lets_the_job_restart_for_every_fault(tmp_path: Path
                                                                      ) -> None:
    dev = yaml.safe_load(soak_spec(STACKS / "dev" / "cluster.yaml", tmp_path, 9).read_text())
    assert dev["metadata"]["name"] == "dev-soak"
    job = next(j for j in dev["jobs"] if j["name"] == "dp-example")
    assert job["restartPolicy"]["maxRestarts"] == 12
    assert job["hyperParameters"]["trainSteps"] >= 1_000_000
    others = {j["name"]: j for j in yaml.safe_load(
        (STACKS / "dev" / "cluster.yaml").read_text())["jobs"]}
    assert next(j for j in dev["jobs"] if j["name"] == "gpt-small") == others["gpt-small"]
    # stacks/demo: the job it places on the real nodes itself (the torch job lm).
    demo = yaml.safe_load(soak_spec(STACKS / "demo" / "cluster.yaml", tmp_path, 2)
                          .read_text())
    lm = next(j for j in demo["jobs"] if j["name"] == "lm")
    assert lm["restartPolicy"]["maxRestarts"] == 5  # already more than 2 + 3


def test_a_spec_without_a_checkpointed_job_is_refused(tmp_path: Path) -> None:
    doc = yaml.safe_load((STACKS / "dev" / "cluster.yaml").read_text())
    for job in doc["jobs"]:
        job.pop("checkpoint", None)
    path = tmp_path / "in" / "cluster.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ClusterError, match="no job with a checkpoint"):
        soak_spec(path, tmp_path, 3)


def test_elastic_makes_the_torch_job_elastic_one_pod_below_its_size(tmp_path: Path) -> None:
    from trainmaster.spec import load_spec

    out = soak_spec(STACKS / "demo" / "cluster.yaml", tmp_path, 9, elastic=True)
    lm = next(j for j in yaml.safe_load(out.read_text())["jobs"] if j["name"] == "lm")
    assert lm["elastic"] == {"minNodes": 1, "maxNodes": 2} and lm["nodes"] == 2
    assert lm["restartPolicy"]["maxRestarts"] == 12
    # The copy loads: validate's rules (torchrun, no in-place restart) hold for it.
    job = next(j for j in load_spec(out).jobs if j.name == "lm")
    assert job.elastic is not None and (job.elastic.min_nodes, job.elastic.max_nodes) == (1, 2)
    assert job.restart_policy.container_restart == "gang"
    # Without --elastic the torch job stays rigid.
    rigid = soak_spec(STACKS / "demo" / "cluster.yaml", tmp_path, 9)
    assert "elastic" not in next(j for j in yaml.safe_load(rigid.read_text())["jobs"]
                                 if j["name"] == "lm")


@pytest.mark.parametrize(("edit", "named"), [
    (lambda lm: lm.update(launcher="python"), "launcher 'python'"),
    (lambda lm: lm.update(nodes=1), "nodes 1"),
    (lambda lm: lm["restartPolicy"].update(containerRestart="inPlace"), "containerRestart"),
])
def test_elastic_refuses_a_job_it_cannot_make_elastic(
        tmp_path: Path, edit: Callable[[dict[str, Any]], None], named: str) -> None:
    doc = yaml.safe_load((STACKS / "demo" / "cluster.yaml").read_text())
    edit(next(j for j in doc["jobs"] if j["name"] == "lm"))
    path = tmp_path / "in" / "cluster.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ClusterError, match=f"--elastic: job lm .*{named}.*drop --elastic"):
        soak_spec(path, tmp_path, 9, elastic=True)


def test_elastic_is_an_option_of_the_soak() -> None:
    out = CliRunner(env={"COLUMNS": "140"}).invoke(app, ["drill", "soak", "--help"])
    assert out.exit_code == 0 and "--elastic" in out.output
