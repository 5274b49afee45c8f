"""Fencing in a ZK-mode cluster of real broker processes:

- a zombie controller (its broker SIGSTOPped past the ZooKeeper session timeout, then SIGCONT)
  finds another controller elected, resigns, and the cluster keeps one consistent view: a
  topic created through the old controller's broker (forwarded to the new one) is led;
- a LeaderAndIsr request crafted with an older controller epoch is refused with
  STALE_CONTROLLER_EPOCH and changes nothing.
"""

from __future__ import annotations

from client import Admin
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrTopicState,
)
from tests.integration.cluster.conftest import ZkClusterFactory
from tests.support.waiting import wait_until
from tests.support.wire import WireClient


async def test_zombie_controller_resigns_and_the_cluster_stays_consistent(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3)
    await cluster.wait_ready()
    old = await cluster.controller_id()
    cluster.pause(old)
    new = await cluster.wait_controller(lambda c: c != old, within=60)
    cluster.resume(old)

    zombie = cluster.brokers[old]

    def resigned() -> bool:
        return any(
            e.get("event") == "controller election" and "Resigned" in str(e.get("election_event"))
            for e in zombie.events(since_start=True)
        )

    await wait_until(resigned, within=30, every=0.05)
    # Its broker registers again with a new session (a new broker epoch).
    await cluster.wait_ready(brokers=3)
    # Through the old controller's broker: forwarded to the new controller and applied.
    async with Admin(
        bootstrap_servers=zombie.bootstrap, request_timeout_ms=5000, default_api_timeout_ms=30000
    ) as admin:
        await admin.create_topic("after-zombie", 1, 3, {})
    info = await cluster.wait_partition(
        "after-zombie", 0, lambda p: p.leader >= 0 and len(p.isr) == 3, within=60
    )
    assert sorted(info.replicas) == [1, 2, 3]
    await cluster.wait_ready()
    assert await cluster.controller_id() == new


async def test_stale_controller_epoch_leader_and_isr_is_refused(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3)
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topic("fenced", 1, 3, {})
        topic_id = (await admin.describe_topics(["fenced"]))[0].topic_id
    before = await cluster.wait_partition("fenced", 0, lambda p: len(p.isr) == 3)
    # Make the controller epoch > 1: the first controller's broker goes away.
    old = await cluster.controller_id()
    await cluster.brokers[old].akill()
    new = await cluster.wait_controller(lambda c: c != old, within=60)
    target = next(b for b in cluster.brokers if b not in (old, new))
    broker = cluster.brokers[target]
    stale = LeaderAndIsrRequest(
        controller_id=old,
        controller_epoch=1,  # the first controller's epoch: older than the new one's
        broker_epoch=-1,
        topic_states=(
            LeaderAndIsrTopicState(
                topic_name="fenced",
                topic_id=topic_id,
                partition_states=(
                    LeaderAndIsrPartitionState(
                        partition_index=0,
                        controller_epoch=1,
                        leader=target,
                        leader_epoch=before.leader_epoch + 100,
                        isr=(target,),
                        partition_epoch=1000,
                        replicas=(target,),
                    ),
                ),
            ),
        ),
        live_leaders=(),
    )
    async with await WireClient.connect(broker.host, broker.port) as wire:
        response = await wire.request(stale)
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    after = await cluster.partition("fenced", 0)
    assert after.leader_epoch < before.leader_epoch + 100
    assert after.leader != target or after.leader_epoch != before.leader_epoch + 100
