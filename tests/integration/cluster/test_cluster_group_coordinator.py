"""The group coordinator on a 3-broker cluster, both metadata modes (`cluster_factory`), over
the wire: FindCoordinator creates `__consumer_offsets` and names the leader of the group's
partition; two members join, sync, heartbeat and commit; after SIGKILL of the coordinator's
broker, FindCoordinator names the partition's new leader, which answers
COORDINATOR_LOAD_IN_PROGRESS until it has loaded the partition and then serves the committed
offsets and the group's generation (failpoint `group.coordinator.hold_load` makes every load
wait a few seconds, so the test sees the loading state)."""

from __future__ import annotations

import trio

from broker.group.hashing import OFFSETS_TOPIC, partition_for
from protocol.errors import ErrorCode
from protocol.messages.groups import DescribeGroupsRequest
from tests.integration.broker.test_group_coordinator_broker import join_two
from tests.integration.cluster.conftest import ClusterFactory
from tests.integration.group_wire import commit, fetch_offsets, find_coordinator, heartbeat, sync
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

PARTITIONS = 4
OVERRIDES = {
    "offsets.topic.num.partitions": PARTITIONS,
    "group.min.session.timeout.ms": 2000,
    "group.initial.rebalance.delay.ms": 300,
}
GROUP = "billing"
HOLD_S = 4


async def _coordinator_served(cluster: Cluster, node_id: int, codes: set[int]) -> bool:
    """The coordinator serves GROUP's offsets (records every error code seen meanwhile)."""
    async with await WireClient.connect("127.0.0.1", cluster.brokers[node_id].port) as c:
        code, _ = await fetch_offsets(c, GROUP, "events", [0])
    codes.add(code)
    return code == 0


async def test_coordinator_failover_keeps_offsets_and_generation(
    cluster_factory: ClusterFactory,
) -> None:
    # Every load waits HOLD_S before it reads: the new coordinator is seen loading.
    cluster = cluster_factory(
        3, OVERRIDES, env={"TRIOKA_FAILPOINTS": f"group.coordinator.hold_load=return({HOLD_S})"}
    )
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topic("events", 2, 3)
    index = partition_for(GROUP, PARTITIONS)
    any_broker = cluster.brokers[min(cluster.brokers)]
    found = await find_coordinator("127.0.0.1", any_broker.port, GROUP, within=60)
    offsets_partition = await cluster.wait_partition(
        OFFSETS_TOPIC, index, lambda i: i.leader >= 0 and len(i.isr) == 3
    )
    assert found.node_id == offsets_partition.leader
    assert found.port == cluster.brokers[found.node_id].port
    old = found.node_id
    await wait_until(lambda: _coordinator_served(cluster, old, set()), within=30, every=0.1)

    port = cluster.brokers[old].port
    first, second = await join_two("127.0.0.1", port, GROUP)
    assert first.error_code == second.error_code == 0, (first, second)
    leader = first if first.leader == first.member_id else second
    gen = leader.generation_id
    async with await WireClient.connect("127.0.0.1", port) as c:
        async with trio.open_nursery() as n:

            async def follower_sync() -> None:
                async with await WireClient.connect("127.0.0.1", port) as f:
                    other = second if leader is first else first
                    assert (await sync(f, GROUP, gen, other.member_id)).error_code == 0

            n.start_soon(follower_sync)
            assert (await sync(c, GROUP, gen, leader.member_id, {})).error_code == 0
        assert await heartbeat(c, GROUP, gen, leader.member_id) == 0
        assert await commit(c, GROUP, gen, leader.member_id, "events", {0: 11, 1: 22}) == {
            0: 0,
            1: 0,
        }

    await cluster.brokers[old].akill()
    survivor = next(i for i in cluster.brokers if i != old)

    async def moved() -> bool:
        found = await find_coordinator("127.0.0.1", cluster.brokers[survivor].port, GROUP)
        return found.node_id != old

    await wait_until(moved, within=60, every=0.2)
    new = (await find_coordinator("127.0.0.1", cluster.brokers[survivor].port, GROUP)).node_id
    assert (await cluster.partition(OFFSETS_TOPIC, index)).leader == new
    seen: set[int] = set()
    await wait_until(lambda: _coordinator_served(cluster, new, seen), within=30, every=0.05)
    assert ErrorCode.COORDINATOR_LOAD_IN_PROGRESS in seen, seen
    assert seen <= {0, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR}, seen
    async with await WireClient.connect("127.0.0.1", cluster.brokers[new].port) as c:
        assert await fetch_offsets(c, GROUP, "events", [0, 1]) == (0, {0: 11, 1: 22})
        # The group's generation came back with it: the leader's heartbeat is accepted, a
        # wrong generation is not.
        assert await heartbeat(c, GROUP, gen, leader.member_id) == 0
        assert await heartbeat(c, GROUP, gen + 1, leader.member_id) == ErrorCode.ILLEGAL_GENERATION
        described = (await c.request(DescribeGroupsRequest(groups=(GROUP,)))).groups[0]
        assert described.group_state == "Stable" and len(described.members) == 2


async def test_commit_is_answered_only_once_replicated(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3, {**OVERRIDES, "offsets.commit.timeout.ms": 1000})
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topic("events", 1, 3)
    index = partition_for(GROUP, PARTITIONS)
    found = await find_coordinator("127.0.0.1", cluster.brokers[min(cluster.brokers)].port, GROUP)
    info = await cluster.wait_partition(OFFSETS_TOPIC, index, lambda i: len(i.isr) == 3)
    coordinator = cluster.brokers[found.node_id]
    await wait_until(lambda: _coordinator_served(cluster, found.node_id, set()), within=30)
    followers = [r for r in info.replicas if r != found.node_id]
    async with await WireClient.connect("127.0.0.1", coordinator.port) as c:
        assert await commit(c, GROUP, -1, "", "events", {0: 1}) == {0: 0}
        for f in followers:  # the ISR cannot follow: the HW stays put
            cluster.pause(f)
        try:
            assert await commit(c, GROUP, -1, "", "events", {0: 2}) == {
                0: ErrorCode.REQUEST_TIMED_OUT
            }
            assert await fetch_offsets(c, GROUP, "events", [0]) == (0, {0: 1})
        finally:
            for f in followers:
                cluster.resume(f)

        async def committed() -> bool:
            return await commit(c, GROUP, -1, "", "events", {0: 3}) == {0: 0}

        await wait_until(committed, within=60, every=0.5)
        assert await fetch_offsets(c, GROUP, "events", [0]) == (0, {0: 3})
