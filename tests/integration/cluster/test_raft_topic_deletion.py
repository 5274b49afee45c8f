"""Topic deletion in Raft mode (KRaft's order) on 3 real controller processes and 3 real
Raft-mode brokers (tests/support/cluster.RaftCluster).

KRaft deletes a topic with one RemoveTopicRecord: DeleteTopics completes once it is committed,
whatever the brokers' state, and each broker deletes its replicas when it replays the record
(no StopReplica rounds, no /admin/delete_topics marker, nothing waits for a down broker).

- All brokers up: after DeleteTopics every broker's logs of the topic go, the name can be
  created again at once and holds none of the old records.
- A replica's broker is down during the deletion: DeleteTopics still completes, the name is
  created again at once (ZK mode would answer "marked for deletion"); the down broker's log of
  the old topic is a stray when it starts again (its first image does not name it, or names
  the new topic id): deleted before anything is served (KRaft's FULL apply, KIP-516), and
  once it hosts the new topic and leads it, it serves only the new records.

The ZK-mode deletion protocol is tested in test_cluster_topic_deletion.py.
"""

from __future__ import annotations

from client import NewTopic, TopicPartition
from tests.integration.cluster.conftest import RaftClusterFactory
from tests.integration.cluster.test_cluster_topic_deletion import (
    NO_REBALANCE,
    log_dirs,
    produce,
    read_all,
)
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until


def deleted_by_metadata(cluster: Cluster, node_id: int) -> int:
    """Partitions broker `node_id` deleted while applying metadata changes (its log)."""
    return sum(
        int(e.get("deleted", 0))  # type: ignore[call-overload]
        for e in cluster.brokers[node_id].events()
        if e.get("event") == "applied metadata changes"
    )


async def test_delete_removes_every_replica_and_the_name_comes_back_empty(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("gone", num_partitions=2, replication_factor=3)])
    await cluster.wait_partition("gone", 1, lambda p: len(p.isr) == 3)
    await produce(cluster, "gone", b"old", 20)
    for b in (1, 2, 3):
        assert len(log_dirs(cluster, b, "gone")) == 2

    async with cluster.admin() as admin:
        await admin.delete_topics(["gone"])
        assert "gone" not in await admin.list_topics()
    for b in (1, 2, 3):
        await wait_until(lambda b=b: not log_dirs(cluster, b, "gone"), within=30)
        # Deleted by replaying the RemoveTopicRecord (both partitions, maybe in two batches).
        await wait_until(lambda b=b: deleted_by_metadata(cluster, b) >= 2, within=10)

    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("gone", num_partitions=1, replication_factor=3)])
    await cluster.wait_partition("gone", 0, lambda p: len(p.isr) == 3)
    await produce(cluster, "gone", b"new", 3)
    assert await read_all(cluster.live_bootstrap(), "gone", 3) == [
        b"new-000",
        b"new-001",
        b"new-002",
    ]


async def test_a_replica_down_during_deletion_is_a_stray_at_restart_and_never_served(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    stale, one, two = 3, 1, 2
    tp = TopicPartition("phoenix", 0)
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("phoenix", replica_assignment={0: [one, stale]})])
    await cluster.wait_partition("phoenix", 0, lambda p: len(p.isr) == 2)
    await produce(cluster, "phoenix", b"old", 10)
    await wait_until(lambda: log_dirs(cluster, stale, "phoenix") != [], within=10)
    await cluster.brokers[stale].astop(within=60)
    await cluster.wait_partition("phoenix", 0, lambda p: stale not in p.isr, within=30)

    # Deleted and created again while `stale` is down: nothing waits for it.
    async with cluster.admin() as admin:
        await admin.delete_topics(["phoenix"])
        await wait_until(lambda: not log_dirs(cluster, one, "phoenix"), within=30)
        await admin.create_topics([NewTopic("phoenix", replica_assignment={0: [one, two]})])
    await cluster.wait_partition("phoenix", 0, lambda p: len(p.isr) == 2)
    await produce(cluster, "phoenix", b"new", 3)
    assert log_dirs(cluster, stale, "phoenix") != []  # the stale log is still on disk

    await cluster.brokers[stale].astart(within=60)
    await wait_until(lambda: not log_dirs(cluster, stale, "phoenix"), within=30)
    strays = [
        e for e in cluster.brokers[stale].events() if e.get("event") == "deleting stray partition"
    ]
    assert [e["topic_partition"] for e in strays] == ["phoenix-0"], strays

    # Hosting the new topic, it replicates only the new records and, leading, serves only them.
    async with cluster.admin() as admin:
        await admin.alter_partition_reassignments({tp: [stale, one, two]})

        async def joined() -> bool:
            return not await admin.list_partition_reassignments([tp])

        await wait_until(joined, within=45, every=0.1)
        await cluster.wait_partition("phoenix", 0, lambda p: stale in p.isr, within=30)
        await admin.elect_leaders("preferred", [tp])
    await cluster.wait_partition("phoenix", 0, lambda p: p.leader == stale, within=30)
    values = await read_all(cluster.brokers[stale].bootstrap, "phoenix", 3)
    assert values == [b"new-000", b"new-001", b"new-002"]
