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
- Restart: every broker and every controller is stopped and started again (snapshots every
  1 KB of records, no idle NoOps): every process loads a snapshot, the controllers' snapshot
  lacks the last topic, which comes from the log after it; every topic and every record is
  there and the quorum serves writes.
"""

from __future__ import annotations

import pytest
import trio

from broker.lifecycle import SHUTDOWN_ALLOWED
from client import NewTopic, Producer
from client.metadata import PartitionInfo
from protocol.errors import ErrorCode, KafkaError
from tests.integration.cluster.conftest import RaftClusterFactory
from tests.integration.cluster.test_cluster_failover import consume_everything, create_topic
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import DEFAULT_HEARTBEAT_INTERVAL_MS, RaftCluster
from tests.support.controller_process import ControllerProcess
from tests.support.waiting import wait_until

NO_REBALANCE = {"auto.leader.rebalance.enable": False}
SNAPSHOT_BYTES = 1024


def snapshots_written(proc: BrokerProcess) -> list[dict[str, object]]:
    """A controller's or broker's 'metadata snapshot written' events (every run)."""
    return [e for e in proc.events() if e.get("event") == "metadata snapshot written"]


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
    # The controller allowed the shutdown in a heartbeat answer (should_shut_down) before exit.
    assert SHUTDOWN_ALLOWED in [e.get("event") for e in stopping.events()]
    for p in range(2):
        info = await cluster.wait_partition(
            "moving", p, lambda i: i.leader not in (-1, victim), within=15
        )
        assert victim not in info.isr, info
    assert info.replicas[0] == victim  # moved by an election, not a reassignment


def snapshot_loads(proc: ControllerProcess | BrokerProcess) -> list[dict[str, object]]:
    """The 'metadata snapshot loaded' events of this process's latest run."""
    return [
        e for e in proc.events(since_start=True) if e.get("event") == "metadata snapshot loaded"
    ]


async def test_restart_of_every_controller_and_broker_recovers_from_snapshot_and_log(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    # Snapshots every ~1 KB of records on controllers and brokers; no idle NoOps, so only
    # the test's writes fill the log (the tail after the last snapshot stays the test's).
    cluster = raft_cluster_factory(
        3, {**NO_REBALANCE, "metadata.log.max.record.bytes.between.snapshots": SNAPSHOT_BYTES},
        controller_overrides={"metadata.max.idle.interval.ms": 600_000},
    )  # fmt: skip
    await cluster.wait_ready()
    await create_topic(cluster, "t0", 2)
    values = [b"v%03d" % i for i in range(30)]
    await produce(cluster, "t0", values)
    # Topics until every controller has just written a snapshot (its byte count is back to 0)
    # and every broker has one too; then the tail, far below the threshold: only in the log.
    topics = ["t0"]
    with trio.fail_after(90):
        while True:
            before = {i: len(snapshots_written(c)) for i, c in cluster.controllers.items()}
            topics.append(f"t{len(topics)}")
            await create_topic(cluster, topics[-1], 1)
            after = {i: len(snapshots_written(c)) for i, c in cluster.controllers.items()}
            brokers_done = all(snapshots_written(b) for b in cluster.brokers.values())
            if brokers_done and all(after[i] > before[i] for i in after):
                break
    await create_topic(cluster, "tail", 1)

    # The controllers first: the brokers' controlled shutdowns would write records (and a
    # snapshot with "tail" in it). Without a quorum each broker gives its controlled shutdown
    # up after broker.session.timeout.ms and stops anyway (SIGTERM, together).
    for ctl in cluster.controllers.values():
        await ctl.astop(within=30)
    for broker in cluster.brokers.values():
        broker.terminate()
    for broker in cluster.brokers.values():
        await broker.await_exit(within=60)
    await cluster.astart(within=60)  # the controllers (together), then the brokers
    await cluster.wait_ready(within=60)

    everything = {*topics, "tail"}
    for node_id, ctl in cluster.controllers.items():
        loads = snapshot_loads(ctl)
        assert loads, f"controller {node_id} did not load a snapshot"
        # The snapshot lacks "tail" (at most): it came from the log after the snapshot.
        assert int(loads[0]["topics"]) < len(everything), loads[0]  # type: ignore[call-overload]
    for node_id, broker in cluster.brokers.items():
        assert snapshot_loads(broker), f"broker {node_id} did not load a snapshot"
    with trio.fail_after(60):
        async with cluster.admin(**{"default.api.timeout.ms": 30_000}) as admin:
            assert everything <= set(await admin.list_topics())
            await admin.create_topic("t-after-restart", 1, 3)
    await cluster.wait_partition("tail", 0, lambda i: i.leader >= 0 and len(i.isr) == 3)
    await cluster.wait_partition("t-after-restart", 0, lambda i: i.leader >= 0)
    assert await consume_everything(cluster, "t0", 2) == values
