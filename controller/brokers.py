"""Broker registration (Kafka's ClusterControlManager.registerBroker, simplified).

A standalone broker registers itself at start-up and is unfenced at once, so replication
factor checks count it. Heartbeats, session expiry and fencing come with the Raft backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.context import ControllerContext
from controller.result import ControllerResult
from controller.state import ControllerState
from protocol.errors import ErrorCode, KafkaError
from protocol.metadata.records import BrokerEndpoint, RegisterBrokerRecord, UnfenceBrokerRecord


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    """A broker asks to join the cluster (the content of Kafka's BrokerRegistrationRequest)."""

    broker_id: int
    incarnation_id: str
    endpoints: tuple[BrokerEndpoint, ...] = ()
    rack: str | None = None
    unfence: bool = True
    """Unfence right away (standalone: no heartbeats decide it)."""


@dataclass(frozen=True, slots=True)
class RegisterBrokerResponse:
    broker_id: int
    broker_epoch: int
    error_code: int = 0
    error_message: str | None = None


def register_broker(
    state: ControllerState, request: RegisterBroker, ctx: ControllerContext
) -> ControllerResult[RegisterBrokerResponse]:
    """RegisterBrokerRecord (fenced) and, when asked, UnfenceBrokerRecord.

    The broker epoch is the offset the registration record will get, as in Kafka; that holds
    because operations run on the single writer, on a state that has replayed everything.
    """
    if request.broker_id < 0:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be non-negative, got {request.broker_id}."
        )
    epoch = state.next_offset
    records: list = [
        RegisterBrokerRecord(
            broker_id=request.broker_id,
            incarnation_id=request.incarnation_id,
            broker_epoch=epoch,
            endpoints=request.endpoints,
            rack=request.rack,
            fenced=True,
        )
    ]
    if request.unfence:
        records.append(UnfenceBrokerRecord(id=request.broker_id, epoch=epoch))
    return ControllerResult(
        records=records,
        response=RegisterBrokerResponse(broker_id=request.broker_id, broker_epoch=epoch),
    )
