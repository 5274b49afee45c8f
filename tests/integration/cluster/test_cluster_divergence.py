"""A divergent suffix (KIP-101/279; docs/internals.md, broker/'s "Replica state" and
"Replication") on real broker processes: the followers are frozen (SIGSTOP), the leader takes
records with acks=1 that nobody replicates, then it is SIGKILLed. A follower becomes leader and
takes new records; the old leader, started again, truncates exactly the suffix nobody else has
(by leader epoch, not to its own HW), catches up and rejoins the ISR, and no reader ever sees
the lost suffix. (Whatever part of the suffix a fetch had already carried to a follower's
socket survives, on every replica.)

Both modes (`cluster_factory`): in Raft mode the killed leader is fenced after
broker.session.timeout.ms, and the restarted one registers again and rejoins the ISR.
"""

from __future__ import annotations

from client import Producer
from tests.integration.cluster.conftest import ClusterFactory
from tests.integration.cluster.test_cluster_failover import consume_everything, create_topic

COMMITTED = 20
SUFFIX = 5


async def test_old_leader_truncates_exactly_its_unreplicated_suffix_and_rejoins(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3)
    await cluster.wait_ready()
    await create_topic(cluster, "diverge", 1)
    before = await cluster.partition("diverge", 0)
    leader = before.leader
    followers = [b for b in cluster.brokers if b != leader]

    async with Producer(bootstrap_servers=cluster.live_bootstrap(), acks="all") as producer:
        for i in range(COMMITTED):
            await producer.send_and_wait("diverge", b"committed-%d" % i, partition=0)

    # Freeze the followers (well within their 3 s sessions), write a suffix only the leader has,
    # and kill the leader before anyone could fetch it.
    for f in followers:
        cluster.pause(f)
    try:
        async with Producer(
            bootstrap_servers=cluster.brokers[leader].bootstrap, acks="1", linger_ms=0
        ) as producer:
            offsets = [
                (await producer.send_and_wait("diverge", b"suffix-%d" % i, partition=0)).offset
                for i in range(SUFFIX)
            ]
        assert offsets == list(range(COMMITTED, COMMITTED + SUFFIX))
        await cluster.brokers[leader].akill()
    finally:
        for f in followers:
            cluster.resume(f)

    new = await cluster.wait_partition("diverge", 0, lambda p: p.leader in followers, within=60)
    async with Producer(bootstrap_servers=cluster.live_bootstrap(), acks="all") as producer:
        for i in range(SUFFIX):
            await producer.send_and_wait("diverge", b"new-%d" % i, partition=0)

    await cluster.brokers[leader].astart(within=60)
    await cluster.wait_partition(
        "diverge", 0, lambda p: leader in p.isr and len(p.isr) == 3, within=60
    )
    # The old leader, now a follower, sends last_fetched_epoch = the suffix's epoch; the new
    # leader answers diverging_epoch with where that epoch ends in its own log, and the
    # follower cuts there (broker.fetcher's "truncating on diverging epoch" event).
    events = cluster.brokers[leader].events(since_start=True)
    truncations = [e for e in events if e.get("event") == "truncating on diverging epoch"]
    assert truncations, cluster.brokers[leader].log_tail()
    assert not [e for e in events if e.get("event") == "truncating on becoming follower"]
    first = truncations[0]
    assert first["topic_partition"] == "diverge-0", first
    assert first["diverging_epoch"] == before.leader_epoch, first
    # A fetch the followers had parked on the leader may have carried the first suffix records
    # to their sockets before they froze: those reached the new leader. The old leader cuts
    # exactly at the end of the new leader's copy of the old epoch, never below its HW.
    kept = first["leader_end_offset"] - COMMITTED
    assert 0 <= kept < SUFFIX, first
    assert first["truncate_to"] == first["leader_end_offset"], first
    assert first["log_end_offset"] == COMMITTED + SUFFIX, first
    assert new.leader != leader

    values = await consume_everything(cluster, "diverge", 1)
    assert values == (
        [b"committed-%d" % i for i in range(COMMITTED)]
        + [b"suffix-%d" % i for i in range(kept)]
        + [b"new-%d" % i for i in range(SUFFIX)]
    )
