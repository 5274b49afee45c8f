"""The Raft-mode active controller's broker lifecycle as operations of the single-writer loop.

KRaft's QuorumController runs BrokerRegistration, BrokerHeartbeat, UnregisterBroker and its
periodic fencing of stale brokers as events of its one queue, each on the replayed state plus
the ClusterControlManager's soft state. Here they are `controller.operations.OPERATIONS`
entries that call `controller.cluster_control.ClusterControl` through the context
(`ControllerContext.cluster_control`, `.clock_ms`): one term's ClusterControl, absent outside
a Raft-mode term (NOT_CONTROLLER then).

Two internal events have no wire form: `FenceStaleBrokers` (KRaft's maybeFenceOneStaleBroker,
scheduled at `ClusterControl.next_check_time_ms()`) and `WriteNoOp` (KRaft's NoOpRecord every
metadata.max.idle.interval.ms when nothing else was written); controller.dead_brokers'
`FenceDeadBroker` (the fast fencing) goes through the same ClusterControl. They go through the same queue
as requests so that the single writer's `state.next_offset` stays where the next record lands
(broker epochs and controlled-shutdown offsets are computed from it).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.cluster_control import ClusterControl
from controller.context import ControllerContext
from controller.result import ControllerResult
from controller.state import ControllerState
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from protocol.metadata.records import NoOpRecord


@dataclass(frozen=True, slots=True)
class FenceStaleBrokers:
    """Fence every unfenced broker whose session ended (broker.session.timeout.ms)."""


@dataclass(frozen=True, slots=True)
class FenceStaleBrokersResponse:
    broker_ids: tuple[int, ...] = ()
    """The brokers fenced, oldest contact first."""
    error_code: int = 0
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class WriteNoOp:
    """Append one NoOpRecord (leadership start, idle interval)."""


@dataclass(frozen=True, slots=True)
class WriteNoOpResponse:
    error_code: int = 0
    error_message: str | None = None


def _cluster_control(ctx: ControllerContext) -> ClusterControl:
    if ctx.cluster_control is None:
        raise KafkaError(
            ErrorCode.NOT_CONTROLLER,
            "broker registrations and heartbeats are served by an active Raft-mode controller",
        )
    return ctx.cluster_control


def broker_registration(
    state: ControllerState, request: BrokerRegistrationRequest, ctx: ControllerContext
) -> ControllerResult[BrokerRegistrationResponse]:
    return _cluster_control(ctx).register_broker(state, request, ctx.clock_ms(), ctx)


def broker_heartbeat(
    state: ControllerState, request: BrokerHeartbeatRequest, ctx: ControllerContext
) -> ControllerResult[BrokerHeartbeatResponse]:
    return _cluster_control(ctx).process_heartbeat(state, request, ctx.clock_ms(), ctx)


def unregister_broker(
    state: ControllerState, request: UnregisterBrokerRequest, ctx: ControllerContext
) -> ControllerResult[UnregisterBrokerResponse]:
    return _cluster_control(ctx).unregister_broker(state, request, ctx)


def fence_stale_brokers(
    state: ControllerState, request: FenceStaleBrokers, ctx: ControllerContext
) -> ControllerResult[FenceStaleBrokersResponse]:
    result = _cluster_control(ctx).fence_stale_brokers(state, ctx.clock_ms(), ctx)
    return ControllerResult(
        records=result.records,
        response=FenceStaleBrokersResponse(broker_ids=result.response),
        atomic=result.atomic,
    )


def write_noop(
    state: ControllerState, request: WriteNoOp, ctx: ControllerContext
) -> ControllerResult[WriteNoOpResponse]:
    return ControllerResult(records=[NoOpRecord()], response=WriteNoOpResponse())
