"""The elastic launcher's settings and per-round start, pure: TRAINMASTER_ELASTIC parsed
(bad values name the variable), peers' names derived from MASTER_ADDR, torchrun's
elastic env per rank, the resume arguments rewritten for the round's checkpoint, and the
sticky leader."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmaster.launch._elastic import ElasticConfig, ElasticError, rank_env, round_command
from trainmaster.launch._rendezvous import Round, leader_of

ENV = {"TRAINMASTER_ELASTIC": "1:3",
       "MASTER_ADDR": "dp-example-r2-0.dp-example.trainmaster.svc", "MASTER_PORT": "29500",
       "TRAINMASTER_GANG_UID": "uid-1"}


def test_peers_are_the_indexed_jobs_pod_names_under_the_headless_service() -> None:
    config = ElasticConfig.from_env(ENV, 1)
    assert config is not None
    assert (config.min_nodes, config.max_nodes, config.port) == (1, 3, 29400)
    assert config.address(2) == ("dp-example-r2-2.dp-example.trainmaster.svc", 29400)
    assert ElasticConfig.from_env({}, 0) is None  # a rigid gang


@pytest.mark.parametrize(("env", "names"), [
    ({"TRAINMASTER_ELASTIC": "3:1"}, "TRAINMASTER_ELASTIC"),
    ({"TRAINMASTER_ELASTIC": "two"}, "TRAINMASTER_ELASTIC"),
    ({"TRAINMASTER_RDZV_PORT": "x"}, "TRAINMASTER_RDZV_PORT"),
    ({"MASTER_ADDR": "head.svc"}, "TRAINMASTER_RDZV_HOST"),
])
def test_bad_settings_name_the_variable(env: dict[str, str], names: str) -> None:
    with pytest.raises(ElasticError, match=names):
        ElasticConfig.from_env({**ENV, **env}, 0)


def test_an_index_outside_the_range_is_refused() -> None:
    with pytest.raises(ElasticError, match="index 3"):
        ElasticConfig.from_env(ENV, 3)


def test_each_rank_gets_torchruns_elastic_env_with_the_leader_as_master() -> None:
    config = ElasticConfig.from_env(ENV, 2)
    assert config is not None
    env = rank_env(config, Round(4, (1, 2)), "leader-host")
    assert env["RANK"] == env["GROUP_RANK"] == "1" and env["WORLD_SIZE"] == "2"
    assert env["LOCAL_RANK"] == "0" and env["LOCAL_WORLD_SIZE"] == "1"
    assert env["MASTER_ADDR"] == "leader-host" and env["MASTER_PORT"] == "29500"
    assert env["TORCHELASTIC_RESTART_COUNT"] == "3"
    assert env["TORCHELASTIC_RUN_ID"] == "uid-1"


def test_the_resume_arguments_are_rewritten_for_the_rounds_checkpoint(tmp_path: Path) -> None:
    env = {"TRAINMASTER_RESUME_FROM": str(tmp_path / "step-20"),
           "TRAINMASTER_RESUME_ARGS": f"--resume-from={tmp_path / 'step-20'}",
           "TRAINMASTER_RESUME_TEMPLATE": "--resume-from={path}"}
    command = ["python", "train.py", f"--resume-from={tmp_path / 'step-20'}"]
    new, out = round_command(command, env, str(tmp_path / "step-60"), tmp_path)
    assert new == ["python", "train.py", f"--resume-from={tmp_path / 'step-60'}"]
    assert out["TRAINMASTER_RESUME_FROM"] == str(tmp_path / "step-60")
    # From the start: no resume arguments at all.
    assert round_command(["python", "train.py"], {"TRAINMASTER_RESUME_TEMPLATE":
                                                  "--resume-from={path}"}, "", tmp_path)[0] \
        == ["python", "train.py"]


def test_the_leader_stays_with_rank_0_while_it_answers() -> None:
    held = Round(2, (1, 0, 2))
    assert leader_of({0: held, 1: held, 2: held}, {0, 1, 2}) == 1
    assert leader_of({0: held, 2: held}, {0, 2}) == 0  # rank 0's launcher is gone
    assert leader_of({0: None, 1: None}, {0, 1}) == 0  # no round yet: the lowest index
