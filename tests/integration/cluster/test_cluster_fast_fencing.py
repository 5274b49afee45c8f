"""Fast fencing (broker.session.fast.fencing.enable, controller.liveness), both metadata modes, on
real processes with a 30 s session (Raft: broker.session.timeout.ms; ZK:
zookeeper.session.timeout.ms), so that only the fast fencing can move a leadership within the
test's bounds and no assertion depends on timing:

- a SIGSTOPped broker is alive and its connections stay open: it keeps its leadership through
  a 10 s watch (a bounded observation: the fast fencing decides within a second or two);
- a SIGKILLed broker (not the ZK controller) loses its leadership within 10 s, and the active
  controller logs the evidence ("every listener refused connections");
- Raft mode: the killed broker, started again at once in place, is a new incarnation that is
  unfenced and rejoins the ISR (ZK mode's restart waits for the old znode's expiry, 30 s).
"""

from __future__ import annotations

import trio

from client import NewTopic
from tests.integration.cluster.conftest import ClusterFactory
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import Cluster, RaftCluster

NO_REBALANCE = {"auto.leader.rebalance.enable": False}
SESSION_MS = 30_000
WATCH_S = 10.0
FENCED_WITHIN_S = 10.0


async def _controller_process(cluster: Cluster) -> BrokerProcess:
    if isinstance(cluster, RaftCluster):
        return cluster.controllers[await cluster.active_controller_id()]
    return cluster.brokers[await cluster.controller_id()]


async def test_a_killed_broker_is_fenced_in_seconds_a_paused_one_keeps_its_session(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3, NO_REBALANCE, session_timeout_ms=SESSION_MS)
    await cluster.wait_ready()
    if isinstance(cluster, RaftCluster):
        paused, killed, bystander = 3, 2, 1
    else:  # the ZK controller is a broker: neither victim may be it
        bystander = await cluster.controller_id()
        paused, killed = (b for b in sorted(cluster.brokers) if b != bystander)
    async with cluster.admin() as admin:
        await admin.create_topics(
            [
                NewTopic("fast", replica_assignment={
                    0: [killed, bystander, paused], 1: [paused, bystander, killed],
                })
            ]
        )  # fmt: skip
    await cluster.wait_partition("fast", 0, lambda p: p.leader == killed and len(p.isr) == 3)
    await cluster.wait_partition("fast", 1, lambda p: p.leader == paused and len(p.isr) == 3)

    cluster.pause(paused)
    watched_until = trio.current_time() + WATCH_S
    while trio.current_time() < watched_until:  # a bounded observation, not a wait
        assert (await cluster.partition("fast", 1)).leader == paused
        await trio.sleep(0.5)
    cluster.resume(paused)

    killed_at = trio.current_time()
    await cluster.brokers[killed].akill()
    await cluster.wait_partition(
        "fast", 0, lambda p: p.leader not in (killed, -1) and killed not in p.isr,
        within=FENCED_WITHIN_S,
    )  # fmt: skip
    assert trio.current_time() - killed_at < FENCED_WITHIN_S
    controller = await _controller_process(cluster)
    fenced = await trio.to_thread.run_sync(
        lambda: controller.wait_for_event("broker fenced early", timeout=5, broker_id=killed)
    )
    assert "refused" in fenced["evidence"], fenced

    if isinstance(cluster, RaftCluster):
        await cluster.brokers[killed].astart()
        await cluster.wait_ready(within=60)
        await cluster.wait_partition("fast", 0, lambda p: killed in p.isr, within=30)
