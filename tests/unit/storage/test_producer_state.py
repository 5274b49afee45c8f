"""storage.producer_state: the leader's sequence and epoch checks, dedup of the last five
batches, expiry, and the snapshot encoding."""

from __future__ import annotations

import pytest

from protocol.errors import ErrorCode, KafkaError
from storage.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerStateManager,
    SnapshotError,
    decode_snapshot,
    encode_snapshot,
    last_sequence,
    snapshot_file_name,
    snapshot_offset,
)

PID = 4000


def state_with(*batches: tuple[int, int, int], pid: int = PID) -> ProducerStateManager:
    """(epoch, first_seq, last_seq) batches appended at consecutive offsets."""
    s = ProducerStateManager("t-0")
    offset = 0
    for epoch, first, last in batches:
        n = last - first + 1
        s.update(pid, epoch, first, last, offset, offset + n - 1, 1_000 + offset)
        offset += n
    return s


def check(s: ProducerStateManager, epoch: int, first: int, last: int) -> BatchMetadata | None:
    return s.leader_check().check(PID, epoch, first, last, s.map_end_offset)


SIX = [(0, i * 2, i * 2 + 1) for i in range(6)]  # six 2-record batches: seqs 0..11


@pytest.mark.parametrize(
    ("epoch", "first", "last", "outcome"),
    [
        (0, 12, 13, "append"),  # in sequence
        (0, 12, 20, "append"),  # in sequence, longer batch
        (0, 2, 3, 2),  # duplicate of the oldest of the last five (the first is gone)
        (0, 4, 5, 4),
        (0, 6, 7, 6),
        (0, 8, 9, 8),
        (0, 10, 11, 10),  # duplicate of the newest
        (0, 0, 1, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),  # sixth back: no longer known
        (0, 10, 12, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),  # overlaps, not a duplicate
        (0, 14, 15, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),  # gap
        (1, 0, 3, "append"),  # new epoch starts at 0
        (1, 12, 13, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),  # new epoch not at 0
        (-1, 12, 13, ErrorCode.INVALID_PRODUCER_EPOCH),
    ],
)
def test_leader_check_table(epoch: int, first: int, last: int, outcome: object) -> None:
    s = state_with(*SIX)
    if outcome == "append":
        assert check(s, epoch, first, last) is None
    elif isinstance(outcome, ErrorCode):
        with pytest.raises(KafkaError) as err:
            check(s, epoch, first, last)
        assert err.value.code == outcome
        assert str(PID) in err.value.message
    else:
        dup = check(s, epoch, first, last)
        assert dup is not None and (dup.first_offset, dup.first_seq) == (outcome, first)


def test_older_epoch_after_a_bump_is_fenced() -> None:
    s = state_with((0, 0, 4), (3, 0, 1))
    with pytest.raises(KafkaError) as err:
        check(s, 2, 2, 3)
    assert err.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert "epoch 2 is older than the last seen epoch 3" in err.value.message


def test_gap_message_names_producer_expected_and_found() -> None:
    s = state_with((0, 0, 4))
    with pytest.raises(KafkaError) as err:
        check(s, 0, 9, 9)
    msg = err.value.message
    assert f"producer {PID}" in msg and "expected sequence 5" in msg and "found sequence 9" in msg


@pytest.mark.parametrize("first", [0, 7, 1000])
def test_unknown_producer_may_start_anywhere(first: int) -> None:
    # Kafka since KIP-360: a producer with no state (new, expired, retention took its
    # batches) is accepted at any sequence.
    assert check(ProducerStateManager("t-0"), 0, first, first + 1) is None


def test_batches_of_one_append_are_checked_in_order() -> None:
    s = state_with((0, 0, 1))
    c = s.leader_check()
    assert c.check(PID, 0, 2, 3, 2) is None
    assert c.check(PID, 0, 4, 4, 4) is None  # follows the pending batch, not the state
    with pytest.raises(KafkaError):
        c.check(PID, 0, 2, 3, 5)  # no dedup against the append's own batches


def test_new_epoch_forgets_old_batches() -> None:
    s = state_with((0, 0, 1), (1, 0, 0))
    with pytest.raises(KafkaError):
        check(s, 0, 0, 1)
    assert check(s, 1, 0, 0) is not None
    assert len(s.get(PID).batches) == 1  # type: ignore[union-attr]


def test_sequence_wraps_at_int32_max() -> None:
    assert last_sequence(INT32_MAX - 1, 3) == 1
    s = state_with((0, INT32_MAX - 1, INT32_MAX))
    assert check(s, 0, 0, 4) is None


def test_expiry_by_batch_timestamp() -> None:
    s = ProducerStateManager("t-0")
    s.update(1, 0, 0, 0, 0, 0, timestamp=1_000)
    s.update(2, 0, 0, 0, 1, 1, timestamp=5_000)
    assert s.remove_expired(now_ms=10_999, expiration_ms=10_000) == 0
    assert s.remove_expired(now_ms=11_000, expiration_ms=10_000) == 1
    assert list(s.entries) == [2]
    assert check(s, 0, 5, 5) is None  # pid 4000 unknown; pid 1 now unknown too


def test_snapshot_round_trip() -> None:
    s = state_with(*SIX)
    s.update(7, 2, 10, 10, 100, 100, 9_999)
    entries = decode_snapshot(encode_snapshot(s.entries.values()))
    assert {e.producer_id: (e.epoch, list(e.batches), e.last_timestamp) for e in entries} == {
        e.producer_id: (e.epoch, list(e.batches), e.last_timestamp) for e in s.entries.values()
    }
    assert decode_snapshot(encode_snapshot([])) == []


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda b: b[:3], "too short"),
        (lambda b: b[:-1], "CRC mismatch"),
        (lambda b: b[:10] + bytes([b[10] ^ 1]) + b[11:], "CRC mismatch"),
        (lambda b: b"\x00\x09" + b[2:], "unknown producer snapshot version 9"),
    ],
)
def test_corrupt_snapshot_is_refused(damage: object, problem: str) -> None:
    good = encode_snapshot(state_with(*SIX).entries.values())
    with pytest.raises(SnapshotError, match=problem):
        decode_snapshot(damage(good))  # type: ignore[operator]


def test_snapshot_file_names() -> None:
    assert snapshot_file_name(42) == "00000000000000000042.snapshot"
    assert snapshot_offset("00000000000000000042.snapshot") == 42
    for other in [
        "00000000000000000042.log",
        "42.snapshot",
        "00000000000000000042-0000000001.checkpoint",
        "00000000000000000042.snapshot.tmp",
    ]:
        assert snapshot_offset(other) is None
