"""deploy.cluster.netns's pure plan (names, addresses, subnet choice, rules) and its place in the
supervisor's state file. The I/O half is exercised by tests/integration/cli/
test_cli_cluster_netns.py on real namespaces."""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from pathlib import Path

import pytest

from deploy.cluster.netns import (
    IFNAMSIZ,
    NetnsError,
    NetworkPlan,
    cut_rules,
    exec_prefix,
    plan_network,
)
from deploy.cluster.state import ClusterState, NodeRecord, read_state, write_state

NODES = ["controller-3001", "controller-3002", "broker-1", "broker-2"]


def test_names_come_from_the_cluster_dir_and_fit_linux_limits(tmp_path: Path) -> None:
    nodes = [f"broker-{i}" for i in range(1, 251)]
    plan = plan_network(tmp_path / "a", nodes)
    assert plan == plan_network(tmp_path / "a", nodes)  # the same dir, the same plan
    assert plan.prefix != plan_network(tmp_path / "b", nodes).prefix
    assert plan.prefix.startswith("tk") and len(plan.prefix) == 8
    names = [plan.bridge, *(plan.veth_host(n) for n in nodes), *(plan.veth_node(n) for n in nodes)]
    assert all(len(name) <= IFNAMSIZ and name.startswith(plan.prefix) for name in names)
    assert len(set(names)) == len(names)
    assert plan.namespace("broker-7") == f"{plan.prefix}-broker-7"
    assert exec_prefix(plan, "broker-7") == ["ip", "netns", "exec", f"{plan.prefix}-broker-7"]


def test_addresses_host_first_then_one_per_node_in_order(tmp_path: Path) -> None:
    plan = plan_network(tmp_path, NODES)
    net = plan.network
    assert net.prefixlen == 24 and net.subnet_of(ipaddress.IPv4Network("10.192.0.0/10"))
    assert int(net.network_address) >> 16 & 0xFF >= 200  # 10.200.0.0 .. 10.255.255.0
    assert plan.host_address == str(net.network_address + 1)
    assert [plan.address(n) for n in NODES] == [str(net.network_address + i) for i in (2, 3, 4, 5)]


def test_the_subnet_avoids_the_hosts_networks(tmp_path: Path) -> None:
    first = plan_network(tmp_path, NODES)
    taken = [first.network, ipaddress.IPv4Network("10.0.0.0/8")]
    with pytest.raises(NetnsError, match="in use"):
        plan_network(tmp_path, NODES, taken)
    other = plan_network(tmp_path, NODES, [first.network])
    assert not other.network.overlaps(first.network)
    assert other.prefix == first.prefix


def test_bad_node_lists_and_unknown_nodes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(NetnsError, match="at least one"):
        plan_network(tmp_path, [])
    with pytest.raises(NetnsError, match="repeat"):
        plan_network(tmp_path, ["broker-1", "broker-1"])
    with pytest.raises(NetnsError, match="at most 250"):
        plan_network(tmp_path, [f"b{i}" for i in range(251)])
    with pytest.raises(NetnsError, match="no node 'broker-9'"):
        plan_network(tmp_path, NODES).address("broker-9")


def test_cut_rules_drop_the_peer_and_its_extra_endpoints_both_ways(tmp_path: Path) -> None:
    plan = plan_network(tmp_path, NODES)
    peer = plan.address("broker-2")
    assert cut_rules(plan, "broker-2", {}) == [
        ["-A", "INPUT", "-s", peer, "-j", "DROP"],
        ["-A", "OUTPUT", "-d", peer, "-j", "DROP"],
    ]
    rules = cut_rules(plan, "broker-2", {"broker-2": [(plan.host_address, 19092)],
                                         "broker-1": [(plan.host_address, 19091)]})  # fmt: skip
    assert rules[2:] == [
        ["-A", "OUTPUT", "-p", "tcp", "-d", plan.host_address, "--dport", "19092", "-j", "DROP"],
        ["-A", "INPUT", "-p", "tcp", "-s", plan.host_address, "--sport", "19092", "-j", "DROP"],
    ]


def test_the_state_file_keeps_the_plan_and_the_cuts(tmp_path: Path) -> None:
    plan = plan_network(tmp_path, ["zookeeper", "broker-1"])
    assert NetworkPlan.from_dict(plan.to_dict()) == plan
    node = NodeRecord(name="broker-1", node_id=1, host=plan.address("broker-1"), port=9092,
                      dir=str(tmp_path), log=str(tmp_path / "broker.log"))  # fmt: skip
    state = ClusterState(dir=str(tmp_path), zookeeper=None, brokers=(node,), network=plan,
                         cuts=(("broker-1", "zookeeper"),))  # fmt: skip
    write_state(state)
    assert read_state(tmp_path) == state
    write_state(replace(state, network=None, cuts=()))
    assert read_state(tmp_path).network is None
