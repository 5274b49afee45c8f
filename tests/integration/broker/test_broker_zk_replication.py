"""ZK-mode brokers in-process (three Broker objects on loopback, real storage, a fake
controller sending LeaderAndIsr / UpdateMetadata): replication with fetch sessions, acks=all
with min.insync.replicas, ISR expand and shrink through AlterPartition, truncation on a diverging
epoch, stale controller epochs refused, StopReplica, Metadata from the cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from protocol.messages.quorum_common import LeaderIdAndEpoch, NodeEndpoint
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from protocol.names import TopicPartition
from tests.integration.broker.broker_wire import fetch, fetch_request, produce, produce_request
from tests.integration.broker.zk_brokers import (
    Cluster,
    PartitionReg,
    cluster_nursery,
    start_cluster,
    stop_cluster,
    wait_until,
)
from tests.support.wire import batch, records_of

TP = TopicPartition("orders", 0)
TOPIC_ID = "b3JkZXJzLXRvcGljLWlkMA"


def values(raw: bytes) -> list[bytes | None]:
    return [r.value for r in records_of(raw)]


def all_values(cluster: Cluster, broker_id: int, tp: TopicPartition = TP) -> list[bytes | None]:
    the_log = cluster.log_of(broker_id, tp)
    out: list[bytes | None] = []
    offset = the_log.log_start_offset
    while offset < the_log.log_end_offset:
        data = bytes(the_log.read(offset, 1 << 20).data)
        records = records_of(data)
        out.extend(r.value for r in records)
        offset += len(records)
    return out


async def setup_topic(cluster: Cluster, isr: tuple[int, ...] = (1, 2, 3)) -> None:
    cluster.controller.create(
        TP.topic, TOPIC_ID, {0: PartitionReg(replicas=(1, 2, 3), isr=isr, leader=1)}
    )
    await cluster.controller.propagate()


async def test_followers_replicate_acks_all_and_metadata_from_the_cache(tmp_path: Path) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(
            nursery, tmp_path, configure=lambda i: {"min.insync.replicas": 2}
        )
        await setup_topic(cluster)
        leader = cluster.broker(1)
        assert leader.partitions.get(TP).state.is_leader
        assert not cluster.broker(2).partitions.get(TP).state.is_leader
        async with await cluster.client(1) as c:
            for i in range(5):
                r = await produce(c, TP.topic, 0, batch([f"v{i}".encode()]), acks=-1)
                assert r.error_code == 0, r
                assert r.base_offset == i
            # acks=all answered: the HW has passed every record, so every ISR member has it.
            assert leader.partitions.get(TP).state.high_watermark == 5
            for follower in (2, 3):
                await wait_until(
                    f"broker {follower} has 5 records",
                    lambda f=follower: cluster.log_of(f, TP).log_end_offset == 5,
                )
            got = await fetch(c, TP.topic, 0, 0)
            assert values(got.records) == [f"v{i}".encode() for i in range(5)]
            # Followers learn the HW from their next fetch.
            await wait_until(
                "follower HWs reach 5",
                lambda: all(
                    cluster.broker(f).partitions.get(TP).state.high_watermark == 5 for f in (2, 3)
                ),
            )
            assert all_values(cluster, 2) == all_values(cluster, 1) == all_values(cluster, 3)
            # The followers fetch in incremental sessions (KIP-227).
            assert leader.fetch_sessions.size == 2

            meta = await c.request(MetadataRequest(topics=(TP.topic,)))
            assert meta.controller_id == cluster.controller.controller_id
            assert [b.node_id for b in meta.brokers] == [1, 2, 3]
            (part,) = meta.topics[0].partitions
            assert meta.topics[0].topic_id == TOPIC_ID
            assert (part.leader_id, part.replica_nodes, part.isr_nodes) == (1, (1, 2, 3), (1, 2, 3))
            described = await c.request(DescribeClusterRequest())
            assert described.controller_id == cluster.controller.controller_id
            assert [b.broker_id for b in described.brokers] == [1, 2, 3]

            epochs = await c.request(
                OffsetForLeaderEpochRequest(
                    replica_id=-1,
                    topics=(
                        OffsetForLeaderTopic(
                            topic=TP.topic,
                            partitions=(OffsetForLeaderPartition(partition=0, leader_epoch=0),),
                        ),
                    ),
                )
            )
            result = epochs.topics[0].partitions[0]
            assert (result.error_code, result.leader_epoch, result.end_offset) == (0, 0, 5)
        async with await cluster.client(2) as c:
            # A follower's refusal names the leader and where it listens (KIP-951).
            leader_endpoint = next(b for b in meta.brokers if b.node_id == 1)
            refused = await c.request(produce_request(TP.topic, 0, batch([b"x"])))
            r = refused.topics[0].partitions[0]
            assert r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert r.current_leader == LeaderIdAndEpoch(leader_id=1, leader_epoch=0)
            assert refused.node_endpoints == (
                NodeEndpoint(node_id=1, host=leader_endpoint.host, port=leader_endpoint.port),
            )
            read = await c.request(fetch_request(TP.topic, 0, 0))
            f = read.topics[0].partitions[0]
            assert f.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert f.current_leader == LeaderIdAndEpoch(leader_id=1, leader_epoch=0)
            assert [e.node_id for e in read.node_endpoints] == [1]
        await stop_cluster(cluster)


async def test_min_insync_refuses_then_isr_expands_through_alter_partition(
    tmp_path: Path,
) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(
            nursery, tmp_path, configure=lambda i: {"min.insync.replicas": 2}
        )
        # Followers 2 and 3 cannot fetch yet: the ISR stays the leader alone.
        cluster.transports[2].blocked = cluster.transports[3].blocked = True
        await setup_topic(cluster, isr=(1,))
        async with await cluster.client(1) as c:
            r = await produce(c, TP.topic, 0, batch([b"a"]), acks=-1)
            assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS, r
            assert "min.insync.replicas=2" in r.error_message
            r = await produce(c, TP.topic, 0, batch([b"a"]), acks=1)
            assert r.error_code == 0
            # Below min ISR the HW does not move (Kafka since 3.7).
            assert cluster.broker(1).partitions.get(TP).state.high_watermark == 0
            cluster.transports[2].blocked = False
            await wait_until(
                "broker 2 joins the ISR",
                lambda: cluster.controller.partitions[TP].isr == (1, 2),
            )
            state = cluster.broker(1).partitions.get(TP).state
            await wait_until("leader applies the new ISR", lambda: state.isr == (1, 2))
            assert state.partition_epoch == cluster.controller.partitions[TP].partition_epoch
            r = await produce(c, TP.topic, 0, batch([b"b"]), acks=-1)
            assert r.error_code == 0, r
            assert state.high_watermark == 2
        await stop_cluster(cluster)


async def test_isr_shrinks_when_a_follower_stops_fetching(tmp_path: Path) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(
            nursery,
            tmp_path,
            configure=lambda i: {"min.insync.replicas": 2, "replica.lag.time.max.ms": 400},
        )
        await setup_topic(cluster)
        async with await cluster.client(1) as c:
            r = await produce(c, TP.topic, 0, batch([b"a"]), acks=-1)
            assert r.error_code == 0
            await cluster.block(3)
            r = await produce(c, TP.topic, 0, batch([b"b"]), acks=-1)
            # Waits until broker 3 leaves the ISR, then completes with 1 and 2.
            assert r.error_code == 0, r
            assert cluster.controller.partitions[TP].isr == (1, 2)
            state = cluster.broker(1).partitions.get(TP).state
            assert state.isr == (1, 2)
            shrinks = [
                req
                for req in cluster.controller.received
                if type(req).__name__ == "AlterPartitionRequest"
            ]
            assert shrinks and shrinks[-1].topics[0].partitions[0].new_isr == (1, 2)
            # Broker 2 stops too and falls behind (a follower with everything stays in sync,
            # as Kafka's isCaughtUp): the ISR goes down to the leader; acks=all is refused.
            await cluster.block(2)
            r = await produce(c, TP.topic, 0, batch([b"c0"]), acks=1)
            assert r.error_code == 0
            await wait_until("ISR shrinks to the leader", lambda: state.isr == (1,))
            r = await produce(c, TP.topic, 0, batch([b"c"]), acks=-1)
            assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
            # They come back and rejoin.
            cluster.transports[2].blocked = cluster.transports[3].blocked = False
            await wait_until("ISR back to three", lambda: set(state.isr) == {1, 2, 3})
            r = await produce(c, TP.topic, 0, batch([b"d"]), acks=-1)
            assert r.error_code == 0
        await stop_cluster(cluster)


async def test_acks_all_times_out_when_the_isr_cannot_be_changed(tmp_path: Path) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(
            nursery,
            tmp_path,
            configure=lambda i: {"min.insync.replicas": 2, "replica.lag.time.max.ms": 200},
        )
        await setup_topic(cluster)
        cluster.controller.fail_alter_partition = True
        cluster.transports[2].blocked = cluster.transports[3].blocked = True
        async with await cluster.client(1) as c:
            from protocol.messages.produce import ProducePartition, ProduceRequest, ProduceTopic

            resp = await c.request(
                ProduceRequest(
                    acks=-1,
                    timeout_ms=300,
                    topics=(
                        ProduceTopic(
                            name=TP.topic,
                            partitions=(ProducePartition(index=0, records=batch([b"a"])),),
                        ),
                    ),
                )
            )
            r = resp.topics[0].partitions[0]
            assert r.error_code == ErrorCode.REQUEST_TIMED_OUT, r
            # Appended on the leader all the same (Kafka's semantics for a timed-out acks=all).
            assert cluster.log_of(1, TP).log_end_offset == 1
        cluster.controller.fail_alter_partition = False
        await stop_cluster(cluster)


async def test_old_leader_truncates_its_divergent_suffix(tmp_path: Path) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(nursery, tmp_path)
        await setup_topic(cluster)
        async with await cluster.client(1) as c:
            r = await produce(c, TP.topic, 0, batch([b"a0", b"a1"]), acks=-1)
            assert r.error_code == 0
            await wait_until(
                "followers have a0 a1",
                lambda: all(cluster.log_of(f, TP).log_end_offset == 2 for f in (2, 3)),
            )
            # The followers stop; the leader takes a write nobody else gets.
            await cluster.block(2, 3)
            r = await produce(c, TP.topic, 0, batch([b"lost0", b"lost1", b"lost2"]), acks=1)
            assert r.error_code == 0
            assert cluster.log_of(1, TP).log_end_offset == 5
        # Broker 2 becomes leader in epoch 1 and takes other writes.
        cluster.transports[1].blocked = True  # the old leader has no fetch in flight
        await cluster.controller.elect(TP, leader=2, isr=(2, 3))
        cluster.unblock(2, 3)
        async with await cluster.client(2) as c:
            r = await produce(c, TP.topic, 0, batch([b"b0"]), acks=1)
            assert r.error_code == 0 and r.base_offset == 2
        # The old leader fetches again: diverging epoch -> truncate to 2, then take b0.
        cluster.unblock(1)
        await wait_until(
            "old leader caught up with the new one",
            lambda: all_values(cluster, 1) == [b"a0", b"a1", b"b0"],
        )
        await wait_until(
            "broker 3 caught up", lambda: all_values(cluster, 3) == [b"a0", b"a1", b"b0"]
        )
        assert cluster.log_of(1, TP).latest_epoch() == 1
        await stop_cluster(cluster)


async def test_stale_controller_epoch_and_stale_leader_epoch_are_refused(tmp_path: Path) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(nursery, tmp_path)
        controller = cluster.controller
        controller.epoch = 5
        await setup_topic(cluster)
        state = cluster.broker(2).partitions.get(TP).state
        assert (state.leader, state.leader_epoch) == (1, 0)
        # A zombie controller (epoch 4) tries to make broker 2 the leader.
        zombie = controller.leader_and_isr(2, [TP])
        reg = controller.partitions[TP]
        zombie_state = zombie.topic_states[0].partition_states[0]
        zombie = LeaderAndIsrRequest(
            controller_id=3,
            controller_epoch=4,
            broker_epoch=zombie.broker_epoch,
            topic_states=(
                zombie.topic_states[0].__class__(
                    topic_name=TP.topic,
                    topic_id=TOPIC_ID,
                    partition_states=(
                        zombie_state.__class__(
                            partition_index=0,
                            controller_epoch=4,
                            leader=2,
                            leader_epoch=reg.leader_epoch + 1,
                            isr=(2,),
                            partition_epoch=reg.partition_epoch + 1,
                            replicas=reg.replicas,
                        ),
                    ),
                ),
            ),
            live_leaders=zombie.live_leaders,
        )
        response = await controller.send(2, zombie)
        assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert (state.leader, state.leader_epoch) == (1, 0)
        um = controller.update_metadata_request(2, [TP])
        response = await controller.send(2, um.__class__(**{**_fields(um), "controller_epoch": 4}))
        assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        stop = StopReplicaRequest(
            controller_id=3,
            controller_epoch=4,
            broker_epoch=cluster.broker(2).broker_epoch,
            topic_states=(
                StopReplicaTopicState(
                    topic_name=TP.topic,
                    topic_id=TOPIC_ID,
                    partition_states=(
                        StopReplicaPartitionState(partition_index=0, delete_partition=True),
                    ),
                ),
            ),
        )
        response = await controller.send(2, stop)
        assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        assert cluster.broker(2).partitions.get(TP) is not None
        # A stale broker epoch (meant for an earlier registration) is refused too.
        old = controller.leader_and_isr(2, [TP])
        old = LeaderAndIsrRequest(**{**_fields(old), "broker_epoch": 1})
        response = await controller.send(2, old)
        assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
        # The current controller, repeating the same leader epoch: skipped per partition.
        response = await controller.send(2, controller.leader_and_isr(2, [TP]))
        assert response.error_code == 0
        assert response.topics[0].partition_errors[0].error_code == (
            ErrorCode.STALE_CONTROLLER_EPOCH
        )
        # Another topic id for the same name (a recreated topic) is refused.
        controller.topic_ids[TP.topic] = "c29tZS1vdGhlci10b3BpYw"
        controller.partitions[TP].leader_epoch += 1
        response = await controller.send(2, controller.leader_and_isr(2, [TP]))
        assert response.topics[0].partition_errors[0].error_code == (
            ErrorCode.INCONSISTENT_TOPIC_ID
        )
        # StopReplica with delete from the real controller removes the replica and its log.
        controller.topic_ids[TP.topic] = TOPIC_ID
        response = await controller.send(
            2, StopReplicaRequest(**{**_fields(stop), "controller_epoch": 5, "controller_id": 1})
        )
        assert response.error_code == 0
        assert response.partition_errors[0].error_code == 0
        assert cluster.broker(2).partitions.get(TP) is None
        assert cluster.broker(2).log_manager.get_log(TP) is None
        await stop_cluster(cluster)


async def test_controlled_shutdown_asks_the_controller_first(tmp_path: Path) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(nursery, tmp_path, ids=(1,))
        await stop_cluster(cluster)
    (request,) = [
        r for r in cluster.controller.received if type(r).__name__ == "ControlledShutdownRequest"
    ]
    assert request.broker_id == 1
    assert request.broker_epoch == cluster.broker(1).broker_epoch


def _fields(message: object) -> dict[str, object]:
    return {name: getattr(message, name) for name in message.__dataclass_fields__}  # type: ignore[attr-defined]


@pytest.mark.parametrize("truncate_to_hw", [False, True])
async def test_kip101_follower_with_a_lagging_hw_keeps_acknowledged_records(
    tmp_path: Path, truncate_to_hw: bool
) -> None:
    """KIP-101's first scenario: a follower holds every acknowledged record but has not yet
    learnt the HW; it becomes a follower again (a new leader epoch), then the leader dies and
    it is elected. Truncating by leader epoch keeps the records; the pre-KIP-101 truncation to
    the local HW (trioka.replica.truncate.to.hw.on.become.follower) loses them."""
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(
            nursery,
            tmp_path,
            ids=(1, 2),
            configure=lambda i: {
                "trioka.replica.truncate.to.hw.on.become.follower": truncate_to_hw
            },
        )
        cluster.controller.create(
            TP.topic, TOPIC_ID, {0: PartitionReg(replicas=(1, 2), isr=(1, 2), leader=1)}
        )
        await cluster.controller.propagate()
        async with await cluster.client(1) as c:
            for value in (b"m0", b"m1", b"m2"):
                r = await produce(c, TP.topic, 0, batch([value]), acks=-1)
                assert r.error_code == 0
        await cluster.block(2)
        follower = cluster.broker(2).partitions.get(TP).state
        assert cluster.log_of(2, TP).log_end_offset == 3
        follower.high_watermark = 1  # it has not fetched since the leader's HW moved to 3
        # A new leader epoch (same leader) reaches broker 2: makeFollower.
        await cluster.controller.elect(TP, leader=1, isr=(1, 2))
        # Broker 1 dies; broker 2, still in the ISR, is elected.
        cluster.controller.brokers.pop(1)
        await cluster.controller.elect(TP, leader=2, isr=(2,))
        expected = [b"m0"] if truncate_to_hw else [b"m0", b"m1", b"m2"]
        assert all_values(cluster, 2) == expected
        cluster.controller.brokers[1] = cluster.broker(1)
        await stop_cluster(cluster)


async def test_replication_over_deploys_pooled_transport(tmp_path: Path) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(
            nursery,
            tmp_path,
            configure=lambda i: {"min.insync.replicas": 3, "num.replica.fetchers": 2},
            pooled_transport=True,
        )
        tps = [TopicPartition(TP.topic, p) for p in range(4)]
        cluster.controller.create(
            TP.topic,
            TOPIC_ID,
            {
                p: PartitionReg(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1 + p % 3)
                for p in range(4)
            },
        )
        await cluster.controller.propagate()
        for tp in tps:
            leader = cluster.controller.partitions[tp].leader
            async with await cluster.client(leader) as c:
                for i in range(3):
                    r = await produce(c, tp.topic, tp.partition, batch([b"%d" % i]), acks=-1)
                    assert r.error_code == 0, r
        for tp in tps:
            for broker_id in (1, 2, 3):
                await wait_until(
                    f"{tp} on broker {broker_id}",
                    lambda b=broker_id, t=tp: all_values(cluster, b, t) == [b"0", b"1", b"2"],
                )
        await stop_cluster(cluster)


async def test_restarted_broker_keeps_checkpointed_hws_until_leader_and_isr(
    tmp_path: Path,
) -> None:
    async with cluster_nursery() as nursery:
        cluster = await start_cluster(nursery, tmp_path, ids=(1,))
        cluster.controller.create(
            TP.topic, TOPIC_ID, {0: PartitionReg(replicas=(1,), isr=(1,), leader=1)}
        )
        await cluster.controller.propagate()
        async with await cluster.client(1) as c:
            r = await produce(c, TP.topic, 0, batch([b"a", b"b", b"c"]), acks=-1)
            assert r.error_code == 0
        await stop_cluster(cluster)
        restarted = await start_cluster(nursery, tmp_path, ids=(1,))
        broker = restarted.broker(1)
        assert broker.partitions.get(TP) is None  # hosted again only on LeaderAndIsr
        broker.partitions.checkpoint_high_watermarks()  # the periodic task, before it came
        # Its follower (broker 2) is not back: the HW cannot move, only be restored.
        restarted.controller.create(
            TP.topic,
            TOPIC_ID,
            {0: PartitionReg(replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=1)},
        )
        await restarted.controller.propagate()
        assert broker.partitions.get(TP).state.high_watermark == 3
        async with await restarted.client(1) as c:
            got = await fetch(c, TP.topic, 0, 0)
            assert values(got.records) == [b"a", b"b", b"c"]
        await stop_cluster(restarted)
