"""Topic deletion in Kafka's ZK-mode order on real broker processes and a real ZooKeeper.

- All brokers up: DeleteTopics answers once /admin/delete_topics/<t> is written; by the time
  the topic's znodes are gone, every broker's log of it is gone (StopReplica first, znodes
  after); the name can be created again and holds none of the old records.
- A replica's broker is down: the live replica is deleted, the deletion waits (marker and topic
  znodes stay; CreateTopics of the name answers TOPIC_ALREADY_EXISTS "marked for deletion");
  when the broker restarts its log dir is removed and the znodes go.
- The controller is killed mid-deletion (a replica down, so it cannot finish): the next
  controller loads /admin/delete_topics and finishes once the replica's broker is back.
- A marker written into /admin/delete_topics by someone else (a kafka-topics-like tool)
  starts the deletion too.
- A stale replica (its broker was down while the topic was moved off it, deleted and recreated
  under the same name) is deleted on restart (FULL LeaderAndIsr, KIP-516) and never serves
  the old records, even once the broker hosts the new topic again.

ZK mode only: the deletion protocol under test is ZooKeeper's (/admin/delete_topics markers,
topic znodes, the ZK controller's StopReplica rounds and its failover); Raft mode deletes with
a RemoveTopicRecord: test_raft_topic_deletion.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from client import Consumer, NewTopic, Producer, TopicPartition
from protocol.errors import ErrorCode, KafkaError
from tests.integration.cluster.conftest import ZkClusterFactory
from tests.support.cluster import ZkCluster
from tests.support.waiting import wait_until
from zkstore import ZkClient

NO_REBALANCE = {"auto.leader.rebalance.enable": False}


def log_dirs(cluster: ZkCluster, node_id: int, topic: str) -> list[Path]:
    """The broker's partition dirs of `topic` (Kafka's <topic>-<partition>)."""
    root = cluster.brokers[node_id].log_dir
    if not root.exists():
        return []
    return sorted(
        p
        for p in root.iterdir()
        if p.is_dir() and p.name.rsplit("-", 1)[0] == topic and p.name.rsplit("-", 1)[1].isdigit()
    )


def topic_znodes(topic: str) -> list[str]:
    return [f"/brokers/topics/{topic}", f"/config/topics/{topic}", f"/admin/delete_topics/{topic}"]


async def existing(zk: ZkClient, paths: list[str]) -> list[str]:
    return [p for p in paths if await zk.exists(p) is not None]


async def produce(cluster: ZkCluster, topic: str, prefix: bytes, n: int) -> None:
    async with Producer(
        bootstrap_servers=cluster.live_bootstrap(), acks="all", linger_ms=1
    ) as producer:
        for i in range(n):
            await producer.send_and_wait(topic, prefix + b"-%03d" % i, partition=0)


async def read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    values: list[bytes] = []
    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])

        async def got_all() -> bool:
            for record in await consumer.poll(timeout_ms=200):
                values.append(record.value)
            return len(values) >= expected

        await wait_until(got_all, within=30)
    return values


async def test_delete_with_all_brokers_up(zk_cluster_factory: ZkClusterFactory) -> None:
    cluster = zk_cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("gone", num_partitions=2, replication_factor=3)])
    await cluster.wait_partition("gone", 1, lambda p: len(p.isr) == 3)
    await produce(cluster, "gone", b"old", 20)
    for b in (1, 2, 3):
        assert len(log_dirs(cluster, b, "gone")) == 2

    async with ZkClient(cluster.zookeeper_connect, session_timeout_s=4) as zk:
        async with cluster.admin() as admin:
            await admin.delete_topics(["gone"])

        async def znodes_gone() -> bool:
            return not await existing(zk, topic_znodes("gone"))

        await wait_until(znodes_gone, within=30, every=0.005)
        # The znodes go last: every replica was deleted before.
        for b in (1, 2, 3):
            assert log_dirs(cluster, b, "gone") == [], f"broker {b} still holds the topic"

    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("gone", num_partitions=1, replication_factor=3)])
    await cluster.wait_partition("gone", 0, lambda p: len(p.isr) == 3)
    await produce(cluster, "gone", b"new", 3)
    assert await read_all(cluster.live_bootstrap(), "gone", 3) == [
        b"new-000",
        b"new-001",
        b"new-002",
    ]


async def test_delete_waits_for_a_down_replica_then_completes(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    controller = await cluster.controller_id()
    up, down = [b for b in (1, 2, 3) if b != controller]
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("wait", replica_assignment={0: [up, down]})])
    await cluster.wait_partition("wait", 0, lambda p: len(p.isr) == 2)
    await produce(cluster, "wait", b"old", 10)
    await cluster.brokers[down].astop(within=60)
    await cluster.wait_partition("wait", 0, lambda p: down not in p.isr, within=30)

    async with ZkClient(cluster.zookeeper_connect, session_timeout_s=4) as zk:
        async with cluster.admin() as admin:
            await admin.delete_topics(["wait"])
        await wait_until(lambda: not log_dirs(cluster, up, "wait"), within=30)
        # The live replica is deleted; the deletion waits for the down one.
        assert await existing(zk, topic_znodes("wait")) == topic_znodes("wait")
        assert log_dirs(cluster, down, "wait") != []
        async with cluster.admin() as admin:
            with pytest.raises(KafkaError) as refused:
                await admin.create_topics(
                    [NewTopic("wait", num_partitions=1, replication_factor=1)]
                )
        assert refused.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert "marked for deletion" in str(refused.value)
        assert await existing(zk, topic_znodes("wait")) == topic_znodes("wait")

        await cluster.brokers[down].astart(within=60)

        async def done() -> bool:
            return not await existing(zk, topic_znodes("wait"))

        await wait_until(done, within=30)
        assert log_dirs(cluster, down, "wait") == []
        assert log_dirs(cluster, up, "wait") == []


async def test_controller_killed_mid_deletion_next_controller_finishes(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    controller = await cluster.controller_id()
    up, down = [b for b in (1, 2, 3) if b != controller]
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("half", replica_assignment={0: [up, down]})])
    await cluster.wait_partition("half", 0, lambda p: len(p.isr) == 2)
    await cluster.brokers[down].astop(within=60)
    await cluster.wait_partition("half", 0, lambda p: down not in p.isr, within=30)

    async with ZkClient(cluster.zookeeper_connect, session_timeout_s=4) as zk:
        async with cluster.admin() as admin:
            await admin.delete_topics(["half"])
        await wait_until(lambda: not log_dirs(cluster, up, "half"), within=30)
        await cluster.brokers[controller].akill()
        # `up` is the only broker left: it becomes the controller and loads the marker.
        await cluster.wait_controller(lambda c: c == up, within=60)
        assert await existing(zk, topic_znodes("half")) == topic_znodes("half")

        await cluster.brokers[down].astart(within=60)

        async def done() -> bool:
            return not await existing(zk, topic_znodes("half"))

        await wait_until(done, within=30)
        assert log_dirs(cluster, down, "half") == []
        await cluster.brokers[controller].astart(within=60)
        await cluster.wait_ready()
        assert log_dirs(cluster, controller, "half") == []


async def test_marker_written_by_a_tool_starts_the_deletion(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(2, NO_REBALANCE)
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("tool", num_partitions=1, replication_factor=2)])
    await cluster.wait_partition("tool", 0, lambda p: len(p.isr) == 2)
    async with ZkClient(cluster.zookeeper_connect, session_timeout_s=4) as zk:
        await zk.create("/admin/delete_topics/tool")
        await zk.create("/admin/delete_topics/no-such-topic")

        async def done() -> bool:
            return not await existing(
                zk, [*topic_znodes("tool"), "/admin/delete_topics/no-such-topic"]
            )

        await wait_until(done, within=30)
        for b in (1, 2):
            assert log_dirs(cluster, b, "tool") == []


async def test_stale_replica_of_a_recreated_topic_is_deleted_and_never_served(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    controller = await cluster.controller_id()
    stale, other = [b for b in (1, 2, 3) if b != controller]
    tp = TopicPartition("phoenix", 0)
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("phoenix", replica_assignment={0: [other, stale]})])
    await cluster.wait_partition("phoenix", 0, lambda p: len(p.isr) == 2)
    await produce(cluster, "phoenix", b"old", 10)
    await wait_until(lambda: log_dirs(cluster, stale, "phoenix") != [], within=10)
    await cluster.brokers[stale].astop(within=60)
    await cluster.wait_partition("phoenix", 0, lambda p: stale not in p.isr, within=30)

    # While `stale` is down the topic moves off it, is deleted and is created again: nothing
    # ever told `stale` that its log belongs to a topic that no longer exists.
    async with (
        ZkClient(cluster.zookeeper_connect, session_timeout_s=4) as zk,
        cluster.admin() as admin,
    ):
        await admin.alter_partition_reassignments({tp: [other, controller]})

        async def moved() -> bool:
            return not await admin.list_partition_reassignments([tp])

        await wait_until(moved, within=45, every=0.1)
        await admin.delete_topics(["phoenix"])

        async def znodes_gone() -> bool:
            return not await existing(zk, topic_znodes("phoenix"))

        await wait_until(znodes_gone, within=30)
        await admin.create_topics(
            [NewTopic("phoenix", replica_assignment={0: [other, controller]})]
        )
    await cluster.wait_partition("phoenix", 0, lambda p: len(p.isr) == 2)
    await produce(cluster, "phoenix", b"new", 3)
    assert log_dirs(cluster, stale, "phoenix") != []  # the stale log is still on disk

    await cluster.brokers[stale].astart(within=60)
    # Its first LeaderAndIsr is FULL and does not name phoenix on it: a stray, deleted.
    await wait_until(lambda: not log_dirs(cluster, stale, "phoenix"), within=30)

    # Hosting the new topic again, it replicates only the new records, and as the leader it
    # serves only them.
    async with cluster.admin() as admin:
        await admin.alter_partition_reassignments({tp: [stale, other, controller]})

        async def joined() -> bool:
            return not await admin.list_partition_reassignments([tp])

        await wait_until(joined, within=45, every=0.1)
        await cluster.wait_partition("phoenix", 0, lambda p: stale in p.isr, within=30)
        await admin.elect_leaders("preferred", [tp])
    await cluster.wait_partition("phoenix", 0, lambda p: p.leader == stale, within=30)
    values = await read_all(cluster.brokers[stale].bootstrap, "phoenix", 3)
    assert values == [b"new-000", b"new-001", b"new-002"]
