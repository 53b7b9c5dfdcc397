"""`trainmaster launch` points gloo (and NCCL without RDMA devices) at the rail interfaces,
found by their addresses in the spec's rail subnets, whatever they are called."""

from __future__ import annotations

from pathlib import Path

from trainmaster.launch._rails import (
    has_rdma_devices,
    interface_addresses,
    rail_env,
    rail_interfaces,
)

ADDRS = {"lo": "127.0.0.1", "eth0": "10.244.0.5", "net2": "10.100.16.7", "net1": "10.100.0.9",
         "storage0": "10.200.0.3"}
ENV = {"TRAINMASTER_RAIL_SUBNETS": "10.100.0.0/20,10.100.16.0/20", "NCCL_SOCKET_IFNAME": "eth0"}


def test_rails_in_the_rails_order_and_nothing_else() -> None:
    assert rail_interfaces(["10.100.0.0/20", "10.100.16.0/20"], ADDRS) == ["net1", "net2"]
    assert rail_interfaces(["10.100.0.0/20"], {"eth0": "10.244.0.5"}) == []


def test_without_rdma_both_libraries_use_the_rails() -> None:
    assert rail_env(ENV, ADDRS, rdma=False) == {"GLOO_SOCKET_IFNAME": "net1,net2",
                                                 "NCCL_SOCKET_IFNAME": "net1,net2"}


def test_with_rdma_nccl_keeps_its_bootstrap_interface_and_uses_the_hcas() -> None:
    assert rail_env(ENV, ADDRS, rdma=True) == {"GLOO_SOCKET_IFNAME": "net1,net2"}


def test_the_jobs_own_settings_win_and_no_rails_changes_nothing() -> None:
    mine = {**ENV, "GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "ib0"}
    assert rail_env(mine, ADDRS, rdma=False) == {}
    assert rail_env(ENV, {"eth0": "10.244.0.5"}, rdma=False) == {}
    assert rail_env({}, ADDRS, rdma=False) == {}


def test_this_hosts_addresses_and_rdma_devices(tmp_path: Path) -> None:
    assert interface_addresses()["lo"] == "127.0.0.1"
    assert not has_rdma_devices(tmp_path)
    (tmp_path / "class" / "infiniband" / "mlx5_0").mkdir(parents=True)
    assert has_rdma_devices(tmp_path)
