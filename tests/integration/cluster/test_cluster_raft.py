"""Raft mode only: what a quorum of controller processes changes, on a cluster of 3 real
controller processes and 3 real Raft-mode brokers (tests/support/cluster.RaftCluster).

- The active controller is SIGKILLed: a standby becomes active (a higher Raft epoch) and
  completes a CreateTopics sent through a broker; the topic created before is still there (the
  new active controller's state came from the replicated log).
- 2 of 3 controllers dead: a metadata write (CreateTopics) fails with a clear error, while
  produce (acks=all) and consume to the existing leaders go on.
- A broker that stops heartbeating (SIGSTOP) keeps its leaderships until
  broker.session.timeout.ms has passed and loses them after it (time is only bounded from
  below, which cannot flake, or waited for with slack); resumed, it is unfenced and rejoins
  the ISR.
- Controlled shutdown through the heartbeat: SIGTERM on a leader broker moves its leaderships
  away before it exits, with a session timeout far longer than the test, so fencing cannot be
  what moved them.
- Restart: every controller is stopped and started again (snapshots every few records); the
  topics are all there and the quorum serves writes.
"""

from __future__ import annotations

import pytest
import trio

from client import NewTopic, Producer
from client.metadata import PartitionInfo
from protocol.errors import ErrorCode, KafkaError
from tests.integration.cluster.conftest import RaftClusterFactory
from tests.integration.cluster.test_cluster_failover import consume_everything, create_topic
from tests.support.cluster import DEFAULT_HEARTBEAT_INTERVAL_MS, RaftCluster
from tests.support.waiting import wait_until

NO_REBALANCE = {"auto.leader.rebalance.enable": False}


async def produce(
    cluster: RaftCluster, topic: str, values: list[bytes], partition: int = 0
) -> None:
    async with Producer(
        bootstrap_servers=cluster.live_bootstrap(), acks="all", linger_ms=1,
        request_timeout_ms=5000, delivery_timeout_ms=30000,
    ) as producer:  # fmt: skip
        for value in values:
            await producer.send_and_wait(topic, value, partition=partition)


async def test_active_controller_sigkill_a_standby_takes_over_and_completes_create_topics(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    await create_topic(cluster, "before", 2)
    old_quorum = await cluster.quorum()
    old = old_quorum.leader_id
    await cluster.controllers[old].akill()

    new = await cluster.wait_active_controller(lambda c: c != old, within=30)
    assert new in cluster.controllers and new != old
    assert (await cluster.quorum()).leader_epoch > old_quorum.leader_epoch
    with trio.fail_after(60):
        async with cluster.admin(**{"default.api.timeout.ms": 30_000}) as admin:
            await admin.create_topic("after", 2, 3)
    for p in range(2):
        await cluster.wait_partition("after", p, lambda i: i.leader >= 0 and len(i.isr) == 3)
        before = await cluster.partition("before", p)
        assert before.leader >= 0 and len(before.replicas) == 3


async def test_two_of_three_controllers_dead_writes_fail_clearly_data_keeps_flowing(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    await create_topic(cluster, "events", 1, **{"min.insync.replicas": "2"})
    first = [b"a%03d" % i for i in range(20)]
    await produce(cluster, "events", first)

    for node_id in sorted(cluster.controllers)[:2]:
        await cluster.controllers[node_id].akill()
    # No majority: no leader can be elected, so nothing can be committed.
    with pytest.raises(KafkaError) as refused, trio.fail_after(90):
        async with cluster.admin(**{"default.api.timeout.ms": 20_000}) as admin:
            await admin.create_topic("never", 1, 3)
    assert refused.value.code in (ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT), (
        refused.value
    )
    message = refused.value.message
    assert message and message != refused.value.code.name, f"no clear message: {message!r}"

    # The brokers keep their leaders and ISRs: acks=all writes and reads go on.
    second = [b"b%03d" % i for i in range(20)]
    await produce(cluster, "events", second)
    assert await consume_everything(cluster, "events", 1) == first + second


async def test_sigstopped_broker_keeps_its_leaderships_until_the_session_timeout(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    session_ms = 4000
    cluster = raft_cluster_factory(3, NO_REBALANCE, session_timeout_ms=session_ms)
    await cluster.wait_ready()
    victim, others = 2, [1, 3]
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("held", replica_assignment={0: [victim, *others]})])
    await cluster.wait_partition("held", 0, lambda p: p.leader == victim and len(p.isr) == 3)

    cluster.pause(victim)
    paused_at = trio.current_time()
    # The controller heard from the victim at most one heartbeat interval before the pause:
    # it may not fence it before this instant.
    earliest_fence = paused_at + (session_ms - DEFAULT_HEARTBEAT_INTERVAL_MS) / 1000
    seen: list[tuple[float, PartitionInfo]] = []

    async def moved() -> bool:
        info = await cluster.partition("held", 0)
        seen.append((trio.current_time(), info))
        return info.leader != victim

    await wait_until(moved, within=session_ms / 1000 + 60, every=0.1)
    answered_at, info = seen[-1]
    # Every answer that still named the victim came before the change; the change was seen
    # after it happened, so no earlier than the earliest fence: a lower bound, which a slow
    # machine cannot break.
    assert answered_at >= earliest_fence, (answered_at - paused_at, info)
    assert info.leader in others and victim not in info.isr, info


async def test_fenced_broker_that_comes_back_rejoins_the_isr(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    victim = 2
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("back", replica_assignment={0: [1, victim, 3]})])
    await cluster.wait_partition("back", 0, lambda p: p.leader == 1 and len(p.isr) == 3)
    cluster.pause(victim)
    await cluster.wait_partition("back", 0, lambda p: victim not in p.isr, within=60)
    cluster.resume(victim)
    await cluster.wait_ready(within=60)  # registered again and unfenced
    await cluster.wait_partition("back", 0, lambda p: victim in p.isr, within=30)


async def test_controlled_shutdown_through_the_heartbeat_moves_leadership_before_exit(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    # A minute of session: if the leaderships move within the test's bounds, the controlled
    # shutdown moved them, not fencing.
    cluster = raft_cluster_factory(3, NO_REBALANCE, session_timeout_ms=60_000)
    await cluster.wait_ready()
    victim = 2
    async with cluster.admin() as admin:
        await admin.create_topics(
            [NewTopic("moving", replica_assignment={0: [victim, 1, 3], 1: [victim, 3, 1]})]
        )
    for p in range(2):
        await cluster.wait_partition("moving", p, lambda i: i.leader == victim and len(i.isr) == 3)
    stopping = cluster.brokers[victim]
    stopping.terminate()  # SIGTERM
    assert await stopping.await_exit(within=40) == 0
    for p in range(2):
        info = await cluster.wait_partition(
            "moving", p, lambda i: i.leader not in (-1, victim), within=15
        )
        assert victim not in info.isr, info
    assert info.replicas[0] == victim  # moved by an election, not a reassignment


async def test_controllers_restart_from_snapshot_and_log(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(
        3, NO_REBALANCE,
        controller_overrides={"metadata.log.max.record.bytes.between.snapshots": 256},
    )  # fmt: skip
    await cluster.wait_ready()
    for i in range(4):
        await create_topic(cluster, f"t{i}", 2)
    snapshots = [list(c.metadata_dir.rglob("*.checkpoint")) for c in cluster.controllers.values()]
    assert all(snapshots), snapshots

    for ctl in cluster.controllers.values():
        await ctl.astop(within=30)
    for ctl in cluster.controllers.values():
        await ctl.astart(within=30)
    await cluster.wait_active_controller(within=30)
    with trio.fail_after(60):
        async with cluster.admin(**{"default.api.timeout.ms": 30_000}) as admin:
            await admin.create_topic("t-after-restart", 1, 3)
            names = {t.name for t in await admin.describe_topics()}
    assert {"t0", "t1", "t2", "t3", "t-after-restart"} <= names
    await cluster.wait_partition("t-after-restart", 0, lambda i: i.leader >= 0)
