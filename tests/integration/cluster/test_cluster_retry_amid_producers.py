"""A retried idempotent batch reaching the NEW leader after another producer wrote there is
answered with its original offset, no error, and is stored once (issue 6's chaos finding:
DUPLICATE_SEQUENCE_NUMBER with offset -1 during failovers), both metadata modes.

Real processes; the scenario is forced with the failpoint `broker.produce.exit_before_response`
(fired once, on the first leader only) and a long retry backoff on the first producer:

1. producer A sends `a` (acks=all): the first leader appends it, the ISR replicates it, and the
   leader exits before answering. A retries `a` after its backoff;
2. meanwhile a new leader is elected and producer B writes `x` there (acknowledged);
3. A sends `c`, which queues behind the pending retry of `a`.

The log holds a, x, then (once sent) c. Kafka sends one batch per partition per Produce, so the
retry of `a` goes alone and the new leader answers it from its producer state (built while it
replicated `a` as a follower) with a's original offset. Sent together with `c`, the two would
not sit one after the other in the log and no single base offset could be answered.
"""

from __future__ import annotations

import structlog
import trio

from client import Consumer, Producer, TopicPartition
from client.admin import NewTopic
from tests.integration.cluster.conftest import ClusterFactory
from tests.support.cluster import Cluster

TOPIC = "retry-amid"
FIRST_LEADER = 1
FAILPOINT = {"TRIOKA_FAILPOINTS": "broker.produce.exit_before_response=1*return"}
RETRY_BACKOFF_MS = 8000
"""A's first retry waits 6.4-9.6 s (20% jitter): time for the failover (session timeout 3 s)
and B's write. The test checks that `a` was still unanswered when `x` was acknowledged."""


async def read_all(cluster: Cluster) -> list[tuple[int, bytes]]:
    tp = TopicPartition(TOPIC, 0)
    async with Consumer(
        bootstrap_servers=cluster.live_bootstrap(), auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        out: list[tuple[int, bytes]] = []
        with trio.fail_after(30):
            while not out or out[-1][0] < end - 1:
                out += [(r.offset, r.value) for r in await consumer.poll(1000)]
        return out


async def test_a_retry_at_the_new_leader_after_other_writes_gets_its_original_offset(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3, {"min.insync.replicas": 2}, broker_env={FIRST_LEADER: FAILPOINT})
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topics(
            [NewTopic(TOPIC, 1, 3, {"min.insync.replicas": "2"}, {0: (FIRST_LEADER, 2, 3)})]
        )
    await cluster.wait_partition(TOPIC, 0, lambda p: p.leader == FIRST_LEADER and len(p.isr) == 3)

    with structlog.testing.capture_logs() as events:
        async with Producer(
            bootstrap_servers=cluster.live_bootstrap(),
            acks="all",
            enable_idempotence=True,
            linger_ms=0,
            retry_backoff_ms=RETRY_BACKOFF_MS,
            retry_backoff_max_ms=RETRY_BACKOFF_MS,
            request_timeout_ms=5000,
            delivery_timeout_ms=120_000,
        ) as producer_a:
            a = await producer_a.send(TOPIC, b"a", partition=0)
            # The failpoint fired: the first leader is gone, another one took over.
            assert await cluster.brokers[FIRST_LEADER].await_exit(within=15) == 1
            await cluster.wait_partition(
                TOPIC, 0, lambda p: p.leader not in (-1, FIRST_LEADER), within=30
            )
            async with Producer(
                bootstrap_servers=cluster.live_bootstrap(), acks="all", enable_idempotence=True
            ) as producer_b:
                x = await producer_b.send_and_wait(TOPIC, b"x", partition=0)
            assert not a.done(), "the retry of a beat x: the scenario did not happen"
            c = await producer_a.send(TOPIC, b"c", partition=0)  # queues behind a's retry
            with trio.fail_after(60):
                md_a, md_c = await a, await c
    assert any(e["event"] == "retrying batch" for e in events), "a was never retried"

    stored = await read_all(cluster)
    assert sorted(v for _, v in stored) == [b"a", b"c", b"x"], stored  # each value once
    at = {v: o for o, v in stored}
    assert (md_a.offset, x.offset, md_c.offset) == (at[b"a"], at[b"x"], at[b"c"])
    assert md_a.offset < x.offset < md_c.offset  # x sits between a and c
