"""The chaos history and its duplicate / lost-write checker, on planted histories."""

from __future__ import annotations

import itertools

import pytest

from deploy.chaos.check.checker import check
from deploy.chaos.check.history import History, OpKind, OpType, PolledRecord, SendValue
from protocol.names import TopicPartition

T = "t"


def history() -> History:
    ticks = itertools.count()
    return History(clock_ns=lambda: next(ticks))


def send(h: History, value: bytes, outcome: OpType, partition: int = 0, offset: int = 0) -> None:
    op = h.invoke("producer", OpKind.SEND, SendValue(T, value))
    if outcome is OpType.OK:
        h.complete(op, OpType.OK, SendValue(T, value, partition=partition, offset=offset))
    else:
        h.complete(op, outcome, error="broken connection")


def poll(h: History, *records: tuple[int, int, bytes], process: str = "consumer") -> None:
    op = h.invoke(process, OpKind.POLL, ())
    h.complete(op, OpType.OK, tuple(PolledRecord(T, p, o, v) for p, o, v in records))


def clean() -> History:
    h = history()
    for i in range(4):
        send(h, b"v%d" % i, OpType.OK, partition=i % 2, offset=i // 2)
    poll(h, (0, 0, b"v0"), (1, 0, b"v1"))
    poll(h, (0, 1, b"v2"), (1, 1, b"v3"))
    return h


def test_a_clean_history_passes() -> None:
    result = check(clean())
    assert result.valid, result.summary()
    assert (result.sent, result.acknowledged, result.read) == (4, 4, 4)


def test_reading_the_same_copy_twice_is_no_duplicate() -> None:
    h = clean()
    poll(h, (0, 0, b"v0"), (0, 1, b"v2"), process="consumer-2")  # a re-read after a rebalance
    assert check(h).valid


def test_a_planted_duplicate_is_found() -> None:
    h = clean()
    poll(h, (0, 2, b"v2"))  # a retry wrote v2 again
    result = check(h)
    assert not result.valid
    (dup,) = result.duplicates
    assert dup.value == b"v2"
    assert dup.copies == ((TopicPartition(T, 0), 1), (TopicPartition(T, 0), 2))
    assert "duplicate b'v2'" in result.summary()


def test_a_planted_lost_write_is_found() -> None:
    h = history()
    send(h, b"a", OpType.OK, offset=0)
    send(h, b"b", OpType.OK, offset=1)  # acknowledged, then truncated away
    send(h, b"c", OpType.OK, offset=2)
    poll(h, (0, 0, b"a"), (0, 1, b"c"))
    result = check(h)
    assert [(w.value, w.offset) for w in result.lost] == [(b"b", 1)]
    assert not result.valid


def test_unacknowledged_sends_may_be_missing_and_unread_ones_are_no_verdict() -> None:
    h = history()
    send(h, b"a", OpType.OK, offset=0)
    send(h, b"failed", OpType.FAIL)
    send(h, b"unknown", OpType.INFO)
    h.invoke("producer", OpKind.SEND, SendValue(T, b"never completed"))
    send(h, b"past the reads", OpType.OK, offset=5)
    poll(h, (0, 0, b"a"), (0, 1, b"unknown"))
    result = check(h)
    assert result.valid, result.summary()
    assert [s.value for s in result.unread] == [b"past the reads"]


def test_a_value_nobody_sent_is_unexpected() -> None:
    h = clean()
    poll(h, (1, 2, b"ghost"))
    assert [r.value for r in check(h).unexpected] == [b"ghost"]


def test_values_must_be_unique() -> None:
    h = history()
    send(h, b"a", OpType.OK)
    send(h, b"a", OpType.OK)
    with pytest.raises(ValueError, match="sent twice"):
        check(h)


def test_completions_point_at_their_invocations() -> None:
    h = clean()
    pairs = list(h.pairs())
    assert len(pairs) == 6
    assert all(done is not None and done.invocation == op.index for op, done in pairs)
    assert [op.time_ns for op in h.ops] == sorted(op.time_ns for op in h.ops)
