"""Log compaction in a replicated cluster: every replica's cleaner compacts its own log (the
cleaner is local storage work; nothing of it is replicated), followers keep fetching across the
leader's gaps, and after the leader is killed a consumer of the new leader (a follower that
compacted by itself) reads the latest value of every key.

Raft mode only: the cleaner, the follower fetch path and the reads are the same code in both
metadata modes (the cleaner sees only LogManager and PartitionManager's high watermarks); what
differs between modes, the leader election after the kill, is tested for both elsewhere
(test_cluster_failover.py)."""

from __future__ import annotations

from pathlib import Path

import trio

from client import Consumer, Producer, TopicPartition
from tests.integration.cluster.conftest import RaftClusterFactory
from tests.support.waiting import wait_until

TOPIC = "compacted"
CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "min.cleanable.dirty.ratio": "0.1",
    "min.insync.replicas": "2",
}
OVERRIDES = {"log.cleaner.backoff.ms": 100, "log.flush.scheduler.interval.ms": 100}


def segment_bytes(log_dir: Path) -> int:
    return sum(f.stat().st_size for f in (log_dir / f"{TOPIC}-0").glob("*.log"))


def cleaned_by(cluster: object, node_id: int) -> bool:
    return any(
        e.get("event") == "log cleaned" and e.get("topic_partition") == f"{TOPIC}-0"
        for e in cluster.brokers[node_id].events()  # type: ignore[attr-defined]
    )


async def test_replicas_compact_independently_and_the_new_leader_serves_latest_values(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(3, OVERRIDES)
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topic(TOPIC, 1, 3, CONFIGS)
    info = await cluster.wait_partition(TOPIC, 0, lambda i: i.leader >= 0 and len(i.isr) == 3)
    leader = info.leader
    late, other = [n for n in cluster.brokers if n != leader]
    # `late` misses the writes: it will catch up by fetching across the leader's gaps.
    await cluster.brokers[late].akill()

    latest: dict[bytes, bytes] = {}
    async with Producer(bootstrap_servers=cluster.live_bootstrap(), acks="all") as producer:
        for i in range(80):
            for k in range(4):
                key, value = b"key-%d" % k, b"v-%d-%d-" % (k, i) + b"x" * 120
                await producer.send_and_wait(TOPIC, value, key=key, partition=0)
                latest[key] = value
    written = 80 * 4

    # Leader and follower each clean their own log.
    await wait_until(
        lambda: cleaned_by(cluster, leader) and cleaned_by(cluster, other), within=60, every=0.2
    )
    sizes = {n: segment_bytes(cluster.brokers[n].log_dirs[0]) for n in (leader, other)}
    assert all(size < written * 150 / 3 for size in sizes.values()), sizes

    await cluster.brokers[late].astart(within=60)
    await cluster.wait_partition(TOPIC, 0, lambda i: late in i.isr, within=60)
    # Only `late` is left: it becomes the leader, with the log it fetched across gaps.
    await cluster.brokers[leader].akill()
    await cluster.brokers[other].akill()
    await cluster.wait_partition(TOPIC, 0, lambda i: i.leader == late, within=60)

    tp = TopicPartition(TOPIC, 0)
    got: dict[bytes | None, bytes | None] = {}
    async with Consumer(
        bootstrap_servers=cluster.live_bootstrap(), auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        assert end == written
        n = 0
        with trio.fail_after(30):
            while await consumer.position(tp) < end:
                for record in await consumer.poll(500):
                    got[record.key] = record.value
                    n += 1
    assert got == latest
    assert n < written / 3  # gaps: what the old leader's cleaner removed never reached `late`
