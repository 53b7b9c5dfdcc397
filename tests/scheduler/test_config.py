"""The runtime reads the ConfigMap the spec renders, and the CLI overrides it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.helpers import STACKS
from trainmaster.scheduler import ConfigError, SchedulerConfig, TopologyMode
from trainmaster.scheduler.cli import _parser, build_config


def test_reads_what_the_spec_renders() -> None:
    from trainmaster.objects._scheduler import scheduler_config
    from trainmaster.spec import load_spec

    config = SchedulerConfig.from_mapping(scheduler_config(load_spec(STACKS / "bench" /
                                                                     "cluster.yaml")))
    assert config.scheduler_name == "trainmaster-scheduler"
    assert config.levels == ("spine", "leaf")
    assert config.bind_concurrency == 128 and config.client_qps == 5000
    # the Lease lives beside the scheduler, in the system namespace (docs/security.md)
    assert config.leader_election.lease_namespace == f"{config.namespace}-system"
    assert config.topology_for(1).level == "node"
    assert config.topology_for(1).mode is TopologyMode.REQUIRED
    assert config.topology_for(8).level == "leaf"


def test_unknown_keys_and_bad_values_are_errors() -> None:
    with pytest.raises(ConfigError, match="unknown scheduler config keys: bindConcurency"):
        SchedulerConfig.from_mapping({"bindConcurency": 4})
    with pytest.raises(ConfigError, match="not one of"):
        SchedulerConfig.from_mapping({"topologyPolicy": [{"domain": "rack"}]})
    with pytest.raises(ConfigError, match="leader election"):
        SchedulerConfig.from_mapping({"leaderElection": {"leaseDurationSeconds": 1}})


def test_command_line_overrides_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"schedulerName": "a", "bindConcurrency": 8,
                                    "leaderElection": {"leaseName": "x"}}))
    args = _parser().parse_args(["--config", str(path), "--bind-concurrency", "16",
                                 "--no-leader-elect", "--levels", "pod,rack"])
    config = build_config(args)
    assert config.scheduler_name == "a" and config.bind_concurrency == 16
    assert config.levels == ("pod", "rack")
    assert not config.leader_election.enabled and config.leader_election.lease_name == "x"


def test_queues_of_the_rendered_config_and_their_errors() -> None:
    from trainmaster.objects._scheduler import scheduler_config
    from trainmaster.scheduler import QueueSpec
    from trainmaster.spec import load_spec

    config = SchedulerConfig.from_mapping(scheduler_config(load_spec(STACKS / "prod-example" /
                                                                     "cluster.yaml")))
    assert config.preemption is True and config.default_queue == "default"
    assert config.queues[0] == QueueSpec("pretrain", 768)
    with pytest.raises(ConfigError, match=r"queues\[a\]: unknown keys quota"):
        SchedulerConfig.from_mapping({"queues": [{"name": "a", "quota": 4}]})
    with pytest.raises(ConfigError, match=r"queues\[a\].nominalQuota must be >= 0"):
        SchedulerConfig.from_mapping({"queues": [{"name": "a", "nominalQuota": -1}]})
    with pytest.raises(ConfigError, match="queues repeat a name"):
        SchedulerConfig.from_mapping({"queues": [{"name": "a"}, {"name": "a"}]})


def test_node_selector_from_the_file_and_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"nodeSelector": {"pool": "a"}}))
    assert build_config(_parser().parse_args(["--config", str(path)])).node_selector == {
        "pool": "a"}
    args = _parser().parse_args(["--config", str(path), "--node-selector", "pool=b,x=y"])
    assert build_config(args).node_selector == {"pool": "b", "x": "y"}
    with pytest.raises(ConfigError, match="use key=value"):
        build_config(_parser().parse_args(["--node-selector", "pool"]))
