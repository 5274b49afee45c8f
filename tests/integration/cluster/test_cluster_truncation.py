"""KIP-320 on real broker processes: consumers detect a log truncated under them by an unclean
leader election, and act on auto.offset.reset as Kafka's consumer does.

Three brokers; the topic has RF=2 on the two brokers that are not the controller, with
unclean.leader.election.enable=true and min.insync.replicas=1. The follower is frozen (SIGSTOP)
until the leader drops it from the ISR (replica.lag.time.max.ms), the leader takes records with
acks=1 that only it has, and consumers read them (their positions are beyond the follower's log,
with the old leader epoch). Then the leader is SIGKILLed, the follower resumed and elected
uncleanly, and it takes new records at the offsets the lost ones had.

- auto.offset.reset=none: poll() raises LogTruncationError naming the partition, the position
  and the first offset known to diverge; a seek there goes on with the new leader's records.
- earliest / latest: the consumer goes back to the divergence point and reads every new record
  from it (neither back to the start nor past the new records, as a plain OFFSET_OUT_OF_RANGE
  reset would).
- A consumer that had not read beyond the new leader's log sees no truncation and reads on.

Both modes (`cluster_factory`): in Raft mode "the controller's broker" is the broker Metadata
names as controller (the lowest unfenced id, which forwards to the quorum); the unclean
election is the Raft controller's once the leader is fenced.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

import trio

from client import (
    Consumer,
    ConsumerRecord,
    DivergentOffset,
    LogTruncationError,
    NewTopic,
    Producer,
    TopicPartition,
)
from tests.integration.cluster.conftest import ClusterFactory

TOPIC = "truncated"
TP = TopicPartition(TOPIC, 0)
COMMITTED = 10
"""Records both replicas have (acks=all)."""
SUFFIX = 5
"""Records only the leader has (acks=1 after the follower left the ISR); lost in the election."""
NEW = 3
"""Records the uncleanly elected leader takes."""


def consumer(bootstrap: str, policy: str) -> Consumer:
    return Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset=policy,
        request_timeout_ms=5000,
        socket_connection_setup_timeout_ms=1000,
        fetch_max_wait_ms=200,
    )


async def read_until(c: Consumer, last_offset: int, within: float = 60) -> list[ConsumerRecord]:
    """Poll until the record at `last_offset` arrived; every record polled on the way."""
    out: list[ConsumerRecord] = []
    with trio.fail_after(within):
        while not out or out[-1].offset < last_offset:
            out += await c.poll(500)
    return out


async def test_consumers_detect_log_truncation_after_an_unclean_election(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3, {"replica.lag.time.max.ms": 1500})
    await cluster.wait_ready()
    controller = await cluster.controller_id()
    leader, follower = (b for b in sorted(cluster.brokers) if b != controller)
    async with cluster.admin() as admin:
        await admin.create_topics(
            [
                NewTopic(
                    TOPIC,
                    configs={"unclean.leader.election.enable": "true", "min.insync.replicas": "1"},
                    replica_assignment={0: [leader, follower]},
                )
            ]
        )
    before = await cluster.wait_partition(
        TOPIC, 0, lambda p: p.leader == leader and set(p.isr) == {leader, follower}
    )
    async with Producer(bootstrap_servers=cluster.live_bootstrap(), acks="all") as producer:
        for i in range(COMMITTED):
            await producer.send_and_wait(TOPIC, b"committed-%d" % i, partition=0)

    # Consumers talk to the controller's broker for metadata: it stays up and unfrozen.
    bootstrap = cluster.brokers[controller].bootstrap
    async with AsyncExitStack() as stack:
        c_none, c_earliest, c_latest, c_behind = [
            await stack.enter_async_context(consumer(bootstrap, policy))
            for policy in ("none", "earliest", "latest", "latest")
        ]
        ahead = {"none": c_none, "earliest": c_earliest, "latest": c_latest}
        for c in (*ahead.values(), c_behind):
            c.assign([TP])
            c.seek(TP, 0)
        # c_behind stops at what both replicas have: its position never passes the new log.
        behind_seen = await read_until(c_behind, COMMITTED - 1)
        assert [r.offset for r in behind_seen] == list(range(COMMITTED))

        # The follower leaves the ISR; the leader alone takes the suffix (acks=1).
        cluster.pause(follower)
        try:
            await cluster.wait_partition(TOPIC, 0, lambda p: list(p.isr) == [leader], within=30)
            async with Producer(
                bootstrap_servers=cluster.brokers[leader].bootstrap, acks="1", linger_ms=0
            ) as producer:
                offsets = [
                    (await producer.send_and_wait(TOPIC, b"suffix-%d" % i, partition=0)).offset
                    for i in range(SUFFIX)
                ]
            assert offsets == list(range(COMMITTED, COMMITTED + SUFFIX))
            # The other consumers read it all: positions at 15, in the first leader epoch.
            for c in ahead.values():
                seen = await read_until(c, COMMITTED + SUFFIX - 1)
                assert [r.offset for r in seen] == list(range(COMMITTED + SUFFIX))
            await cluster.brokers[leader].akill()
        finally:
            cluster.resume(follower)

        after = await cluster.wait_partition(TOPIC, 0, lambda p: p.leader == follower, within=60)
        assert after.leader_epoch > before.leader_epoch
        async with Producer(bootstrap_servers=cluster.live_bootstrap(), acks="all") as producer:
            new_offsets = [
                (await producer.send_and_wait(TOPIC, b"new-%d" % i, partition=0)).offset
                for i in range(NEW)
            ]
        diverge = new_offsets[0]
        # What the new leader has of the suffix (a fetch answered before the freeze could
        # have carried some; in practice none): the consumers at 15 are beyond its log.
        assert COMMITTED <= diverge < COMMITTED + SUFFIX, new_offsets
        assert new_offsets == list(range(diverge, diverge + NEW))
        new_records = [(diverge + i, b"new-%d" % i) for i in range(NEW)]

        # (a) auto.offset.reset=none: LogTruncationError naming partition and offsets.
        error: LogTruncationError | None = None
        with trio.fail_after(60):
            while error is None:
                try:
                    got = await c_none.poll(500)
                except LogTruncationError as exc:
                    error = exc
                else:
                    assert got == [], "records polled past a truncation"
        assert error.fetch_offsets == {TP: COMMITTED + SUFFIX}
        assert error.divergent_offsets == {TP: DivergentOffset(diverge, before.leader_epoch)}
        assert f"{TOPIC}-0: fetch offset {COMMITTED + SUFFIX}" in str(error)
        assert f"diverges at offset {diverge}" in str(error)
        # The user decides: going on from the divergence point reads the new records.
        c_none.seek(TP, error.divergent_offsets[TP].offset)
        got = await read_until(c_none, new_records[-1][0])
        assert [(r.offset, r.value) for r in got] == new_records

        # (b) earliest / latest: back to the divergence point, every new record read from it.
        for policy in ("earliest", "latest"):
            got = await read_until(ahead[policy], new_records[-1][0])
            assert [(r.offset, r.value) for r in got] == new_records, policy
            assert await ahead[policy].position(TP) == diverge + NEW

        # (c) Not beyond the new leader's log: no truncation, reading simply goes on.
        got = await read_until(c_behind, new_records[-1][0])
        kept = [(COMMITTED + i, b"suffix-%d" % i) for i in range(diverge - COMMITTED)]
        assert [(r.offset, r.value) for r in got] == kept + new_records
