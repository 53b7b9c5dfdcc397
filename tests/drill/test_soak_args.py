"""`trainmaster drill soak`'s arguments and the spec copy it starts (no cluster needed)."""

from __future__ import annotations

from pathlib import Path

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
