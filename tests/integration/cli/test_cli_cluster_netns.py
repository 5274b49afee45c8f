"""`trioka cluster up --netns`: every process in its own network namespace; `partition`,
`heal` and `status` cut, restore and list the cuts; `down` leaves no namespace, veth or bridge.
Real processes, real iptables rules in the nodes' namespaces, both metadata modes."""

from __future__ import annotations

import json
import subprocess
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any

import pytest
import trio

from client import Admin
from client.metadata import PartitionInfo
from deploy.cluster import netns
from deploy.cluster.layout import plan_cluster_network
from deploy.cluster.network import probe_nodes
from deploy.cluster.supervisor import (
    ClusterError,
    cluster_up,
    describe_cluster,
    read_state,
)
from tests.integration.cli.test_cli_cluster import _pid_alive
from tests.integration.cli.test_cli_commands import one_error_line, trioka
from tests.support.waiting import eventually

WHY_NOT = netns.available()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"no network namespaces: {WHY_NOT}")


def _topic(bootstrap: str, name: str) -> dict[int, PartitionInfo]:
    async def go() -> dict[int, PartitionInfo]:
        props = {"bootstrap.servers": bootstrap, "default.api.timeout.ms": 5000,
                 "request.timeout.ms": 5000}  # fmt: skip
        async with Admin(props) as admin:
            (description,) = await admin.describe_topics([name])
            return {p.partition: p for p in description.partitions}

    return trio.run(go)


def _status(cluster_dir: Path) -> dict[str, Any]:
    result = trioka("cluster", "status", "--dir", str(cluster_dir), "--json")
    assert result.returncode == 0, result.stderr.decode()
    status: dict[str, Any] = json.loads(result.stdout)
    return status


def _leftovers(prefix: str) -> list[str]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names += [line.split(":")[1].strip().split("@")[0] for line in links.splitlines()]
    return [n for n in names if n.startswith(prefix)]


def _ok(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


@pytest.mark.parametrize("mode", ["raft", "zk"])
def test_netns_cluster_round_trip_partition_heal_isolate_down(tmp_path: Path, mode: str) -> None:
    """Raft mode comes up through `trioka cluster up --netns`, ZK mode through cluster_up(...,
    network=plan_cluster_network(...), broker_overrides=...). A produce/consume round trip from the host; a follower
    cut from its leader leaves the ISR (probe: cut) and rejoins after heal; a broker isolated
    from ZooKeeper / the controllers past its session is expired / fenced and loses its
    leadership, and is back after heal; `down` removes the whole network."""
    cluster_dir = tmp_path / "c"
    d = ("--dir", str(cluster_dir))
    prefix = ""
    try:
        if mode == "raft":
            _ok(trioka("cluster", "up", *d, "--netns", "--brokers", "3", "--controllers", "3",
                       "--session-timeout-ms", "3000", "--override",
                       "replica.lag.time.max.ms=3000", timeout=120))  # fmt: skip
        else:
            planned = plan_cluster_network(cluster_dir, mode="zk", brokers=3)
            cluster_up(cluster_dir, mode="zk", brokers=3, network=planned, session_timeout_ms=3000,
                       overrides=["replica.lag.time.max.ms=3000"],
                       broker_overrides={1: ["broker.rack=r1"]}, timeout=90)  # fmt: skip
            assert read_state(cluster_dir).network == planned
        state = read_state(cluster_dir)
        assert state.network is not None
        prefix = state.network.prefix
        addresses = [IPv4Address(n.host) for n in state.nodes]
        assert len(set(addresses)) == len(addresses)
        assert all(a in state.network.network for a in addresses)
        assert IPv4Address(state.network.host_address) not in addresses
        bootstrap = state.bootstrap
        report = eventually(lambda: trio.run(describe_cluster, bootstrap),
                             lambda r: len(r.brokers) == 3, "3 live brokers")  # fmt: skip
        if mode == "zk":  # the per-broker override reached broker 1 only
            assert {b.node_id: b.rack for b in report.brokers} == {1: "r1", 2: None, 3: None}

        # A round trip from the host, through the bridge.
        _ok(trioka("topic", "create", "t", "-b", bootstrap, "--partitions", "3",
                   "--replication-factor", "3"))  # fmt: skip
        values = [f"v{i}" for i in range(30)]
        _ok(trioka("produce", "t", "-b", bootstrap, "--acks", "all", stdin="\n".join(values)))
        consumed = _ok(trioka("consume", "t", "-b", bootstrap, "--from-beginning",
                              "--timeout-ms", "3000", timeout=60))  # fmt: skip
        assert sorted(consumed.split()) == sorted(values)

        # A follower cut from its leader leaves the ISR; heal brings it back.
        p0 = eventually(lambda: _topic(bootstrap, "t")[0], lambda p: len(p.isr) == 3, "ISR 3")
        # Not the ZK-mode controller broker: cut from it, the leader could not ask for the shrink.
        controller = trio.run(describe_cluster, bootstrap).controller_id
        leader = p0.leader
        follower = next(r for r in p0.replicas if r not in (leader, controller))
        third = next(r for r in p0.replicas if r not in (leader, follower))
        _ok(trioka("cluster", "partition", str(follower), "--from", str(leader), *d))
        assert not probe_nodes(cluster_dir, follower, leader)
        assert not probe_nodes(cluster_dir, leader, follower)
        assert probe_nodes(cluster_dir, follower, third)  # only that pair is cut
        assert _status(cluster_dir)["cuts"] == [sorted([f"broker-{follower}", f"broker-{leader}"])]
        # As in Kafka, a follower at the leader's end offset counts as caught up however long
        # it stays silent: the leader needs a new record to see it fall behind.
        _ok(trioka("produce", "t", "-b", bootstrap, "--partition", "0", "--acks", "1",
                   stdin="after the cut"))  # fmt: skip
        # Asked of the leader: a broker cut from the ZK-mode controller keeps stale metadata.
        at_leader = f"{state.broker(leader).host}:{state.broker(leader).port}"
        eventually(lambda: _topic(at_leader, "t")[0], lambda p: follower not in p.isr,
                    "the ISR shrink")  # fmt: skip
        _ok(trioka("cluster", "heal", *d))
        assert probe_nodes(cluster_dir, follower, leader)
        assert _status(cluster_dir)["cuts"] == []
        eventually(lambda: _topic(at_leader, "t")[0], lambda p: len(p.isr) == 3, "the ISR expand")

        # A broker cut from the metadata quorum / ZooKeeper past its session loses its place.
        controller = trio.run(describe_cluster, bootstrap).controller_id
        leaders = {p.leader: n for n, p in _topic(bootstrap, "t").items()}
        victim = next(b for b in (1, 2, 3) if b in leaders and (mode == "raft" or b != controller))
        partition = leaders[victim]
        others = ",".join(f"{b.host}:{b.port}" for b in state.brokers if b.node_id != victim)
        metadata_nodes = ["0"] if mode == "zk" else ["3001", "3002", "3003"]
        _ok(trioka("cluster", "partition", str(victim), "--from", *metadata_nodes, *d))
        if mode == "zk":
            assert not probe_nodes(cluster_dir, victim, 0)
        eventually(lambda: trio.run(describe_cluster, others),
                    lambda r: victim not in [b.node_id for b in r.brokers],
                    f"broker {victim} leaving the live brokers")  # fmt: skip
        eventually(lambda: _topic(others, "t")[partition],
                    lambda p: p.leader not in (victim, -1), "the leadership moving")  # fmt: skip
        _ok(trioka("cluster", "heal", *d))
        eventually(lambda: trio.run(describe_cluster, others),
                    lambda r: victim in [b.node_id for b in r.brokers],
                    f"broker {victim} rejoining")  # fmt: skip
        eventually(
            lambda: _topic(bootstrap, "t"),
            lambda ps: all(len(p.isr) == 3 for p in ps.values()),
            "every ISR whole",
        )

        # A restart keeps the node in its namespace, on its address.
        _ok(trioka("cluster", "restart", str(victim), *d, timeout=120))
        eventually(lambda: trio.run(describe_cluster, bootstrap),
                    lambda r: len(r.brokers) == 3, "3 live brokers after the restart")  # fmt: skip

        pids = [n.pid for n in read_state(cluster_dir).nodes]
        _ok(trioka("cluster", "down", *d, timeout=120))
        assert not any(_pid_alive(pid) for pid in pids)
        assert _leftovers(prefix) == []
        assert _status(cluster_dir)["network"]["prefix"] == prefix
        if mode == "raft":  # `up` on the stopped cluster makes the network again
            assert _ok(trioka("cluster", "up", *d, timeout=120)).strip() == bootstrap
            assert _leftovers(prefix)
            _ok(trioka("cluster", "down", *d, timeout=120))
            assert _leftovers(prefix) == []
    finally:
        if (cluster_dir / "cluster.json").exists():
            trioka("cluster", "down", *d, "--timeout", "5", timeout=120)
        if prefix and _leftovers(prefix):
            netns.destroy(read_state(cluster_dir).network)  # type: ignore[arg-type]


def test_partition_refuses_a_cluster_without_namespaces_and_bad_sides(tmp_path: Path) -> None:
    node = {"host": "127.0.0.1", "port": 1, "dir": str(tmp_path), "log": str(tmp_path / "x.log")}
    (tmp_path / "cluster.json").write_text(
        json.dumps({"dir": str(tmp_path), "mode": "raft", "zookeeper": None,
                    "brokers": [{**node, "name": "broker-1", "node_id": 1}],
                    "controllers": [{**node, "name": "controller-3001", "node_id": 3001}]})
    )  # fmt: skip
    d = ("--dir", str(tmp_path))
    assert "--netns" in one_error_line(trioka("cluster", "partition", "1", "--from", "3001", *d))
    assert "--netns" in one_error_line(trioka("cluster", "heal", *d))
    assert "--from" in one_error_line(trioka("cluster", "partition", "1", "3001", *d))


def test_cluster_up_refuses_overrides_for_unknown_brokers(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match=r"brokers \[4\]"):
        cluster_up(tmp_path, brokers=3, broker_overrides={4: ["broker.rack=r"]})
    wrong = netns.plan_network(tmp_path, ["zookeeper", "broker-1"])
    with pytest.raises(ClusterError, match="network plan is for nodes"):
        cluster_up(tmp_path, brokers=2, mode="zk", network=wrong)
    with pytest.raises(Exception, match=r"no\.such\.key"):
        cluster_up(tmp_path, brokers=1, controllers=1, broker_overrides={1: ["no.such.key=1"]})
    assert not (tmp_path / "cluster.json").exists()
