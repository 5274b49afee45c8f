from __future__ import annotations

from client.accumulator import RecordAccumulator, record_size
from protocol.errors import ErrorCode, KafkaError
from protocol.names import TopicPartition
from protocol.record_batch import decode_records, iter_batches

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def leaders(topic: str, partition: int) -> int | None:
    return {0: 1, 1: 2}.get(partition)


def add(acc: RecordAccumulator, tp: TopicPartition, value: bytes, now: float):
    return acc.append(tp, 1000, None, value, (), record_size(None, value, ()), now)


def test_records_fill_a_batch_up_to_batch_size_then_a_new_one_opens() -> None:
    acc = RecordAccumulator(batch_size=200, linger_ms=10)
    wakes = [add(acc, TP0, b"x" * 50, 0)[1] for _ in range(6)]
    assert wakes[0] is True  # a new batch: the sender must start its linger timer
    assert acc.queue_size(TP0) == 3  # 61-byte header + 2 x 66 bytes fit in 200, a third not
    assert acc.buffered_bytes == 6 * record_size(None, b"x" * 50, ())


def test_a_partial_batch_is_ready_only_after_linger() -> None:
    acc = RecordAccumulator(batch_size=10_000, linger_ms=10)
    add(acc, TP0, b"a", now=0)
    check = acc.ready(leaders, now_ms=3)
    assert check.ready_nodes == set()
    assert check.next_check_ms == 7
    assert acc.ready(leaders, now_ms=10).ready_nodes == {1}


def test_a_full_batch_is_ready_at_once_and_flush_makes_everything_ready() -> None:
    acc = RecordAccumulator(batch_size=100, linger_ms=1000)
    for _ in range(5):
        add(acc, TP0, b"x" * 40, now=0)
    add(acc, TP1, b"y", now=0)
    assert acc.ready(leaders, now_ms=0).ready_nodes == {1}
    acc.flushing = True
    assert acc.ready(leaders, now_ms=0).ready_nodes == {1, 2}


def test_drain_takes_every_ready_batch_of_a_node_up_to_max_request_size() -> None:
    acc = RecordAccumulator(batch_size=200, linger_ms=1000)
    for i in range(10):
        add(acc, TP0, b"%02d" % i + b"x" * 38, now=0)  # 2 records per batch: 5 batches
    batches = acc.drain(leaders, [1], max_request_size=10_000, now_ms=0)[1]
    # the last batch is not full and linger has not passed: it stays
    assert len(batches) == 4
    assert acc.queue_size(TP0) == 1
    small = RecordAccumulator(batch_size=100, linger_ms=0)
    for _ in range(10):
        add(small, TP0, b"x" * 40, now=0)
    first = small.drain(leaders, [1], max_request_size=150, now_ms=0)[1]
    assert len(first) == 1  # at least one batch, never more than max.request.size allows


def test_closed_batches_encode_their_records() -> None:
    acc = RecordAccumulator(batch_size=1000, linger_ms=0)
    futures = [add(acc, TP0, b"v%d" % i, now=0)[0] for i in range(3)]
    (batch,) = acc.drain(leaders, [1], 10_000, now_ms=0)[1]
    data = batch.close()
    assert [h.records_count for _, h in iter_batches(data)] == [3]
    assert [r.value for r in decode_records(data)] == [b"v0", b"v1", b"v2"]
    assert batch.record_count == 3
    acc.complete(batch, 40, None)
    assert [f.result().offset for f in futures] == [40, 41, 42]
    assert acc.buffered_bytes == 0
    assert not acc.incomplete


def test_a_reenqueued_batch_waits_for_its_backoff_and_goes_first() -> None:
    acc = RecordAccumulator(batch_size=1000, linger_ms=0)
    add(acc, TP0, b"a", now=0)
    (batch,) = acc.drain(leaders, [1], 10_000, now_ms=0)[1]
    add(acc, TP0, b"b", now=1)
    acc.reenqueue(batch, retry_at_ms=100)
    check = acc.ready(leaders, now_ms=50)
    assert check.ready_nodes == set() and check.next_check_ms == 50
    drained = acc.drain(leaders, [1], 10_000, now_ms=100)[1]
    assert drained[0] is batch and batch.attempts == 2


def test_batches_expire_after_delivery_timeout() -> None:
    acc = RecordAccumulator(batch_size=1000, linger_ms=0, delivery_timeout_ms=500)
    future, _ = add(acc, TP0, b"a", now=0)
    assert acc.expired(now_ms=499) == []
    (batch,) = acc.expired(now_ms=500)
    acc.complete(batch, -1, KafkaError(ErrorCode.REQUEST_TIMED_OUT, "expired"))
    assert future.done()
    assert isinstance(future.exception(), KafkaError)


def test_partitions_without_a_leader_are_reported() -> None:
    acc = RecordAccumulator(batch_size=1000, linger_ms=0)
    add(acc, TopicPartition("t", 7), b"a", now=0)
    assert acc.ready(leaders, now_ms=0).unknown_leaders == {"t"}


def test_batches_failing_in_any_order_are_retried_in_creation_order() -> None:
    acc = RecordAccumulator(batch_size=100, linger_ms=0)
    for i in range(3):
        add(acc, TP0, b"%d" % i + b"x" * 60, now=0)  # one record per batch
    batches = acc.drain(leaders, [1], 10_000, now_ms=0)[1]
    assert len(batches) == 3
    add(acc, TP0, b"later", now=1)
    for batch in (batches[2], batches[0], batches[1]):  # responses fail out of order
        acc.reenqueue(batch, retry_at_ms=0)
    again = acc.drain(leaders, [1], 10_000, now_ms=5)[1]
    assert [b.seq for b in again] == sorted(b.seq for b in again)
    assert again[:3] == batches


def test_record_futures_share_their_batch_result() -> None:
    import pytest

    acc = RecordAccumulator(batch_size=1000, linger_ms=0)
    first, _ = add(acc, TP0, b"a", now=0)
    second, _ = add(acc, TP0, b"b", now=0)
    assert first.batch is second.batch
    seen = []
    second.add_done_callback(lambda f: seen.append(f.result().offset))
    with pytest.raises(RuntimeError, match="not been acknowledged"):
        first.result()
    (batch,) = acc.drain(leaders, [1], 10_000, now_ms=0)[1]
    batch.close()
    acc.complete(batch, 7, None)
    assert seen == [8]
    assert first.result().offset == 7 and first.batch.record_count == 2
