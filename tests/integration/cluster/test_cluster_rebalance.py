"""The controller's auto leader rebalance (auto.leader.rebalance.enable,
leader.imbalance.check.interval.seconds, leader.imbalance.per.broker.percentage) on 3 real broker
processes and a real ZooKeeper, with a 1 s check interval.

Each broker is the preferred leader of one partition. A broker that is not the controller stops
(controlled shutdown moves its leadership away) and starts again; once it is back in the ISR:

- enabled: leadership goes back to it without any admin call (the controller logs the
  rebalance and its AutoLeaderBalanceRateAndTimeMs timer counts the checks);
- leader.imbalance.per.broker.percentage=100 (the imbalance, 100%, is not above it): the
  controller runs check after check (its timer's count, scraped from /metrics) and none moves
  anything - the bounded observation is "3 more checks ran", not a sleep;
- disabled: Kafka schedules no check at all, so there is no check to count; the observation is
  bounded by time instead (the first check's 5 s delay plus 3 intervals, during which the
  controllers above ran theirs) and the timer's count stays 0 throughout.

Raft mode (`raft_cluster_factory`): the active controller process runs the same check
(controller.service.terms, 5 s after activation, then every interval), and its election comes to
the brokers as PartitionChangeRecords. Enabled: leadership goes back, and the active
controller's own log names the partition it moved; disabled: nothing moves during the same
bounded window. The imbalance-percentage case stays ZK-only: it is observable only by counting
checks, and the controller processes serve no /metrics.
"""

from __future__ import annotations

from typing import Any

import trio

from client import NewTopic
from tests.integration.cluster.conftest import RaftClusterFactory, ZkClusterFactory
from tests.integration.cluster.test_cluster_metrics import metrics_port, sample, scrape
from tests.support.cluster import Cluster, RaftCluster, ZkCluster
from tests.support.waiting import wait_until

TOPIC = "balanced"
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
CHECKS = "kafka_controller_controllerstats_autoleaderbalancerateandtimems_count"
INTERVAL_S = 1
FIRST_CHECK_DELAY_S = 5  # controller.service.terms.REBALANCE_INITIAL_DELAY_S, Kafka's 5 s


def overrides(**extra: Any) -> dict[str, Any]:
    return {
        "leader.imbalance.check.interval.seconds": INTERVAL_S,
        "trioka.metrics.port": 0,
        **extra,
    }


async def checks_run(cluster: ZkCluster, controller: int) -> float:
    return sample(await scrape(metrics_port(cluster, controller)), CHECKS)


async def restart_a_preferred_leader(
    cluster: Cluster, *, rebalancing: bool = False
) -> tuple[int, int, int]:
    """(controller, restarted broker, its partition): the broker is back in the ISR; it does
    not lead the partition it is the preferred replica of (unless `rebalancing` already gave it
    back: a check may run between the ISR change and this look)."""
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic(TOPIC, replica_assignment=ASSIGNMENT)])
    for p, replicas in ASSIGNMENT.items():
        await cluster.wait_partition(
            TOPIC, p, lambda i, r=replicas: i.leader == r[0] and len(i.isr) == 3
        )
    controller = await cluster.controller_id()
    victim = next(b for b in sorted(cluster.brokers) if b != controller)
    partition = next(p for p, r in ASSIGNMENT.items() if r[0] == victim)
    await cluster.brokers[victim].astop(within=60)
    await cluster.wait_partition(TOPIC, partition, lambda i: i.leader not in (-1, victim))
    await cluster.brokers[victim].astart(within=60)
    back = await cluster.wait_partition(TOPIC, partition, lambda i: victim in i.isr, within=30)
    assert rebalancing or back.leader != victim, back
    assert await cluster.controller_id() == controller
    return controller, victim, partition


def rebalances(cluster: ZkCluster, controller: int) -> list[Any]:
    return [
        e.get("elected")
        for e in cluster.brokers[controller].events()
        if e.get("event") == "auto leader rebalance"
    ]


async def test_enabled_rebalance_gives_leadership_back_to_the_preferred_replica(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3, overrides())
    controller, victim, partition = await restart_a_preferred_leader(cluster, rebalancing=True)
    await cluster.wait_partition(TOPIC, partition, lambda i: i.leader == victim, within=30)
    # The rebalance moved it (not the controlled shutdown's or a failover's election).
    assert [TOPIC, partition] in [list(tp) for e in rebalances(cluster, controller) for tp in e]
    assert await checks_run(cluster, controller) >= 1
    # Nothing else moved: every partition is led by its preferred replica.
    for p, replicas in ASSIGNMENT.items():
        assert (await cluster.partition(TOPIC, p)).leader == replicas[0]


async def test_checks_below_the_imbalance_percentage_move_nothing(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3, overrides(**{"leader.imbalance.per.broker.percentage": 100}))
    controller, victim, partition = await restart_a_preferred_leader(cluster)
    before = await checks_run(cluster, controller)

    async def three_more_checks() -> bool:
        return await checks_run(cluster, controller) >= before + 3

    await wait_until(three_more_checks, within=FIRST_CHECK_DELAY_S + 10 * INTERVAL_S, every=0.2)
    # Two whole checks at least ran with the broker back in the ISR: nothing moved.
    assert (await cluster.partition(TOPIC, partition)).leader != victim
    assert rebalances(cluster, controller) == []


async def test_disabled_rebalance_leaves_leadership_where_it_is(
    zk_cluster_factory: ZkClusterFactory,
) -> None:
    cluster = zk_cluster_factory(3, overrides(**{"auto.leader.rebalance.enable": False}))
    controller, victim, partition = await restart_a_preferred_leader(cluster)
    window_s = FIRST_CHECK_DELAY_S + 3 * INTERVAL_S
    with trio.move_on_after(window_s):
        while True:
            info = await cluster.partition(TOPIC, partition)
            assert info.leader != victim, "leadership moved back with auto rebalance disabled"
            assert await checks_run(cluster, controller) == 0
            await trio.sleep(0.2)  # polling within the observation window, not a wait for it
    assert await cluster.controller_id() == controller
    assert rebalances(cluster, controller) == []


# -- Raft mode ---------------------------------------------------------------------------------


def raft_rebalances(cluster: RaftCluster) -> list[Any]:
    """What every controller process logged as moved by its auto leader rebalance."""
    return [
        e.get("elected")
        for ctl in cluster.controllers.values()
        for e in ctl.events()
        if e.get("event") == "auto leader rebalance"
    ]


async def test_raft_enabled_rebalance_gives_leadership_back_to_the_preferred_replica(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(3, {"leader.imbalance.check.interval.seconds": INTERVAL_S})
    _, victim, partition = await restart_a_preferred_leader(cluster, rebalancing=True)
    await cluster.wait_partition(TOPIC, partition, lambda i: i.leader == victim, within=30)
    # The active controller's rebalance moved it (not a failover's election).
    moved = [list(tp) for e in raft_rebalances(cluster) for tp in e]
    assert [TOPIC, partition] in moved, moved
    for p, replicas in ASSIGNMENT.items():
        assert (await cluster.partition(TOPIC, p)).leader == replicas[0]


async def test_raft_disabled_rebalance_leaves_leadership_where_it_is(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(
        3,
        {
            "leader.imbalance.check.interval.seconds": INTERVAL_S,
            "auto.leader.rebalance.enable": False,
        },
    )
    _, victim, partition = await restart_a_preferred_leader(cluster)
    # The enabled case moves it within the first check (5 s after activation, which came
    # before the restart) plus an interval; watch longer than that.
    window_s = FIRST_CHECK_DELAY_S + 3 * INTERVAL_S
    with trio.move_on_after(window_s):
        while True:
            info = await cluster.partition(TOPIC, partition)
            assert info.leader != victim, "leadership moved back with auto rebalance disabled"
            await trio.sleep(0.2)  # polling within the observation window, not a wait for it
    assert raft_rebalances(cluster) == []
