"""Consumers read to the HW, followers to the LEO (Kafka's FetchIsolation: FETCH_LOG_END for a
replica, FETCH_HIGH_WATERMARK for a consumer), on in-process ZK-mode brokers: with the
followers frozen (their transports blocked), an acks=1 write leaves the leader's HW below its
LEO; a consumer Fetch (replica_id=-1) gets nothing at or beyond the HW while a Fetch with a
follower's replica_id gets the uncommitted records; once the followers fetch again the HW
moves and consumers see them."""

from __future__ import annotations

from pathlib import Path

from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.names import TopicPartition
from tests.integration.broker.broker_wire import fetch, produce
from tests.integration.broker.zk_brokers import (
    PartitionReg,
    cluster_nursery,
    start_cluster,
    stop_cluster,
    wait_until,
)
from tests.support.wire import WireClient, batch, records_of

TOPIC = "hw-reads"
TOPIC_ID = "aHctcmVhZHMtdG9waWMtaWQ"
TP = TopicPartition(TOPIC, 0)
COMMITTED = [b"committed-%d" % i for i in range(3)]
UNCOMMITTED = [b"uncommitted-%d" % i for i in range(2)]


async def follower_fetch(
    c: WireClient, replica_id: int, offset: int, leader_epoch: int, last_fetched_epoch: int
):
    """A sessionless Fetch as follower `replica_id` would send it."""
    response = await c.request(
        FetchRequest(
            max_wait_ms=0,
            min_bytes=0,
            replica_id=replica_id,
            topics=(
                FetchTopic(
                    name=TOPIC,
                    partitions=(
                        FetchPartition(
                            index=0,
                            fetch_offset=offset,
                            current_leader_epoch=leader_epoch,
                            last_fetched_epoch=last_fetched_epoch,
                        ),
                    ),
                ),
            ),
        )
    )
    return response.topics[0].partitions[0]


async def test_consumers_read_to_the_hw_and_followers_to_the_leo(tmp_path: Path) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(nursery, tmp_path)
        cluster.controller.create(
            TOPIC, TOPIC_ID, {0: PartitionReg(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)}
        )
        await cluster.controller.propagate()
        state = cluster.broker(1).partitions.get(TP).state
        async with await cluster.client(1) as c:
            for value in COMMITTED:
                assert (await produce(c, TOPIC, 0, batch([value]), acks=-1)).error_code == 0
            assert state.high_watermark == len(COMMITTED)

            # Followers frozen: acks=1 records reach only the leader's log.
            await cluster.block(2, 3)
            for value in UNCOMMITTED:
                assert (await produce(c, TOPIC, 0, batch([value]), acks=1)).error_code == 0
            end = len(COMMITTED) + len(UNCOMMITTED)
            leader_log = cluster.log_of(1, TP)
            assert leader_log.log_end_offset == end
            assert state.high_watermark == len(COMMITTED)  # below the LEO

            # A consumer reads up to the HW and no further.
            read = await fetch(c, TOPIC, 0, 0)
            assert read.error_code == 0 and read.high_watermark == len(COMMITTED)
            assert [r.value for r in records_of(read.records)] == COMMITTED
            for offset in range(len(COMMITTED), end + 1):  # between HW and LEO: empty, no error
                beyond = await fetch(c, TOPIC, 0, offset)
                assert (beyond.error_code, beyond.records) == (0, b""), (offset, beyond)

            # Follower 2 (as the leader sees it) reads to the LEO.
            epoch = state.leader_epoch
            got = await follower_fetch(c, 2, len(COMMITTED), epoch, epoch)
            assert got.error_code == 0, got
            assert [r.value for r in records_of(got.records)] == UNCOMMITTED
            assert got.high_watermark == len(COMMITTED)
            assert state.high_watermark == len(COMMITTED)  # one follower at 3: no HW move

            # The followers fetch again: the HW reaches the LEO and consumers see everything.
            cluster.unblock(2, 3)
            await wait_until("the HW reaches the LEO", lambda: state.high_watermark == end)
            read = await fetch(c, TOPIC, 0, 0)
            assert [r.value for r in records_of(read.records)] == COMMITTED + UNCOMMITTED
        await stop_cluster(cluster)
