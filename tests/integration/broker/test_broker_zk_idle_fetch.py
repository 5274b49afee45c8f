"""The leader's fast path for idle followers (in-process ZK-mode brokers, real storage and
sockets): a follower at the leader's LEO = HW in the ISR, asking again with the same session
request, gets the same answer object with no read; it stays in the ISR (its caught-up time still
moves), and the first append after the idle period replicates and moves every HW as before."""

from __future__ import annotations

from pathlib import Path

from broker.partitions import IdleFollowerRead
from broker.replica.fetch_session import PartitionRequest
from protocol.names import TopicPartition
from storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT, read_offsets
from tests.integration.broker.broker_wire import produce
from tests.integration.broker.zk_brokers import (
    Cluster,
    PartitionReg,
    cluster_nursery,
    start_cluster,
    stop_cluster,
    wait_until,
)
from tests.support.wire import batch

TP = TopicPartition("idle", 0)
TOPIC_ID = "aWRsZS10b3BpYy1pZC0wMDA"
LAG_MS = 600


def idle_reads(cluster: Cluster) -> dict[int, IdleFollowerRead]:
    return dict(cluster.broker(1).partitions.get(TP).idle_reads)


def kept_request(cluster: Cluster, follower: int) -> PartitionRequest:
    """The follower's fetcher's kept request for TP."""
    manager = cluster.broker(follower).fetchers
    assert manager is not None
    (fetcher,) = manager.fetchers.values()
    return fetcher._requests[TP].request


def hws(cluster: Cluster) -> list[int]:
    return [cluster.broker(i).partitions.get(TP).state.high_watermark for i in (1, 2, 3)]


async def test_idle_followers_get_the_same_answer_stay_in_sync_and_see_the_next_append(
    tmp_path: Path,
) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(
            nursery,
            tmp_path,
            configure=lambda i: {"min.insync.replicas": 2, "replica.lag.time.max.ms": LAG_MS},
        )
        cluster.controller.create(
            TP.topic, TOPIC_ID, {0: PartitionReg(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)}
        )
        await cluster.controller.propagate()
        state = cluster.broker(1).partitions.get(TP).state
        async with await cluster.client(1) as c:
            r = await produce(c, TP.topic, 0, batch([b"a", b"b", b"c"]), acks=-1)
            assert r.error_code == 0, r
            await wait_until("every HW reaches 3", lambda: hws(cluster) == [3, 3, 3])
            # Both followers at LEO = HW: the leader remembers its answer to each.
            await wait_until(
                "idle answers for both followers", lambda: idle_reads(cluster).keys() == {2, 3}
            )
            first = idle_reads(cluster)
            requests = {i: kept_request(cluster, i) for i in (2, 3)}
            assert all(requests[i].fetch_offset == 3 for i in (2, 3))
            caught_up = {i: state.followers[i].last_caught_up_time_ms for i in (2, 3)}

            # Several replica.lag.time.max.ms of idle fetching (every 100 ms): the same answer
            # objects are served (a full read stores a new one each time), and the followers'
            # caught-up times keep moving, so the ISR does not shrink.
            await wait_until(
                "caught-up times move past 3 x replica.lag.time.max.ms",
                lambda: all(
                    state.followers[i].last_caught_up_time_ms > caught_up[i] + 3 * LAG_MS
                    for i in (2, 3)
                ),
            )
            assert state.isr == (1, 2, 3)
            assert all(idle_reads(cluster)[i] is first[i] for i in (2, 3))
            assert all(first[i].response.high_watermark == 3 for i in (2, 3))
            # The followers' fetchers kept their request objects too (nothing moved) ...
            assert all(kept_request(cluster, i) is requests[i] for i in (2, 3))

            # The first append after the idle period: replicated, HWs move everywhere.
            r = await produce(c, TP.topic, 0, batch([b"d"]), acks=-1)
            assert r.error_code == 0 and r.base_offset == 3, r
            await wait_until("every HW reaches 4", lambda: hws(cluster) == [4, 4, 4])
            assert [cluster.log_of(i, TP).log_end_offset for i in (1, 2, 3)] == [4, 4, 4]
            # ... and built new ones from the new position once records came.
            await wait_until(
                "fetchers ask from offset 4",
                lambda: all(kept_request(cluster, i).fetch_offset == 4 for i in (2, 3)),
            )
            await wait_until(
                "new idle answers at HW 4",
                lambda: all(
                    i in idle_reads(cluster) and idle_reads(cluster)[i].response.high_watermark == 4
                    for i in (2, 3)
                ),
            )

            # A follower that stops fetching is not kept in sync by the other's fast path.
            # (Kafka's rule: a follower at the leader's LEO stays in sync, so append first.)
            await cluster.block(3)
            r = await produce(c, TP.topic, 0, batch([b"e"]), acks=1)
            assert r.error_code == 0, r
            await wait_until("ISR shrinks to (1, 2)", lambda: state.isr == (1, 2))
            cluster.unblock(3)
            await wait_until("broker 3 rejoins the ISR", lambda: state.isr == (1, 2, 3))
        await stop_cluster(cluster)


async def test_leader_and_isr_leaves_the_hw_checkpoint_to_the_periodic_task(
    tmp_path: Path,
) -> None:
    """As Kafka's ReplicaManager: no checkpoint write per LeaderAndIsr (at 25,000 partitions
    each rewrote every partition's HW); the periodic task writes it, only when a HW changed."""
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(
            nursery,
            tmp_path,
            configure=lambda i: {"replica.high.watermark.checkpoint.interval.ms": 600_000},
        )
        cluster.controller.create(
            TP.topic, TOPIC_ID, {0: PartitionReg(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)}
        )
        await cluster.controller.propagate()
        files = {i: tmp_path / f"broker-{i}" / REPLICATION_OFFSET_CHECKPOINT for i in (1, 2, 3)}
        assert all(TP not in read_offsets(files[i]) for i in (1, 2, 3) if files[i].exists())
        async with await cluster.client(1) as c:
            r = await produce(c, TP.topic, 0, batch([b"a", b"b", b"c"]), acks=-1)
            assert r.error_code == 0, r
        await wait_until("every HW reaches 3", lambda: hws(cluster) == [3, 3, 3])
        for i in (1, 2, 3):
            manager = cluster.broker(i).partitions
            assert manager.checkpoint_high_watermarks()  # what the periodic task calls
            assert read_offsets(files[i])[TP] == 3
            assert not manager.checkpoint_high_watermarks()  # nothing changed: no write
        await stop_cluster(cluster)
