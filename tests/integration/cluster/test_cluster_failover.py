"""A cluster of 3 real broker processes: what survives a SIGKILL.

- RF=3, min.insync.replicas=2, acks=all: SIGKILL the partition leader while producing; a new
  leader comes from the ISR; every acknowledged record is read back (at least once), in send
  order, and nothing is read that was not sent. Metadata lists the killed broker's replica
  as offline; restarted, it is online again and rejoins the ISR. Both modes (`cluster_factory`):
  in ZK mode the dead broker's session expires, in Raft mode it is fenced after
  broker.session.timeout.ms.
- ZK mode only: SIGKILL of the controller's broker: another broker becomes the controller and
  the cluster keeps serving (in Raft mode the controller is not a broker: the quorum's failover
  is tested in test_cluster_raft.py).
- ZK mode only: controlled shutdown (SIGTERM): leadership moves to another ISR member before
  the broker exits; the test tells the controlled path from the session's end by ZooKeeper's
  registration and the ZK controller's events (Raft mode's version, through the heartbeat, is
  in test_cluster_raft.py).
"""

from __future__ import annotations

import trio

from broker.controlled_shutdown import ATTEMPT_FAILED, GAVE_UP, SUCCEEDED
from client import Consumer, Producer
from protocol.errors import KafkaError
from protocol.messages.metadata import MetadataRequest
from protocol.names import TopicPartition
from tests.integration.cluster.conftest import ClusterFactory, ZkClusterFactory
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from tests.support.wire import WireClient
from zkstore import ZkClient
from zkstore.znodes import BrokerIdZNode


async def create_topic(cluster: Cluster, name: str, partitions: int, **configs: str) -> None:
    async with cluster.admin() as admin:
        await admin.create_topic(name, partitions, 3, configs)
    for p in range(partitions):
        await cluster.wait_partition(name, p, lambda i: i.leader >= 0 and len(i.isr) == 3)


async def consume_everything(cluster: Cluster, topic: str, partitions: int) -> list[bytes]:
    """Every record of `topic` up to the current end offsets, partition by partition."""
    out: list[bytes] = []
    async with Consumer(
        bootstrap_servers=cluster.live_bootstrap(), auto_offset_reset="earliest"
    ) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        positions = dict.fromkeys(tps, 0)
        with trio.fail_after(60):
            while any(positions[tp] < ends[tp] for tp in tps):
                for record in await consumer.poll(1000):
                    tp = TopicPartition(record.topic, record.partition)
                    positions[tp] = record.offset + 1
                    if record.value is not None:
                        out.append(record.value)
    return out


async def test_leader_sigkill_with_acks_all_keeps_every_acknowledged_record(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3, {"min.insync.replicas": 2})
    await cluster.wait_ready()
    await create_topic(cluster, "events", 1, **{"min.insync.replicas": "2"})
    before = await cluster.partition("events", 0)
    old_leader = before.leader

    sent: list[bytes] = []
    acked: list[bytes] = []
    acked_before_kill = trio.Event()
    acked_after_failover = trio.Event()
    failover_done = False

    async with Producer(
        bootstrap_servers=cluster.live_bootstrap(),
        acks="all",
        linger_ms=1,
        max_in_flight_requests_per_connection=1,  # keeps the order across retries
        request_timeout_ms=5000,
        delivery_timeout_ms=60000,
        metadata_max_age_ms=1000,
    ) as producer:

        async def produce(stop: trio.Event) -> None:
            i = 0
            while not stop.is_set():
                value = b"record-%06d" % i
                i += 1
                sent.append(value)
                try:
                    await producer.send_and_wait("events", value, partition=0)
                except KafkaError:
                    continue  # not acknowledged: may or may not be in the log
                acked.append(value)
                if len(acked) >= 150:
                    acked_before_kill.set()
                if failover_done and len(acked) >= 300:
                    acked_after_failover.set()

        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce, stop)
            with trio.fail_after(60):
                await acked_before_kill.wait()
            await cluster.brokers[old_leader].akill()
            after = await cluster.wait_partition(
                "events", 0, lambda p: p.leader >= 0 and p.leader != old_leader, within=60
            )
            failover_done = True
            assert after.leader in before.isr
            # The Metadata that names the new leader lists the killed broker as offline.
            assert before.offline_replicas == ()
            assert after.offline_replicas == (old_leader,), after
            with trio.fail_after(60):
                await acked_after_failover.wait()
            stop.set()

    consumed = await consume_everything(cluster, "events", 1)
    assert set(consumed) <= set(sent), "read a record that was never sent"
    missing = [v for v in acked if v not in set(consumed)]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
    # In order: the first appearance of each acknowledged record follows the send order.
    first_seen: dict[bytes, int] = {}
    for index, value in enumerate(consumed):
        first_seen.setdefault(value, index)
    positions = [first_seen[v] for v in acked]
    assert positions == sorted(positions)


async def test_killed_leader_restarts_and_rejoins_the_isr(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3)
    await cluster.wait_ready()
    await create_topic(cluster, "events", 1)
    old_leader = (await cluster.partition("events", 0)).leader
    await cluster.brokers[old_leader].akill()
    after = await cluster.wait_partition(
        "events", 0, lambda p: p.leader >= 0 and p.leader != old_leader, within=60
    )
    assert after.offline_replicas == (old_leader,), after
    # Restarted, the broker is live again: no offline replica, and it rejoins the ISR.
    await cluster.brokers[old_leader].astart(within=60)
    back = await cluster.wait_partition(
        "events", 0, lambda p: not p.offline_replicas and old_leader in p.isr, within=60
    )
    assert back.offline_replicas == ()


async def test_controller_sigkill_elects_another_controller(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3)
    await cluster.wait_ready()
    old = await cluster.controller_id()
    await cluster.brokers[old].akill()
    new = await cluster.wait_controller(lambda c: c != old, within=60)
    assert new in cluster.brokers and new != old
    # The new controller serves: a topic is created and led by the two live brokers.
    async with cluster.admin() as admin:
        await admin.create_topic("after-failover", 2, 2, {})
    for p in range(2):
        info = await cluster.wait_partition(
            "after-failover", p, lambda i: i.leader >= 0 and len(i.isr) == 2
        )
        assert old not in info.replicas


async def test_controlled_shutdown_moves_leadership_before_exit(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    # A clean SIGTERM also closes the ZooKeeper session, whose BrokerChange moves leadership
    # too: to tell the controlled path from that one, the failpoint holds the broker (process
    # and session up) for a while after its controlled shutdown succeeded, and the leaders are
    # looked at from another broker during the hold.
    hold = "broker.shutdown.pause_after_controlled_shutdown=return(15)"
    cluster = zk_cluster_factory(3, env={"TRIOKA_FAILPOINTS": hold})
    await cluster.wait_ready()
    await create_topic(cluster, "moving", 3)
    controller = await cluster.controller_id()
    # A broker that is not the controller and leads at least one partition.
    led: dict[int, list[int]] = {}
    for p in range(3):
        info = await cluster.partition("moving", p)
        led.setdefault(info.leader, []).append(p)
    victim = next(b for b in sorted(led) if b != controller)
    witness = next(b for b in cluster.brokers if b not in (victim, controller))
    proc = cluster.brokers[victim]
    proc.terminate()  # SIGTERM
    await trio.to_thread.run_sync(lambda: proc.wait_for_event(SUCCEEDED, timeout=60))

    async def moved_on_witness() -> bool:
        # Metadata straight from another broker (not through a client that might ask the
        # victim): every partition the victim led has another leader and left its ISR.
        async with await WireClient.connect("127.0.0.1", cluster.brokers[witness].port) as c:
            meta = await c.request(MetadataRequest(topics=("moving",)))
        parts = {p.index: p for p in meta.topics[0].partitions}
        return all(
            parts[p].leader_id not in (-1, victim) and victim not in parts[p].isr_nodes
            for p in led[victim]
        )

    await wait_until(moved_on_witness, within=20, every=0.05)
    # ...and only now: the victim still runs and its registration (session) still exists, so
    # the leaders above moved before its session closed: the controlled path moved them.
    assert proc.running
    async with ZkClient(cluster.zookeeper_connect, session_timeout_s=3) as zk:
        assert await zk.exists(BrokerIdZNode.path(victim)) is not None
    assert await proc.await_exit(within=60) == 0

    names = [e.get("event") for e in proc.events(since_start=True)]
    assert ATTEMPT_FAILED not in names and GAVE_UP not in names, names
    assert names.index(SUCCEEDED) < names.index("broker shut down"), names
    # The controller processed the ControlledShutdown (nothing left led there) before the
    # BrokerChange of the victim's session ending.
    ctl = cluster.brokers[controller]
    await trio.to_thread.run_sync(
        lambda: ctl.wait_for_event("brokers changed", timeout=30, dead=[victim])
    )
    events = ctl.events(since_start=True)
    shutdown_at = next(
        i
        for i, e in enumerate(events)
        if e.get("event") == "controlled shutdown processed"
        and e.get("broker_id") == victim
        and e.get("remaining") == 0
        and e.get("error_code") == 0
    )
    change_at = next(
        i
        for i, e in enumerate(events)
        if e.get("event") == "brokers changed" and victim in e.get("dead", ())
    )
    assert shutdown_at < change_at
