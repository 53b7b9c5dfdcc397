"""The NIC agent against fake sysfs trees: port reading, judging, and the condition patch."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from trainmaster.nodeagent import NicVerdict, condition_patch, judge_ports, read_ports
from trainmaster.nodeagent._run import NicAgent, NicAgentConfig


def make_port(root: Path, device: str, port: int = 1, state: str = "4: ACTIVE",
              phys: str = "5: LinkUp", layer: str = "InfiniBand",
              counters: dict[str, int] | None = None) -> None:
    folder = root / "class" / "infiniband" / device / "ports" / str(port)
    (folder / "counters").mkdir(parents=True, exist_ok=True)
    (folder / "state").write_text(state + "\n")
    (folder / "phys_state").write_text(phys + "\n")
    (folder / "link_layer").write_text(layer + "\n")
    (folder / "rate").write_text("400 Gb/sec (4X NDR)\n")
    for name, value in (counters or {}).items():
        (folder / "counters" / name).write_text(f"{value}\n")


def test_reads_states_layers_and_counters(tmp_path: Path) -> None:
    make_port(tmp_path, "mlx5_0", counters={"link_downed": 2, "symbol_error": 7})
    make_port(tmp_path, "mlx5_1", state="1: DOWN", phys="3: Disabled", layer="Ethernet")
    ports = read_ports(tmp_path)
    assert [(p.name, p.state, p.phys_state, p.link_layer) for p in ports] == [
        ("mlx5_0/1", "ACTIVE", "LinkUp", "InfiniBand"),
        ("mlx5_1/1", "DOWN", "Disabled", "Ethernet"),
    ]
    assert ports[0].counters == {"link_downed": 2, "symbol_error": 7}
    assert ports[0].up and not ports[1].up


def test_no_sysfs_tree_means_no_ports(tmp_path: Path) -> None:
    assert read_ports(tmp_path) == []


def test_all_active_is_healthy(tmp_path: Path) -> None:
    make_port(tmp_path, "mlx5_0")
    make_port(tmp_path, "mlx5_1", layer="Ethernet")
    verdict = judge_ports(read_ports(tmp_path), ["mlx5_0", "mlx5_1"])
    assert verdict.healthy and verdict.reason == "PortsActive"
    assert "2 port(s)" in verdict.message


def test_a_down_port_is_unhealthy_and_named(tmp_path: Path) -> None:
    make_port(tmp_path, "mlx5_0")
    make_port(tmp_path, "mlx5_1", state="1: DOWN", phys="2: Polling")
    verdict = judge_ports(read_ports(tmp_path), ["mlx5_0", "mlx5_1"])
    assert not verdict.healthy and verdict.reason == "PortDown"
    assert "mlx5_1/1 DOWN/Polling" in verdict.message


def test_a_missing_rail_device_is_unhealthy(tmp_path: Path) -> None:
    make_port(tmp_path, "mlx5_0")
    verdict = judge_ports(read_ports(tmp_path), ["mlx5_0", "mlx5_1"])
    assert (verdict.healthy, verdict.reason) == (False, "DeviceMissing")
    assert "mlx5_1" in verdict.message


def test_no_devices_at_all_is_unhealthy(tmp_path: Path) -> None:
    assert judge_ports(read_ports(tmp_path)).reason == "NoRdmaDevices"


def test_link_downed_growing_between_looks_is_a_flap(tmp_path: Path) -> None:
    make_port(tmp_path, "mlx5_0", counters={"link_downed": 1})
    agent = NicAgent(NicAgentConfig(node="n", sysfs=tmp_path), kube=None)  # type: ignore[arg-type]
    assert agent.look().healthy  # first look: no history, a counter alone says nothing
    make_port(tmp_path, "mlx5_0", counters={"link_downed": 3})
    second = agent.look()
    assert (second.healthy, second.reason) == (False, "LinkFlapped")
    assert "link_downed +2" in second.message
    assert agent.look().healthy  # stable again


def test_condition_keeps_transition_time_while_status_holds() -> None:
    t0 = datetime(2026, 1, 1, 0, 0, tzinfo=UTC)
    t1 = datetime(2026, 1, 1, 0, 5, tzinfo=UTC)
    ok = NicVerdict(True, "PortsActive", "2 port(s) ACTIVE/LinkUp")
    first = condition_patch([], ok, t0)["status"]["conditions"][0]
    assert first["type"] == "NICHealthy" and first["status"] == "True"
    assert first["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    again = condition_patch([first], ok, t1)["status"]["conditions"][0]
    assert again["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert again["lastHeartbeatTime"] == "2026-01-01T00:05:00Z"
    bad = NicVerdict(False, "PortDown", "1 of 2 port(s) down")
    flipped = condition_patch([again], bad, t1)["status"]["conditions"][0]
    assert (flipped["status"], flipped["lastTransitionTime"]) == ("False", "2026-01-01T00:05:00Z")
