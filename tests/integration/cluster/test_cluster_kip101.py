"""KIP-101's two scenarios on real broker processes and a real ZooKeeper (a follower truncates by
leader epoch, never to its own HW: docs/internals.md, broker/'s "Replica state"), made to happen
on every run by failpoints (deploy/node/failpoints.py) and by waiting for conditions, never by
timing.

Each test runs twice: with truncation by leader epoch (the default) it asserts that no
acknowledged (acks=all) record is lost, that no two replicas hold different records at one
offset (each replica's log is read from its own log dir once every broker is killed), and that a
reader never sees a value that is later gone. With the pre-KIP-101 truncation to the local HW
switched back on (`trioka.replica.truncate.to.hw.on.become.follower=true`) it asserts that the
loss or the divergence does happen: the proof that these tests can fail.

Both modes (`cluster_factory`): the failpoints are the brokers' own (fetcher and follower
state); in Raft mode the killed brokers are fenced after broker.session.timeout.ms and the
partition changes come from the metadata log instead of LeaderAndIsr.
"""

from __future__ import annotations

import pytest
import trio

from client import Consumer, Producer
from client.admin import NewTopic
from protocol.names import TopicPartition
from storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT, read_offsets
from storage.log import Log
from tests.integration.cluster.conftest import ClusterFactory
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from tests.support.wire import records_of

TRUNCATE_TO_HW = "trioka.replica.truncate.to.hw.on.become.follower"
FAILPOINTS = "TRIOKA_FAILPOINTS"

Entries = list[tuple[int, bytes | None]]
"""(offset, value) of every record, in offset order."""


# -- helpers ---------------------------------------------------------------------------------


async def create(cluster: Cluster, topic: str, replicas: list[int]) -> None:
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic(topic, replica_assignment={0: replicas})])
    await cluster.wait_partition(
        topic, 0, lambda p: p.leader == replicas[0] and sorted(p.isr) == sorted(replicas)
    )


async def produce(cluster: Cluster, topic: str, values: list[bytes], acks: str) -> list[int]:
    """Send one by one to the current leader; the offsets they were acknowledged at."""
    async with Producer(
        bootstrap_servers=cluster.live_bootstrap(),
        acks=acks,
        linger_ms=0,
        request_timeout_ms=5000,
        delivery_timeout_ms=30000,
    ) as producer:
        return [
            (await producer.send_and_wait(topic, value, partition=0)).offset for value in values
        ]


async def read_from_leader(cluster: Cluster, topic: str) -> Entries:
    """What a consumer reads from the current leader: every record below its HW."""
    tp = TopicPartition(topic, 0)
    out: Entries = []
    async with Consumer(
        bootstrap_servers=cluster.live_bootstrap(), auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        position = 0
        with trio.fail_after(60):
            while position < end:
                for record in await consumer.poll(1000):
                    out.append((record.offset, record.value))
                    position = record.offset + 1
    return out


def replica_log(broker: BrokerProcess, topic: str) -> Entries:
    """Every record in a (killed) broker's own copy of `topic`-0, read from its log dir."""
    assert not broker.running, "read a replica's files only once its broker is dead"
    the_log = Log.open(broker.log_dir / f"{topic}-0")
    try:
        out: Entries = []
        offset = the_log.log_start_offset
        while offset < the_log.log_end_offset:
            records = records_of(bytes(the_log.read(offset, 1 << 20).data))
            out.extend((r.offset, r.value) for r in records)
            offset = records[-1].offset + 1
        return out
    finally:
        the_log.close()


def divergences(logs: dict[int, Entries]) -> list[tuple[int, dict[int, bytes | None]]]:
    """Offsets at which two replicas hold different records: (offset, {broker: value})."""
    by_offset: dict[int, dict[int, bytes | None]] = {}
    for broker_id, entries in logs.items():
        for offset, value in entries:
            by_offset.setdefault(offset, {})[broker_id] = value
    return [
        (offset, values)
        for offset, values in sorted(by_offset.items())
        if len(set(values.values())) > 1
    ]


async def kill_all_and_read_replicas(
    cluster: Cluster, topic: str, replicas: list[int]
) -> dict[int, Entries]:
    for broker in cluster.brokers.values():
        if broker.running:
            await broker.akill()
    return {i: replica_log(cluster.brokers[i], topic) for i in replicas}


def events_since(broker: BrokerProcess, name: str, start: int) -> list[dict[str, object]]:
    return [e for e in broker.events()[start:] if e.get("event") == name]


def values(entries: Entries) -> list[bytes | None]:
    return [v for _, v in entries]


# -- scenario 1 ------------------------------------------------------------------------------


@pytest.mark.parametrize("truncate_to_hw", [False, True], ids=["by-leader-epoch", "to-local-hw"])
async def test_kip101_scenario1_follower_with_a_lagging_hw_is_elected(
    cluster_factory: ClusterFactory, truncate_to_hw: bool
) -> None:
    """Scenario 1, "high watermark truncation followed by immediate leader election".

    Replicas [1, 2, 3] (1 leads, 2 is next in line), min.insync.replicas=1. Broker 3 is the
    follower of the KIP: it fetches every record (so acks=all completes) but, by the failpoint
    `replica.follower.freeze_hw`, never learns the leader's HW (KIP-101: the HW reaches a
    follower one fetch later; the failpoint makes that window permanent). Broker 1 is SIGKILLed:
    2 is elected and 3 becomes its follower in the new leader epoch (makeFollower). The
    failpoint `replica.fetcher.skip_source=return(2)` keeps 3 from fetching from 2, as when the
    new leader dies before the follower's first fetch. Then 2 is SIGKILLed and 3, the last ISR
    member, is elected (a clean election).

    By leader epoch, 3 kept its log on becoming a follower: every acknowledged record is still
    there. Truncating to its local HW (0) on becoming a follower, 3 threw them away and now
    leads an empty log: acknowledged records are lost, and what a reader saw is gone.
    """
    topic = "kip101-scenario1"
    cluster = cluster_factory(
        3,
        {TRUNCATE_TO_HW: str(truncate_to_hw).lower()},
        broker_env={
            3: {
                FAILPOINTS: "replica.follower.freeze_hw=return;"
                "replica.fetcher.skip_source=return(2)"
            }
        },
    )
    await cluster.wait_ready()
    await create(cluster, topic, [1, 2, 3])
    acked = [b"acked-%d" % i for i in range(5)]
    assert await produce(cluster, topic, acked, acks="all") == list(range(5))
    seen_before = await read_from_leader(cluster, topic)
    assert values(seen_before) == acked
    follower = cluster.brokers[3]
    assert events_since(follower, "failpoint enabled", 0)

    applied = len(follower.events())
    await cluster.brokers[1].akill()
    await cluster.wait_partition(topic, 0, lambda p: p.leader == 2 and 1 not in p.isr, within=60)

    # ZK mode: a LeaderAndIsr request; Raft mode: a metadata change from the log.
    applied_event = "applied LeaderAndIsr" if cluster.mode == "zk" else "applied metadata changes"

    def follows_the_new_leader() -> bool:
        return any(
            int(e.get("followers", 0)) >= 1  # type: ignore[call-overload]
            and not e.get("skipped")
            and not e.get("failed")
            for e in events_since(follower, applied_event, applied)
        )

    await wait_until(follows_the_new_leader, within=30, every=0.05)
    await cluster.brokers[2].akill()
    await cluster.wait_partition(
        topic, 0, lambda p: p.leader == 3 and list(p.isr) == [3], within=60
    )

    seen_after = await read_from_leader(cluster, topic)
    more = [b"later-%d" % i for i in range(3)]
    await produce(cluster, topic, more, acks="all")
    # The other replicas come back and follow broker 3.
    await cluster.brokers[1].astart(within=60)
    await cluster.brokers[2].astart(within=60)
    await cluster.wait_partition(topic, 0, lambda p: sorted(p.isr) == [1, 2, 3], within=60)
    final = await read_from_leader(cluster, topic)
    replicas = await kill_all_and_read_replicas(cluster, topic, [1, 2, 3])

    if not truncate_to_hw:
        assert seen_after == seen_before  # nothing acknowledged lost, nothing read then gone
        assert values(final) == acked + more
        assert divergences(replicas) == []
        for broker_id, entries in replicas.items():
            assert entries == final, f"broker {broker_id}"
    else:
        truncated = [
            e
            for e in follower.events()
            if e.get("event") == "failpoint enabled" or "truncat" in str(e.get("event"))
        ]
        assert seen_after == [], (seen_after, truncated)  # the acknowledged records are gone
        assert not set(acked) & set(values(final))
        # A reader saw acked-0.. at offsets 0..4; the leader now has other records there.
        assert [e for e in seen_before if e in final] == []


# -- scenario 2 ------------------------------------------------------------------------------


def truncate_replica(broker: BrokerProcess, topic: str, offset: int) -> None:
    """A power failure: what the (killed) broker had not fsynced is gone. The test chooses the
    lost tail (every record from `offset` on) instead of leaving it to the page cache."""
    assert not broker.running
    the_log = Log.open(broker.log_dir / f"{topic}-0")
    try:
        assert the_log.log_end_offset > offset
        the_log.truncate_to(offset)
        the_log.flush()
    finally:
        the_log.close()


@pytest.mark.parametrize("truncate_to_hw", [False, True], ids=["by-leader-epoch", "to-local-hw"])
async def test_kip101_scenario2_replicas_diverge_after_both_crash(
    cluster_factory: ClusterFactory, truncate_to_hw: bool
) -> None:
    """Scenario 2, "replica divergence on restart after multiple hard failures".

    Replicas [1, 2] (1 = KIP's A leads, 2 = B follows), broker 3 holds no replica;
    min.insync.replicas=1. COMMITTED records are written with acks=all, then one more, m, with
    acks=1: B fetches it, so A's HW passes it (A checkpoints that HW: the test waits for the
    checkpoint file). Then both crash, as in the KIP's power outage, in an order the controller
    sees one at a time: A is SIGKILLed (B, in the ISR, is elected), then B. B lost m: the page
    cache held it (the test cuts B's log back by the unsynced tail, see `truncate_replica`).
    B is the ISR's last member, so when it comes back first it is elected - cleanly, no
    unclean.leader.election.enable - and takes m2 (acks=all) at m's offset. Then A comes back
    and follows B.

    By leader epoch, A asks where its epoch ends on B and truncates m: the replicas agree, and
    after a preferred election gives A the leadership back readers still see m2. Truncating to
    its HW (which covers m), A keeps m: A and B hold different records at one offset, and once
    A leads again, the acknowledged m2 is gone from what readers see.

    m itself is lost in both modes: every replica crashed, and Kafka promises durability for
    n-1 failures only. KIP-101 is about the divergence, which leader epochs prevent.
    """
    topic = "kip101-scenario2"
    committed = 4
    cluster = cluster_factory(
        3,
        {
            TRUNCATE_TO_HW: str(truncate_to_hw).lower(),
            "replica.high.watermark.checkpoint.interval.ms": 100,
            # The test gives A its leadership back itself; the controller's own preferred
            # election (first check 5 s after it became active) could do it first, once A
            # rejoins the ISR quickly, and the test's ElectLeaders would find it not needed.
            "auto.leader.rebalance.enable": "false",
        },
    )
    await cluster.wait_ready()
    await create(cluster, topic, [1, 2])
    a, b = cluster.brokers[1], cluster.brokers[2]
    acked = [b"acked-%d" % i for i in range(committed)]
    assert await produce(cluster, topic, acked, acks="all") == list(range(committed))
    assert await produce(cluster, topic, [b"m"], acks="1") == [committed]

    async def a_committed_m() -> bool:
        seen = await read_from_leader(cluster, topic)
        return len(seen) == committed + 1  # A's HW passed m: B has fetched it

    await wait_until(a_committed_m, within=30, every=0.1)
    tp = TopicPartition(topic, 0)

    def a_checkpointed_m() -> bool:
        path = a.log_dir / REPLICATION_OFFSET_CHECKPOINT
        return path.exists() and read_offsets(str(path)).get(tp) == committed + 1

    await wait_until(a_checkpointed_m, within=30, every=0.05)

    # The power outage, one broker at a time as the controller sees it.
    await a.akill()
    await cluster.wait_partition(
        topic, 0, lambda p: p.leader == 2 and list(p.isr) == [2], within=60
    )
    await b.akill()
    await cluster.wait_partition(topic, 0, lambda p: p.leader == -1, within=60)
    truncate_replica(b, topic, committed)

    await b.astart(within=60)
    await cluster.wait_partition(topic, 0, lambda p: p.leader == 2, within=60)
    assert await produce(cluster, topic, [b"m2"], acks="all") == [committed]
    seen_from_b = await read_from_leader(cluster, topic)
    assert values(seen_from_b) == [*acked, b"m2"]

    await a.astart(within=60)
    await cluster.wait_partition(topic, 0, lambda p: sorted(p.isr) == [1, 2], within=60)
    async with cluster.admin() as admin:
        results = await admin.elect_leaders("preferred", [tp])
    assert results[tp] is None, results
    await cluster.wait_partition(topic, 0, lambda p: p.leader == 1, within=60)
    seen_from_a = await read_from_leader(cluster, topic)
    replicas = await kill_all_and_read_replicas(cluster, topic, [1, 2])

    if not truncate_to_hw:
        assert seen_from_a == seen_from_b
        assert divergences(replicas) == []
        assert replicas[1] == replicas[2] == seen_from_b
    else:
        assert divergences(replicas) == [(committed, {1: b"m", 2: b"m2"})]
        assert values(seen_from_a) == [*acked, b"m"]  # the acknowledged m2 is gone
