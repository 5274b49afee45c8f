"""AllocateProducerIds (KIP-730): blocks of 1,000 ids as ProducerIdsRecords, never handed out
twice, only to the registered incarnation of a broker."""

from __future__ import annotations

from controller.context import ControllerContext
from controller.operations import run_operation
from controller.state import ControllerState
from protocol.errors import ErrorCode
from protocol.messages.producer_ids import AllocateProducerIdsRequest
from protocol.metadata.records import ProducerIdsRecord, RegisterBrokerRecord
from protocol.metadata.snapshot import encode_snapshot, image_from_snapshot


def _state() -> ControllerState:
    state = ControllerState()
    state.replay(
        [
            (0, RegisterBrokerRecord(broker_id=1, incarnation_id="a", broker_epoch=0)),
            (1, RegisterBrokerRecord(broker_id=2, incarnation_id="b", broker_epoch=1)),
        ]
    )
    return state


def _allocate(state: ControllerState, broker_id: int, epoch: int):  # type: ignore[no-untyped-def]
    result = run_operation(
        state,
        AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=epoch),
        ControllerContext(),
    )
    if result.records:
        state.replay_appended(result.records, state.next_offset + len(result.records) - 1)
    return result


def test_blocks_follow_each_other_across_brokers() -> None:
    state = _state()
    first = _allocate(state, 1, 0)
    second = _allocate(state, 2, 1)
    third = _allocate(state, 1, 0)
    assert [
        (r.response.producer_id_start, r.response.producer_id_len) for r in (first, second, third)
    ] == [
        (0, 1000),
        (1000, 1000),
        (2000, 1000),
    ]
    assert first.records == (ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=1000),)
    assert state.image.producer_ids.next_producer_id == 3000


def test_a_snapshot_keeps_the_next_block() -> None:
    state = _state()
    _allocate(state, 1, 0)
    image = image_from_snapshot(encode_snapshot(state.image), end_offset=3, epoch=1)
    restored = ControllerState(image)
    assert _allocate(restored, 2, 1).response.producer_id_start == 1000


def test_a_stale_or_unknown_broker_epoch_gets_nothing() -> None:
    state = _state()
    for broker_id, epoch, says in [
        (1, 5, "registered with another epoch"),
        (9, 0, "not registered"),
    ]:
        result = _allocate(state, broker_id, epoch)
        assert result.records == ()
        assert result.response.error_code == ErrorCode.STALE_BROKER_EPOCH
        assert says in result.response.error_message
    assert state.image.producer_ids.next_producer_id == 0
