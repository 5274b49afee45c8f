"""The controller service of each metadata mode, wired: controller.service.terms.ControllerService
over its Leadership adapter (zkstore.leadership on ZooKeeper, raft.leadership on the quorum) and
its term mode (controller.service.zk_mode, kraft_mode).

    service = zk_controller_service(zk, broker_id, transport, config=ControllerConfig(...),
                                    inter_broker_listener="INTERNAL")   # every ZK-mode broker
    service = raft_controller_service(raft_driver, metadata_log, settings,
                                      session_timeout_ms=9000)        # every Raft controller
    await nursery.start(service.run)
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.dead_brokers import FenceDeadBroker, FenceDeadBrokerResponse
from controller.heartbeats import BROKER_SESSION_TIMEOUT_MS_DEFAULT
from controller.metrics import ControllerMetrics
from controller.ports import BrokerSender, ListenerProbe
from controller.service.channel import DEFAULT_REQUEST_TIMEOUT_S
from controller.service.fast_fencing import FastFencing, Fence
from controller.service.kraft_mode import (
    IDLE_INTERVAL_MS_DEFAULT,
    SNAPSHOT_BYTES_DEFAULT,
    KRaftMode,
)
from controller.service.terms import REBALANCE_INITIAL_DELAY_S, ControllerService
from controller.service.zk_mode import ZkMode
from protocol.clock import SYSTEM_CLOCK, Clock
from raft.driver import RaftDriver, monotonic_ms
from raft.leadership import RaftLeadership
from raft.metadata_log import RaftMetadataLog
from zkstore import ControllerElection, ZkClient
from zkstore.election import Failpoints
from zkstore.leadership import ZkLeadership


def zk_controller_service(
    zk: ZkClient,
    broker_id: int,
    sender: BrokerSender,
    *,
    config: ControllerConfig | None = None,
    ctx: ControllerContext | None = None,
    inter_broker_listener: str = "PLAINTEXT",
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
    rebalance_initial_delay_s: float = REBALANCE_INITIAL_DELAY_S,
    rebalance_interval_s: float | None = None,
    channel_retry_backoff_s: float = 0.1,
    metrics: ControllerMetrics | None = None,
    election: ControllerElection | None = None,
    failpoints: Failpoints | None = None,
    clock: Clock = SYSTEM_CLOCK,
) -> ControllerService:
    """A ZK-mode broker's controller candidate (Kafka's KafkaController)."""
    if election is None:
        election = ControllerElection(zk, broker_id, clock_ms=clock.wall_ms, failpoints=failpoints)
    leadership = ZkLeadership(zk, broker_id, election=election)
    mode = ZkMode(
        leadership,
        sender,
        inter_broker_listener=inter_broker_listener,
        request_timeout_s=request_timeout_s,
        channel_retry_backoff_s=channel_retry_backoff_s,
    )
    return ControllerService(
        leadership,
        mode,
        ctx
        if ctx is not None
        else ControllerContext(config=config or ControllerConfig(), clock_ms=clock.monotonic_ms),
        metrics=metrics,
        rebalance_initial_delay_s=rebalance_initial_delay_s,
        rebalance_interval_s=rebalance_interval_s,
    )


def _fence_through(service: ControllerService) -> Fence:
    """FenceDeadBroker through the single writer: None when fenced, else why not."""

    async def fence(
        broker_id: int, broker_epoch: int, lost_at_ms: int, evidence: str
    ) -> str | None:
        response: FenceDeadBrokerResponse = await service.submit(
            FenceDeadBroker(broker_id, broker_epoch, lost_at_ms, evidence)
        )
        if response.error_code:
            return response.error_message or "the controller refused"
        return None if response.fenced else response.not_fenced_because

    return fence


def raft_fast_fencing(service: ControllerService, probe: ListenerProbe) -> FastFencing:
    """The fast fencing of a Raft controller (broker.session.fast.fencing.enable): a dead
    broker's fence is `FenceDeadBroker` through the single writer, on the controller's clock
    (the one its heartbeat sessions are kept on)."""
    return _fast_fencing(service, probe)


def _fast_fencing(service: ControllerService, probe: ListenerProbe, **zk: Any) -> FastFencing:
    return FastFencing(
        image=lambda: service.state.image,
        active=lambda: service.is_active,
        probe=probe,
        fence=_fence_through(service),
        clock_ms=service.ctx.clock_ms,
        **zk,
    )


def zk_fast_fencing(
    service: ControllerService, mode: ZkMode, probe: ListenerProbe, *, session_timeout_s: float
) -> FastFencing:
    """The fast fencing of a ZK-mode controller candidate (broker.session.fast.fencing.enable):
    its channels' and fetchers' connections tell it a broker ended them; a dead broker's fence is
    `FenceDeadBroker` (its BrokerChange without waiting for the znode's expiry); a broker fenced
    by mistake is revived for as long as its ZooKeeper session may still hold its znode."""

    async def revive(broker_id: int, broker_epoch: int) -> None:
        await mode.reread_brokers()

    return _fast_fencing(service, probe, revive=revive, revival_window_s=session_timeout_s + 5)


def raft_controller_service(
    raft: RaftDriver,
    metadata_log: RaftMetadataLog,
    settings: ControllerConfig | None = None,
    *,
    session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS_DEFAULT,
    idle_interval_ms: int = IDLE_INTERVAL_MS_DEFAULT,
    snapshot_max_record_bytes: int = SNAPSHOT_BYTES_DEFAULT,
    cluster_id: str | None = None,
    rebalance_initial_delay_s: float = REBALANCE_INITIAL_DELAY_S,
    clock_ms: Callable[[], int] = monotonic_ms,
    metrics: ControllerMetrics | None = None,
    rng: random.Random | None = None,
    local_broker: tuple[int, str] | None = None,
) -> ControllerService:
    """A Raft controller (KRaft's QuorumController): construct it before the driver delivers
    committed records (it replays them all). `local_broker`: combined mode's (broker id,
    incarnation id) of the broker in this process."""
    leadership = RaftLeadership(raft, metadata_log)
    mode = KRaftMode(
        leadership,
        session_timeout_ms=session_timeout_ms,
        clock_ms=clock_ms,
        idle_interval_ms=idle_interval_ms,
        snapshot_max_record_bytes=snapshot_max_record_bytes,
        cluster_id=cluster_id,
        local_broker=local_broker,
    )
    settings = settings or ControllerConfig()
    ctx = ControllerContext(config=settings, rng=rng or random.Random(), clock_ms=clock_ms)
    return ControllerService(
        leadership, mode, ctx, metrics=metrics, rebalance_initial_delay_s=rebalance_initial_delay_s
    )
