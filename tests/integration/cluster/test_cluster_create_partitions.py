"""CreatePartitions end to end on a cluster of 3 real broker processes, in ZK and in Raft mode
(`cluster_factory`): `trioka topic alter --topic T --partitions N` (the CLI as a process, like
kafka-topics.sh --alter) grows a topic from 1 to 3 partitions; the new partitions get leaders
and full ISRs and take acks=all records that consumers read back. Shrinking is refused with
INVALID_PARTITIONS and Kafka's message; a manual assignment (Admin.create_partitions) with the
wrong replication factor is refused, a valid one places the partition where asked."""

from __future__ import annotations

import pytest
import trio

from client import Consumer, KafkaError, Producer, TopicPartition
from protocol.errors import ErrorCode
from tests.integration.cluster.conftest import ClusterFactory
from tests.integration.cluster.test_cluster_leadership import NO_REBALANCE, trioka

TOPIC = "growing"


async def test_topic_alter_adds_partitions_that_get_leaders_and_take_records(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topic(TOPIC, 1, 3)
    await cluster.wait_partition(TOPIC, 0, lambda p: p.leader >= 0 and len(p.isr) == 3)

    grown = await trioka(cluster, "topic", "alter", "--topic", TOPIC, "--partitions", "3")
    assert grown.returncode == 0, grown.stderr.decode()
    assert f"Altered topic {TOPIC}: 3 partitions." in grown.stderr.decode()
    leaders = []
    for p in (1, 2):
        info = await cluster.wait_partition(
            TOPIC, p, lambda i: i.leader >= 0 and len(i.isr) == 3, within=30
        )
        assert sorted(info.replicas) == [1, 2, 3] and sorted(info.isr) == [1, 2, 3]
        assert info.leader == info.replicas[0]
        leaders.append(info.leader)
    # Placement continues the stripe: the new partitions are not all led by one broker.
    first = (await cluster.partition(TOPIC, 0)).leader
    assert len({first, *leaders}) == 3, (first, leaders)

    sent = {p: [b"p%d-%03d" % (p, i) for i in range(20)] for p in range(3)}
    async with Producer(
        bootstrap_servers=cluster.live_bootstrap(), acks="all", linger_ms=1
    ) as producer:
        for p, values in sent.items():
            for value in values:
                await producer.send_and_wait(TOPIC, value, partition=p)
    got: dict[int, list[bytes]] = {p: [] for p in range(3)}
    async with Consumer(
        bootstrap_servers=cluster.live_bootstrap(), auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(3)])
        with trio.fail_after(30):
            while sum(map(len, got.values())) < 60:
                for record in await consumer.poll(1000):
                    assert record.value is not None
                    got[record.partition].append(record.value)
    assert got == sent

    shrink = await trioka(cluster, "topic", "alter", "--topic", TOPIC, "--partitions", "1")
    assert shrink.returncode == 1
    message = f"The topic {TOPIC} currently has 3 partition(s); 1 would not be an increase."
    assert shrink.stderr.decode().strip() == f"error: {message}"
    async with cluster.admin() as admin:
        with pytest.raises(KafkaError) as refused:
            await admin.create_partitions({TOPIC: 1})
        assert refused.value.code is ErrorCode.INVALID_PARTITIONS
        assert refused.value.message == message
        with pytest.raises(KafkaError) as same:
            await admin.create_partitions({TOPIC: 3})
        assert same.value.code is ErrorCode.INVALID_PARTITIONS
        with pytest.raises(KafkaError) as wrong_rf:
            await admin.create_partitions({TOPIC: 4}, assignments={TOPIC: [[1, 2]]})
        assert wrong_rf.value.code is ErrorCode.INVALID_REPLICA_ASSIGNMENT
        await admin.create_partitions({TOPIC: 4}, assignments={TOPIC: [[2, 3, 1]]})
    placed = await cluster.wait_partition(
        TOPIC, 3, lambda i: i.leader == 2 and len(i.isr) == 3, within=30
    )
    assert placed.replicas == (2, 3, 1)
