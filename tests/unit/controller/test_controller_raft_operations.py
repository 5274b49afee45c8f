"""The Raft-mode broker lifecycle as single-writer operations (controller.raft_lifecycle):
BrokerRegistration, BrokerHeartbeat, UnregisterBroker, FenceStaleBrokers and WriteNoOp reach
the term's ClusterControl through the ControllerContext (its clock included), answer
NOT_CONTROLLER without one, have failed responses, and the Kafka timers they feed."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from controller.cluster_control import ClusterControl
from controller.context import ControllerContext
from controller.metrics import ControllerStateName, state_for_request
from controller.operations import failed_response, run_operation
from controller.raft_lifecycle import (
    FenceStaleBrokers,
    FenceStaleBrokersResponse,
    WriteNoOp,
    WriteNoOpResponse,
)
from controller.state import ControllerState
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationListener,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from protocol.metadata.records import FenceBrokerRecord, NoOpRecord, UnfenceBrokerRecord

SESSION_MS = 2_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def registration(broker_id: int = 1) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=broker_id,
        cluster_id="",
        incarnation_id=f"inc-{broker_id}",
        listeners=(BrokerRegistrationListener(name="PLAINTEXT", host="h", port=9092),),
    )


def heartbeat(epoch: int, offset: int, broker_id: int = 1) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=epoch,
        current_metadata_offset=offset,
        want_fence=False,
        want_shut_down=False,
    )


def commit(state: ControllerState, records: object) -> None:
    records = list(records)  # type: ignore[call-overload]
    if records:
        state.replay_appended(records, state.next_offset + len(records) - 1)


def test_lifecycle_through_run_operation_uses_the_contexts_control_and_clock() -> None:
    state = ControllerState()
    clock = Clock()
    ctx = ControllerContext(
        rng=random.Random(1),
        cluster_control=ClusterControl.activate(
            state.image, clock(), session_timeout_ms=SESSION_MS
        ),
        clock_ms=clock,
    )
    result = run_operation(state, registration(), ctx)
    assert isinstance(result.response, BrokerRegistrationResponse)
    epoch = result.response.broker_epoch
    commit(state, result.records)
    assert state.image.cluster.brokers[1].fenced

    # Caught up (offset >= broker epoch): unfenced.
    result = run_operation(state, heartbeat(epoch, epoch), ctx)
    assert isinstance(result.response, BrokerHeartbeatResponse)
    assert not result.response.is_fenced
    assert any(isinstance(r, UnfenceBrokerRecord) for r in result.records)
    commit(state, result.records)

    # A second heartbeat changes nothing: no records (answered at once by the driver).
    assert list(run_operation(state, heartbeat(epoch, epoch), ctx).records) == []

    # Exactly the session timeout later it is still live; one ms more and it is fenced.
    clock.now += SESSION_MS
    result = run_operation(state, FenceStaleBrokers(), ctx)
    assert result.response == FenceStaleBrokersResponse(broker_ids=())
    clock.now += 1
    result = run_operation(state, FenceStaleBrokers(), ctx)
    assert result.response == FenceStaleBrokersResponse(broker_ids=(1,))
    assert any(isinstance(r, FenceBrokerRecord) for r in result.records)
    commit(state, result.records)
    assert state.image.cluster.brokers[1].fenced

    result = run_operation(state, UnregisterBrokerRequest(broker_id=1), ctx)
    assert isinstance(result.response, UnregisterBrokerResponse)
    commit(state, result.records)
    assert 1 not in state.image.cluster.brokers


def test_write_noop_is_one_noop_record() -> None:
    result = run_operation(ControllerState(), WriteNoOp(), ControllerContext())
    assert list(result.records) == [NoOpRecord()]
    assert result.response == WriteNoOpResponse()


@pytest.mark.parametrize(
    "request_",
    [registration(), heartbeat(0, 0), UnregisterBrokerRequest(broker_id=1), FenceStaleBrokers()],
)
def test_without_an_active_term_lifecycle_operations_are_not_controller(request_: object) -> None:
    with pytest.raises(KafkaError) as raised:
        run_operation(ControllerState(), request_, ControllerContext())
    assert raised.value.code is ErrorCode.NOT_CONTROLLER
    assert "active Raft-mode controller" in raised.value.message


@pytest.mark.parametrize(
    "request_",
    [
        registration(),
        heartbeat(0, 0),
        UnregisterBrokerRequest(broker_id=1),
        FenceStaleBrokers(),
        WriteNoOp(),
    ],
)
def test_failed_responses_carry_the_error(request_: object) -> None:
    response = failed_response(request_, ErrorCode.NOT_CONTROLLER, "the active controller is 2")
    assert response.error_code == ErrorCode.NOT_CONTROLLER
    assert response.error_message == "the active controller is 2"


def test_timers_registration_and_fencing_are_broker_changes_shutdown_heartbeat_is_controlled() -> (
    None
):
    assert state_for_request(registration()) is ControllerStateName.BROKER_CHANGE
    assert state_for_request(FenceStaleBrokers()) is ControllerStateName.BROKER_CHANGE
    assert (
        state_for_request(UnregisterBrokerRequest(broker_id=1)) is ControllerStateName.BROKER_CHANGE
    )
    assert state_for_request(heartbeat(0, 0)) is None
    shutting = replace(heartbeat(0, 0), want_shut_down=True)
    assert state_for_request(shutting) is ControllerStateName.CONTROLLED_SHUTDOWN
    assert state_for_request(WriteNoOp()) is None
