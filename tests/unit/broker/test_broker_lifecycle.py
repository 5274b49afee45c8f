"""broker.lifecycle.BrokerLifecycle: KRaft's BrokerLifecycleManager as a pure state (ms in)."""

from __future__ import annotations

from broker.lifecycle import BrokerLifecycle, BrokerState, Registration, registration_listeners
from protocol.errors import ErrorCode
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)


def _lifecycle() -> BrokerLifecycle:
    return BrokerLifecycle(
        Registration(
            broker_id=1,
            cluster_id="c",
            incarnation_id="inc",
            listeners=registration_listeners([("PLAINTEXT", "127.0.0.1", 9092)]),
            rack="r1",
        ),
        heartbeat_interval_ms=2000,
        retry_backoff_ms=100,
    )


def _registered(lc: BrokerLifecycle, epoch: int = 40, now: int = 0) -> None:
    request = lc.next_request(now, -1)
    assert isinstance(request, BrokerRegistrationRequest)
    lc.on_registration_response(BrokerRegistrationResponse(broker_epoch=epoch), now)


def test_registration_carries_listeners_rack_and_incarnation_and_is_retried_with_backoff() -> None:
    lc = _lifecycle()
    request = lc.next_request(0, -1)
    assert isinstance(request, BrokerRegistrationRequest)
    assert request.incarnation_id == "inc" and request.rack == "r1"
    assert [(x.name, x.port) for x in request.listeners] == [("PLAINTEXT", 9092)]
    assert lc.next_request(0, -1) is None  # one in flight
    lc.on_registration_response(
        BrokerRegistrationResponse(error_code=int(ErrorCode.NOT_CONTROLLER)), 0
    )
    assert lc.state is BrokerState.STARTING
    assert lc.next_request(50, -1) is None  # backoff 100 ms
    assert isinstance(lc.next_request(100, -1), BrokerRegistrationRequest)
    lc.on_send_failed(100, "no answer")
    assert lc.next_due_ms == 300  # doubled
    _registered(lc, now=300)
    assert lc.state is BrokerState.RECOVERY and lc.broker_epoch == 40


def test_heartbeats_want_fence_until_caught_up_and_ready_then_every_interval() -> None:
    lc = _lifecycle()
    _registered(lc)
    hb = lc.next_request(0, 10)
    assert isinstance(hb, BrokerHeartbeatRequest)
    assert hb.broker_epoch == 40 and hb.current_metadata_offset == 10 and hb.want_fence
    assert not lc.caught_up
    lc.on_heartbeat_response(BrokerHeartbeatResponse(is_fenced=True), 0)
    assert lc.next_request(1999, 10) is None
    assert lc.note_metadata_offset(40) and lc.caught_up  # the offset reached the broker epoch
    assert not lc.note_metadata_offset(41)  # only once
    lc.ready_to_unfence = True
    hb = lc.next_request(2000, 41)
    assert isinstance(hb, BrokerHeartbeatRequest) and not hb.want_fence
    lc.on_heartbeat_response(BrokerHeartbeatResponse(is_fenced=False, is_caught_up=True), 2000)
    assert lc.state is BrokerState.RUNNING and not lc.is_fenced
    assert lc.next_due_ms == 4000


def test_ready_while_a_fenced_heartbeat_is_in_flight_asks_to_unfence_at_once() -> None:
    """KRaft sends the unfence heartbeat as soon as the broker caught up, not an interval
    later (a combined node would otherwise serve clients broker.heartbeat.interval.ms late)."""
    lc = _lifecycle()
    _registered(lc)
    hb = lc.next_request(0, 40)
    assert isinstance(hb, BrokerHeartbeatRequest) and hb.want_fence
    lc.ready_to_unfence = True  # caught up and applied while that heartbeat was in flight
    lc.on_heartbeat_response(BrokerHeartbeatResponse(is_fenced=True), 5)
    hb = lc.next_request(5, 41)
    assert isinstance(hb, BrokerHeartbeatRequest) and not hb.want_fence
    # The controller still says fenced (not caught up in its eyes): the normal interval now.
    lc.on_heartbeat_response(BrokerHeartbeatResponse(is_fenced=True), 10)
    assert lc.next_due_ms == 2010


def test_stale_epoch_or_unknown_broker_registers_again() -> None:
    for code in (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED):
        lc = _lifecycle()
        _registered(lc)
        assert isinstance(lc.next_request(0, 40), BrokerHeartbeatRequest)
        lc.on_heartbeat_response(BrokerHeartbeatResponse(error_code=int(code)), 5)
        assert lc.broker_epoch == -1 and lc.is_fenced
        assert isinstance(lc.next_request(5, 40), BrokerRegistrationRequest)
        lc.on_registration_response(BrokerRegistrationResponse(broker_epoch=77), 5)
        assert lc.broker_epoch == 77


def test_other_heartbeat_errors_are_retried_after_backoff() -> None:
    lc = _lifecycle()
    _registered(lc)
    lc.next_request(0, 40)
    lc.on_heartbeat_response(BrokerHeartbeatResponse(error_code=int(ErrorCode.NOT_CONTROLLER)), 0)
    assert lc.broker_epoch == 40 and lc.next_due_ms == 100


def test_controlled_shutdown_through_the_heartbeat() -> None:
    lc = _lifecycle()
    _registered(lc)
    lc.next_request(0, 40)
    lc.on_heartbeat_response(BrokerHeartbeatResponse(is_fenced=False), 0)
    lc.begin_controlled_shutdown(500)  # before the next interval: sent at once
    assert lc.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN
    hb = lc.next_request(500, 45)
    assert isinstance(hb, BrokerHeartbeatRequest) and hb.want_shut_down and not hb.want_fence
    lc.on_heartbeat_response(BrokerHeartbeatResponse(is_fenced=False), 500)
    assert lc.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN
    hb = lc.next_request(2500, 46)
    assert isinstance(hb, BrokerHeartbeatRequest) and hb.want_shut_down
    lc.on_heartbeat_response(BrokerHeartbeatResponse(is_fenced=True, should_shut_down=True), 2500)
    assert lc.state is BrokerState.SHUTTING_DOWN
    assert lc.next_request(10_000, 46) is None


def test_a_pending_shutdown_reports_newly_applied_metadata_at_once() -> None:
    """The controller allows the shutdown once the broker applied the records that moved its
    leaderships: waiting a heartbeat interval (2 s) to say so delayed every controlled
    shutdown by up to that interval."""
    lc = _lifecycle()
    _registered(lc)
    lc.next_request(0, 40)
    lc.on_heartbeat_response(BrokerHeartbeatResponse(is_fenced=False), 0)
    lc.begin_controlled_shutdown(500)
    assert lc.next_request(500, 45) is not None
    lc.note_metadata_offset(47)  # the moves applied while the heartbeat was in flight
    assert not lc.shutdown_heartbeat_due(510)  # one heartbeat in flight at a time
    lc.on_heartbeat_response(BrokerHeartbeatResponse(is_fenced=False), 520)
    assert lc.next_due_ms == 520
    hb = lc.next_request(520, 47)
    assert isinstance(hb, BrokerHeartbeatRequest) and hb.current_metadata_offset == 47
    lc.on_heartbeat_response(BrokerHeartbeatResponse(is_fenced=False), 530)
    assert lc.next_due_ms == 2530 and not lc.shutdown_heartbeat_due(600)  # nothing new
    lc.note_metadata_offset(48)
    assert lc.shutdown_heartbeat_due(700) and lc.next_due_ms == 700


def test_newly_applied_metadata_does_not_hurry_heartbeats_outside_a_shutdown() -> None:
    lc = _lifecycle()
    _registered(lc)
    lc.next_request(0, 40)
    lc.on_heartbeat_response(BrokerHeartbeatResponse(is_fenced=False), 0)
    lc.note_metadata_offset(50)
    assert not lc.shutdown_heartbeat_due(100) and lc.next_due_ms == 2000


def test_shutdown_before_registration_needs_no_controller() -> None:
    lc = _lifecycle()
    lc.begin_controlled_shutdown(0)
    assert lc.state is BrokerState.SHUTTING_DOWN
