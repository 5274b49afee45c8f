"""Fencing in a ZK-mode cluster of real broker processes:

- a zombie controller (its broker SIGSTOPped past the ZooKeeper session timeout, then SIGCONT)
  finds another controller elected, resigns, and the cluster keeps one consistent view: a
  topic created through the old controller's broker (forwarded to the new one) is led. With
  the failpoint `controller.zk.ignore_session_loss` (deploy/node/failpoints.py) on every broker,
  the zombie does not resign as soon as it sees its session expired: it first sends a
  LeaderAndIsr/UpdateMetadata round with its stale epoch (the brokers refuse it with
  STALE_CONTROLLER_EPOCH) and writes the broker change it missed (the multi-op fails on the
  /controller_epoch version check), so both refusals are shown on every run, and the cluster
  state is unchanged by them;
- a LeaderAndIsr request crafted with an older controller epoch is refused with
  STALE_CONTROLLER_EPOCH and changes nothing.

ZK mode only: a zombie controller is a broker whose ZooKeeper session expired, and the
stale-epoch refusals are ZooKeeper's (/controller_epoch) and the ZK controller's LeaderAndIsr
rounds; Raft mode fences with leader epochs (tests/sim, tests/integration/quorum).
"""

from __future__ import annotations

from typing import Any

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

ZOMBIE_FAILPOINT = {"TRIOKA_FAILPOINTS": "controller.zk.ignore_session_loss=return"}


async def controller_seen_by(broker_bootstrap: str) -> int:
    async with Admin(bootstrap_servers=broker_bootstrap, request_timeout_ms=5000) as admin:
        return (await admin.describe_cluster()).controller_id


async def test_zombie_controller_is_fenced_and_resigns_and_the_cluster_stays_consistent(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3, env=ZOMBIE_FAILPOINT)
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topic("before-zombie", 1, 3, {})
    await cluster.wait_partition("before-zombie", 0, lambda p: len(p.isr) == 3)
    old = await cluster.controller_id()
    others = [i for i in cluster.brokers if i != old]
    cluster.pause(old)
    new = await cluster.wait_controller(lambda c: c != old, within=60)
    # The new controller took the frozen broker out of the ISR, and every other broker has
    # heard from it (its newer epoch): the zombie's requests must now be refused.
    before = await cluster.wait_partition("before-zombie", 0, lambda p: old not in p.isr, within=60)
    for i in others:
        await wait_until(
            lambda i=i: _async_equals(controller_seen_by(cluster.brokers[i].bootstrap), new),
            within=30,
            every=0.1,
        )
    marks = {i: len(cluster.brokers[i].events()) for i in others}
    cluster.resume(old)

    zombie = cluster.brokers[old]

    def zombie_event(name: str, **match: Any) -> dict[str, Any] | None:
        for e in zombie.events(since_start=True):
            if e.get("event") == name and all(e.get(k) == v for k, v in match.items()):
                return e
        return None

    # It ignored the session loss (failpoint), acted on its stale state, and was fenced.
    await wait_until(lambda: zombie_event("controller writes refused; resigning"), within=30)
    assert zombie_event("controller ignores its session loss (failpoint)")
    assert zombie_event("zombie controller acting on its stale state")
    assert zombie_event("zombie controller write refused")
    refused_write = zombie_event("controller writes refused; resigning")
    assert refused_write is not None
    assert "/controller_epoch is no longer at version" in refused_write["error"], refused_write
    # Its stale-epoch requests: refused by both other brokers, seen on both sides.
    refusals = {
        e.get("broker_id")
        for e in zombie.events(since_start=True)
        if e.get("event") == "broker refused a controller request"
        and e.get("error") == "STALE_CONTROLLER_EPOCH"
        and e.get("request") == "LeaderAndIsrRequest"
    }
    assert set(others) <= refusals, zombie.log_tail(60)
    for i in others:
        refused = [
            e
            for e in cluster.brokers[i].events()[marks[i] :]
            if e.get("event") == "LeaderAndIsr refused"
        ]
        assert refused and all(e["error"] == "STALE_CONTROLLER_EPOCH" for e in refused), i
    # Nothing it tried changed the cluster: same leader and leader epoch (the zombie wanted
    # itself out of the ISR and a leader of its own choosing), same controller.
    # Polled: any broker may answer, the resumed zombie too, whose metadata can still be older
    # than `before` (the ISR shrink): a state the zombie's writes changed never matches.
    await cluster.wait_partition(
        "before-zombie",
        0,
        lambda p: (p.leader, p.leader_epoch) == (before.leader, before.leader_epoch),
        within=30,
    )
    await cluster.wait_controller(lambda c: c == new, within=30)

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


async def _async_equals(value: Any, expected: object) -> bool:
    try:
        return await value == expected
    except Exception:  # the broker is busy with the change: ask again
        return False


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
