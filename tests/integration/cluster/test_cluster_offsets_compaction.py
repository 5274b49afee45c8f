"""`__consumer_offsets` stays bounded, and a compacted one fails over (both metadata modes):
a group member commits thousands of times on three partitions (raw wire OffsetCommits, each
answered once replicated); every replica's cleaner compacts the group's offsets partition
(offsets.topic.segment.bytes 4096, log.cleaner.backoff.ms 100), so its size on disk stays
under a bound while the commits go on. Then the coordinator's broker is SIGKILLed: the new
coordinator loads the compacted partition (gaps, the cleaner's empty batches) and serves
exactly the last committed offsets and the group's last generation, and a consumer of the
group resumes at those offsets."""

from __future__ import annotations

import contextlib
from pathlib import Path

import trio

from broker.group.hashing import OFFSETS_TOPIC, partition_for
from client import Consumer, Producer, TopicPartition
from protocol.errors import ErrorCode
from protocol.messages.groups import LeaveGroupMember, LeaveGroupRequest
from storage.checkpoints import read_offsets
from storage.cleaner import CLEANER_OFFSET_CHECKPOINT
from tests.integration.cluster.conftest import ClusterFactory
from tests.integration.group_wire import (
    commit,
    fetch_offsets,
    find_coordinator,
    heartbeat,
    join,
    new_member_id,
    sync,
)
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

PARTITIONS = 2
SEGMENT_BYTES = 4096
OVERRIDES = {
    "offsets.topic.num.partitions": PARTITIONS,
    "offsets.topic.segment.bytes": SEGMENT_BYTES,
    "group.min.session.timeout.ms": 2000,
    "group.initial.rebalance.delay.ms": 0,
    "log.cleaner.backoff.ms": 100,
    "log.flush.scheduler.interval.ms": 100,
}
GROUP = "ledger"
COMMITS = 2000
FINAL = {0: 3, 1: 4, 2: 5}
BOUND = 12 * SEGMENT_BYTES
"""Largest size on disk allowed to the group's offsets partition on any replica: a few
segments (about 20 KB were seen), where the commits write about 100 segments (at least
COMMITS batch headers of 61 bytes: 122 KB, were nothing cleaned)."""


def partition_bytes(broker: BrokerProcess, index: int) -> int:
    """Bytes of the partition's segments; a segment the cleaner swaps out between the
    listing and its stat counts as nothing."""
    d = Path(broker.log_dirs[0]) / f"{OFFSETS_TOPIC}-{index}"
    total = 0
    for f in d.glob("*.log"):
        with contextlib.suppress(FileNotFoundError):
            total += f.stat().st_size
    return total


def cleaned_up_to(broker: BrokerProcess, index: int) -> int:
    path = Path(broker.log_dirs[0]) / CLEANER_OFFSET_CHECKPOINT
    return read_offsets(str(path)).get(TopicPartition(OFFSETS_TOPIC, index), 0)


async def served(cluster: Cluster, node_id: int) -> bool:
    async with await WireClient.connect("127.0.0.1", cluster.brokers[node_id].port) as c:
        return (await fetch_offsets(c, GROUP, "events", [0]))[0] == 0


async def commit_many(cluster: Cluster, c: WireClient, gen: int, member: str, index: int) -> int:
    """COMMITS commits (the last one FINAL); the largest size seen on any replica."""
    largest = 0
    for i in range(COMMITS):
        offsets = FINAL if i == COMMITS - 1 else {p: i for p in FINAL}
        assert await commit(c, GROUP, gen, member, "events", offsets) == {p: 0 for p in FINAL}
        if i % 50 == 0:
            assert await heartbeat(c, GROUP, gen, member) == 0
            largest = max(largest, *(partition_bytes(b, index) for b in cluster.brokers.values()))
    return largest


async def test_offsets_partition_stays_bounded_and_fails_over_compacted(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3, OVERRIDES)
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topic("events", 3, 3)
    async with Producer(bootstrap_servers=cluster.bootstrap, linger_ms=0) as producer:
        for v in range(30):
            await producer.send("events", b"%d" % v, partition=v % 3)
        await producer.flush()
    index = partition_for(GROUP, PARTITIONS)
    found = await find_coordinator("127.0.0.1", cluster.brokers[min(cluster.brokers)].port, GROUP)
    await cluster.wait_partition(OFFSETS_TOPIC, index, lambda i: len(i.isr) == 3)
    old = found.node_id
    await wait_until(lambda: served(cluster, old), within=30, every=0.1)

    async with await WireClient.connect("127.0.0.1", cluster.brokers[old].port) as c:
        member = await new_member_id(c, GROUP)
        joined = await join(c, GROUP, member)
        assert joined.error_code == 0 and joined.leader == member, joined
        gen = joined.generation_id
        assert (await sync(c, GROUP, gen, member, {member: b""})).error_code == 0
        largest = await commit_many(cluster, c, gen, member, index)
    assert largest <= BOUND, (largest, BOUND)
    end = (await cluster.partition(OFFSETS_TOPIC, index)).leader  # still the old coordinator
    assert end == old
    coordinator = cluster.brokers[old]
    # The coordinator's copy was cleaned well past the first commits before it dies.
    await wait_until(lambda: cleaned_up_to(coordinator, index) > COMMITS, within=30, every=0.1)
    assert partition_bytes(coordinator, index) <= BOUND

    await coordinator.akill()
    survivor = next(i for i in cluster.brokers if i != old)

    async def moved() -> bool:
        found = await find_coordinator("127.0.0.1", cluster.brokers[survivor].port, GROUP)
        return found.node_id != old

    await wait_until(moved, within=60, every=0.2)
    new = (await find_coordinator("127.0.0.1", cluster.brokers[survivor].port, GROUP)).node_id
    await wait_until(lambda: served(cluster, new), within=30, every=0.05)
    async with await WireClient.connect("127.0.0.1", cluster.brokers[new].port) as c:
        assert await fetch_offsets(c, GROUP, "events", [0, 1, 2]) == (0, FINAL)
        assert await heartbeat(c, GROUP, gen, member) == 0
        assert await heartbeat(c, GROUP, gen + 1, member) == ErrorCode.ILLEGAL_GENERATION
        left = await c.request(
            LeaveGroupRequest(group_id=GROUP, members=(LeaveGroupMember(member_id=member),))
        )
        assert left.error_code == 0, left

    # A consumer of the group starts where the group's commits say, on every partition.
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.live_bootstrap(),
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "retry.backoff.ms": 50,
        }
    )
    first: dict[int, int] = {}
    async with consumer:
        consumer.subscribe(["events"])
        with trio.fail_after(60):
            while len(first) < 3:
                for record in await consumer.poll(200):
                    first.setdefault(record.partition, record.offset)
    assert first == FINAL
