"""The fast fencing's fence (controller.liveness found the broker's process dead), as one
operation of the single writer in both metadata modes:

- Raft mode: `ClusterControl.fence_dead_broker` (out of every ISR, leaderships re-elected,
  FenceBrokerRecord), only while the epoch is the broker's, unfenced, not in controlled
  shutdown and not heard from since its connection ended. Its next heartbeat unfences a broker
  fenced by mistake (a firewall REJECT forging the refusals), as after any fencing.
- ZK mode: what the BrokerChange of its vanished /brokers/ids znode does (KafkaController's
  onBrokerFailure), before ZooKeeper's session expiry says so: the registration leaves the image
  and its partitions are re-elected. The znode's later deletion then changes nothing. A broker
  fenced by mistake answers the controller's identity probe with its epoch while its znode is
  still there, and the controller re-reads /brokers/ids (a BrokerChange that finds it: its
  onBrokerStartup), controller.service.fast_fencing.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.broker_lifecycle import BrokerChange, LiveBroker, broker_change
from controller.context import ControllerContext
from controller.result import ControllerResult
from controller.state import ControllerState


@dataclass(frozen=True, slots=True)
class FenceDeadBroker:
    """Fence one broker incarnation the fast fencing found dead, without waiting for the end of
    its session (Raft: broker.session.timeout.ms; ZK: zookeeper.session.timeout.ms)."""

    broker_id: int
    broker_epoch: int
    lost_at_ms: int
    """When its connection ended (the controller's clock): a heartbeat after it cancels."""
    evidence: str
    """What the probes found, for the log."""


@dataclass(frozen=True, slots=True)
class FenceDeadBrokerResponse:
    fenced: bool = False
    not_fenced_because: str | None = None
    error_code: int = 0
    error_message: str | None = None


def fence_dead_broker(
    state: ControllerState, request: FenceDeadBroker, ctx: ControllerContext
) -> ControllerResult[FenceDeadBrokerResponse]:
    if ctx.cluster_control is not None:
        result = ctx.cluster_control.fence_dead_broker(
            state, request.broker_id, request.broker_epoch, request.lost_at_ms, ctx
        )
        return ControllerResult(
            records=result.records, response=_answer(result.response), atomic=result.atomic
        )
    return _fence_zk_broker(state, request, ctx)


def _fence_zk_broker(
    state: ControllerState, request: FenceDeadBroker, ctx: ControllerContext
) -> ControllerResult[FenceDeadBrokerResponse]:
    registered = state.image.cluster.brokers
    reg = registered.get(request.broker_id)
    reason = None
    if reg is None or reg.epoch != request.broker_epoch:
        reason = "the broker registered again since, or left"
    elif reg.in_controlled_shutdown:
        reason = "in controlled shutdown"
    if reason is not None:
        return ControllerResult(records=[], response=_answer(reason))
    others = tuple(
        LiveBroker(r.broker_id, r.epoch, r.endpoints, r.rack, r.incarnation_id)
        for r in registered.values()
        if r.broker_id != request.broker_id
    )
    result = broker_change(state, BrokerChange(others), ctx)
    return ControllerResult(
        records=result.records,
        response=_answer(None),
        state_changes=result.state_changes,
        atomic=result.atomic,
    )


def _answer(not_fenced_because: str | None) -> FenceDeadBrokerResponse:
    return FenceDeadBrokerResponse(
        fenced=not_fenced_because is None, not_fenced_because=not_fenced_because
    )


__all__ = ["FenceDeadBroker", "FenceDeadBrokerResponse", "fence_dead_broker"]
