"""The failover timeline in the processes' JSON logs (protocol.telemetry.LOG_EVENTS), both modes.

A real 3-broker cluster, a topic of 3 partitions with 3 replicas (each broker leads one and
follows two). SIGKILL the leader of a partition (not the controller's broker in ZK mode: a new
ZK controller loads a registry the dead broker already left, so nothing there detects it) and
find, in the JSON log files, the chain analytics builds failovers from:

    "broker failure detected" (the active controller; reason process_dead: the fast fencing
                               found the process gone, before its znode / session went)
    -> "leader election" of that partition, cause offline, previous leader the dead broker
    -> "partition leadership applied" on the new leader, as leader, in the elected epoch

with non-decreasing timestamps, and "isr shrink" on the leader of a partition the dead broker
only followed (the controller took it out of the ISR). Every catalogued event logged on the way
is checked against the catalogue (fields, types, allowed values), and each process's events
carry its role and node id.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tests.integration.cluster.conftest import ClusterFactory
from tests.integration.cluster.test_cluster_failover import create_topic
from tests.support.cluster import Cluster, RaftCluster
from tests.support.log_events import assert_schema
from tests.support.waiting import wait_until

TOPIC = "timeline"
Event = Mapping[str, Any]


def ts(event: Event) -> datetime:
    return datetime.fromisoformat(event["timestamp"])


def all_events(cluster: Cluster) -> list[Event]:
    procs: list[Any] = list(cluster.brokers.values())
    if isinstance(cluster, RaftCluster):
        procs += list(cluster.controllers.values())
    return [e for p in procs for e in p.events()]


def find_chain(events: list[Event], dead: int, pid: int, new_leader: int) -> list[Event] | None:
    """[failure, election, applied] as described above, or None while incomplete."""
    failures = [
        e for e in events if e.get("event") == "broker failure detected" and e["broker_id"] == dead
    ]
    elections = [
        e
        for e in events
        if e.get("event") == "leader election"
        and (e["topic"], e["partition"], e["previous_leader"]) == (TOPIC, pid, dead)
    ]
    if not failures or not elections:
        return None
    election = elections[0]
    applied = [
        e
        for e in events
        if e.get("event") == "partition leadership applied"
        and e.get("node_id") == new_leader
        and (e["topic"], e["partition"], e["leader_epoch"])
        == (TOPIC, pid, election["leader_epoch"])
    ]
    return [failures[0], election, applied[0]] if applied else None


async def test_sigkilled_leader_leaves_the_failover_chain_in_the_logs(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3)
    await cluster.wait_ready()
    await create_topic(cluster, TOPIC, 3)
    controller = await cluster.controller_id()
    leaders = {p: (await cluster.partition(TOPIC, p)).leader for p in range(3)}
    pid = next(p for p, leader in leaders.items() if leader != controller)
    dead = leaders[pid]
    followed = [p for p, leader in leaders.items() if leader != dead]
    assert followed, leaders

    await cluster.brokers[dead].akill()
    info = await cluster.wait_partition(TOPIC, pid, lambda i: i.leader not in (-1, dead), within=30)
    new_leader = info.leader

    chain: list[Event] | None = None

    def chain_found() -> bool:
        nonlocal chain
        chain = find_chain(all_events(cluster), dead, pid, new_leader)
        return chain is not None

    await wait_until(chain_found, within=20, every=0.2)
    assert chain is not None
    failure, election, applied = chain
    assert failure["reason"] == "process_dead"
    assert election["cause"] == "offline" and not election["unclean"]
    assert election["leader"] == new_leader and dead not in election["isr"]
    assert applied["role_in_partition"] == "leader" and applied["role"] == "broker"
    # The controller logs an election once its records committed, and the same Raft round
    # may reach a broker's observer first (the driver sends before it applies): the new
    # leader's "applied" can precede the election's line by a fraction of a millisecond.
    assert ts(failure) <= ts(election) and ts(failure) <= ts(applied), chain
    # Failure and election come from the same process: the active controller.
    assert (failure["role"], failure.get("node_id")) == (election["role"], election.get("node_id"))
    if cluster.mode == "raft":
        assert failure["role"] == "controller"

    def shrinks() -> list[Event]:
        return [
            e
            for e in all_events(cluster)
            if e.get("event") == "isr shrink"
            and e["topic"] == TOPIC
            and e["partition"] in followed
            and dead in e["old_isr"]
            and dead not in e["new_isr"]
        ]

    await wait_until(lambda: bool(shrinks()), within=20, every=0.2)
    shrink = shrinks()[0]
    assert shrink["origin"] == "controller" and shrink["node_id"] == leaders[shrink["partition"]]
    assert ts(shrink) >= ts(failure)

    events = all_events(cluster)
    assert_schema(events)
    assert all("role" in e for e in events if "event" in e)
    processed = [e for e in events if e.get("event") == "controller event processed"]
    assert any(e["event_type"] == "FenceDeadBroker" for e in processed)
    assert not [e for e in processed if e["event_type"] in ("BrokerHeartbeat", "WriteNoOp")]
