"""The idempotent producer, broker side, on real clusters in both modes (raw wire requests; the
client side is tested with the client):

- InitProducerId from every broker gives distinct ids (each broker's block comes from the
  controller), and still distinct ones after every process was restarted (the controller's
  block record survives: /latest_producer_id_block, or ProducerIds records in the Raft log).
- A Produce of the same idempotent batch twice gets the same base offset and the log holds one
  copy; a sequence gap gets OUT_OF_ORDER_SEQUENCE_NUMBER naming producer and sequences.
- After the leader is SIGKILLed, the new leader (which only replicated the batches) answers a
  retried batch as a duplicate with its original offset.
"""

from __future__ import annotations

import trio

from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.produce import ProducePartition, ProduceRequest, ProduceTopic
from protocol.record_batch import Record, build_batch
from tests.integration.cluster.conftest import ClusterFactory
from tests.integration.cluster.test_cluster_failover import consume_everything, create_topic
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import Cluster, RaftCluster
from tests.support.waiting import wait_until
from tests.support.wire import WireClient


async def init_producer_id(broker: BrokerProcess) -> int:
    async with await WireClient.connect(broker.host, broker.port) as wire:
        with trio.fail_after(30):
            while True:
                response: InitProducerIdResponse = await wire.request(InitProducerIdRequest())
                if response.error_code != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                    break
    assert response.error_code == 0, response
    assert response.producer_epoch == 0
    return response.producer_id


async def produce(broker: BrokerProcess, topic: str, records: bytes) -> tuple[int, int, str]:
    """(error code, base offset, message) of an acks=all Produce to partition 0."""
    request = ProduceRequest(
        acks=-1,
        timeout_ms=10_000,
        topics=(
            ProduceTopic(name=topic, partitions=(ProducePartition(index=0, records=records),)),
        ),
    )
    async with await WireClient.connect(broker.host, broker.port) as wire:
        response = await wire.request(request)
    part = response.topics[0].partitions[0]
    return part.error_code, part.base_offset, part.error_message or ""


def idempotent_batch(pid: int, seq: int, values: list[bytes]) -> bytes:
    return build_batch(
        [Record(value=v, timestamp=1_700_000_000_000) for v in values],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
    )


async def restart_everything(cluster: Cluster) -> None:
    for broker in cluster.brokers.values():
        await broker.astop()
    if isinstance(cluster, RaftCluster):
        for ctl in cluster.controllers.values():
            await ctl.astop()
        async with trio.open_nursery() as nursery:
            for ctl in cluster.controllers.values():
                nursery.start_soon(ctl.astart)
    async with trio.open_nursery() as nursery:
        for broker in cluster.brokers.values():
            nursery.start_soon(broker.astart)
    await cluster.wait_ready()


async def test_init_producer_id_is_unique_across_brokers_and_restarts(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3)
    await cluster.wait_ready()
    first = [await init_producer_id(b) for b in cluster.brokers.values() for _ in range(2)]
    assert len(set(first)) == len(first), first
    await restart_everything(cluster)
    second = [await init_producer_id(b) for b in cluster.brokers.values()]
    assert len(set(first + second)) == len(first) + len(second), (first, second)


async def test_duplicates_gaps_and_a_new_leader_after_sigkill(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3, {"min.insync.replicas": 2})
    await cluster.wait_ready()
    await create_topic(cluster, "idem", 1, **{"min.insync.replicas": "2"})
    info = await cluster.partition("idem", 0)
    leader = cluster.brokers[info.leader]
    pid = await init_producer_id(leader)

    first = idempotent_batch(pid, 0, [b"a0", b"a1", b"a2"])
    code, base, _ = await produce(leader, "idem", first)
    assert (code, base) == (0, 0)
    assert (await produce(leader, "idem", first))[:2] == (0, 0)  # a retry: same offset
    second = idempotent_batch(pid, 3, [b"b3", b"b4"])
    assert (await produce(leader, "idem", second))[:2] == (0, 3)

    code, _, message = await produce(leader, "idem", idempotent_batch(pid, 9, [b"gap"]))
    assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert f"producer {pid}" in message and "expected sequence 5, found sequence 9" in message

    old = info.leader
    await leader.akill()
    after = await cluster.wait_partition("idem", 0, lambda p: p.leader >= 0 and p.leader != old)
    new_leader = cluster.brokers[after.leader]

    async def retried() -> bool:
        code, base, _ = await produce(new_leader, "idem", second)
        # The election may not have reached the broker yet (NOT_LEADER_OR_FOLLOWER): retry.
        assert code in (0, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT), code
        return code == 0 and base == 3

    await wait_until(retried, within=30, every=0.2)
    assert (await produce(new_leader, "idem", idempotent_batch(pid, 5, [b"c5"])))[:2] == (0, 5)
    values = await consume_everything(cluster, "idem", 1)
    assert values == [b"a0", b"a1", b"a2", b"b3", b"b4", b"c5"]
