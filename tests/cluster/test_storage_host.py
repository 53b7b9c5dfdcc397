"""The host's address on a slot's storage network (trainmaster/cluster/_storage_host.py):
where the S3 server of a cluster with real nodes listens. The address, its routing and its
removal run for real in tests/cluster/test_real_storage_traffic.py."""

from __future__ import annotations

import ipaddress

import pytest

from tests.helpers import small_spec_doc
from trainmaster.cluster import storage_server_address
from trainmaster.cluster._storage_host import host_address, table
from trainmaster.spec import validate_data


def test_each_slot_gets_its_own_address_at_the_top_of_the_subnet() -> None:
    addresses = [host_address("10.200.0.0/20", slot) for slot in range(16)]
    assert addresses[0] == "10.200.15.254"  # the last usable address
    assert addresses[15] == "10.200.15.239"
    assert len(set(addresses)) == 16
    assert all(ipaddress.ip_address(a) in ipaddress.ip_network("10.200.0.0/20")
               for a in addresses)
    assert len({table(slot) for slot in range(16)}) == 16


def test_a_spec_without_a_storage_network_has_no_storage_server_address() -> None:
    doc = small_spec_doc("c")
    assert storage_server_address(validate_data(doc, "test"), 3) is None
    doc["networks"]["storage"] = {"subnet": "10.201.0.0/24", "mtu": 9000, "interface": "eth1"}
    assert storage_server_address(validate_data(doc, "test"), 3) == "10.201.0.251"


@pytest.mark.parametrize("subnet", ["10.200.0.0/20", "192.168.7.0/24"])
def test_the_address_is_not_the_broadcast_or_network_address(subnet: str) -> None:
    net = ipaddress.ip_network(subnet)
    address = ipaddress.ip_address(host_address(subnet, 0))
    assert address not in (net.network_address, net.broadcast_address)
