"""A producer retrying through a leader kill writes no duplicates (issue 5), both modes.

The first leader of the partition exits (failpoint `broker.produce.exit_before_response`,
fired once, on that broker only) right after the first acks=all Produce was replicated and
before it answers: the write is in the ISR's logs but unacknowledged, so the producer retries
it at the next leader. The sends and a read-back of the whole partition go into a chaos
History (deploy.chaos) and its checker judges them: with idempotence on, no duplicate and no
lost acknowledged write (the new leader answers the retry as a duplicate, with the original
offset); with it off, the same scenario writes the retried batch twice and the checker says so.
"""

from __future__ import annotations

import pytest
import structlog
import trio

from client import Consumer, Producer, TopicPartition
from client.admin import NewTopic
from deploy.chaos.check.checker import check
from deploy.chaos.check.history import History, OpKind, OpType, PolledRecord, SendValue
from protocol.errors import KafkaError
from tests.integration.cluster.conftest import ClusterFactory
from tests.support.cluster import Cluster

TOPIC = "dups"
FIRST_LEADER = 1
RECORDS = 200
FAILPOINT = {"TRIOKA_FAILPOINTS": "broker.produce.exit_before_response=1*return"}


async def produce(cluster: Cluster, history: History, *, idempotent: bool) -> None:
    async with Producer(
        bootstrap_servers=cluster.live_bootstrap(),
        acks="all",
        enable_idempotence=idempotent,
        linger_ms=5,
        batch_size=2000,  # several batches, some in flight when the leader goes
        request_timeout_ms=5000,
        delivery_timeout_ms=60000,
        metadata_max_age_ms=1000,
    ) as producer:
        pending = []
        for i in range(RECORDS):
            value = b"value-%04d" % i
            op = history.invoke("producer", OpKind.SEND, SendValue(TOPIC, value))
            pending.append((op, await producer.send(TOPIC, value, partition=0)))
        for op, future in pending:
            try:
                md = await future
            except KafkaError as exc:
                history.complete(op, OpType.INFO, error=str(exc))  # may or may not be written
                continue
            history.complete(
                op, OpType.OK, SendValue(TOPIC, op.value.value, partition=md.partition,
                                         offset=md.offset),
            )  # fmt: skip


async def read_back(cluster: Cluster, history: History) -> None:
    tp = TopicPartition(TOPIC, 0)
    async with Consumer(
        bootstrap_servers=cluster.live_bootstrap(), auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        position = 0
        with trio.fail_after(60):
            while position < end:
                op = history.invoke("consumer", OpKind.POLL, ())
                records = await consumer.poll(1000)
                history.complete(
                    op,
                    OpType.OK,
                    tuple(PolledRecord(r.topic, r.partition, r.offset, r.value) for r in records),
                )
                if records:
                    position = records[-1].offset + 1


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not-idempotent"])
async def test_a_retry_through_a_leader_kill_writes_no_duplicate(
    cluster_factory: ClusterFactory, idempotent: bool
) -> None:
    cluster = cluster_factory(3, {"min.insync.replicas": 2}, broker_env={FIRST_LEADER: FAILPOINT})
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topics(
            [NewTopic(TOPIC, 1, 3, {"min.insync.replicas": "2"}, {0: (FIRST_LEADER, 2, 3)})]
        )
    await cluster.wait_partition(TOPIC, 0, lambda p: p.leader == FIRST_LEADER and len(p.isr) == 3)

    history = History()
    with structlog.testing.capture_logs() as events:
        await produce(cluster, history, idempotent=idempotent)
    retried = [e for e in events if e["event"] == "retrying batch"]
    assert retried, "the producer never retried: the scenario did not happen"
    # The failpoint fired: the first leader is gone and another one took over.
    assert await cluster.brokers[FIRST_LEADER].await_exit(within=5) == 1
    info = await cluster.wait_partition(TOPIC, 0, lambda p: p.leader not in (-1, FIRST_LEADER))
    assert FIRST_LEADER not in info.isr
    await read_back(cluster, history)

    result = check(history)
    assert not result.lost, result.summary()
    assert not result.unexpected, result.summary()
    if idempotent:
        assert result.valid, result.summary()
        assert result.acknowledged == RECORDS and result.read == RECORDS, result.summary()
        offsets = [op.value.offset for op in history.completed(OpKind.SEND)]
        assert sorted(offsets) == list(range(RECORDS))  # the retried batch kept its offsets
    else:
        # The batch the first leader replicated but never acknowledged was written again.
        assert result.duplicates, result.summary()
        assert result.read > RECORDS
