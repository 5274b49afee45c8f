"""storage.log_append.validate_client_records: Kafka's LogValidator for a client's append.
Each forged batch below has a valid CRC and was appended before (an independent probe of
200d5c1 made partitions unconsumable with them, and rolled a segment per request with a
claimed count of 2^31-1); now each is refused, naming the partition, and nothing is written."""

from __future__ import annotations

import msgpack
import pytest

from protocol.errors import CorruptRecordBatchError, ErrorCode, KafkaError
from protocol.names import TopicPartition
from protocol.record_batch import (
    CONTROL_FLAG,
    Compression,
    Record,
    build_batch,
    encode_batch_bytes,
)
from storage.log_append import validate_client_records

TP = TopicPartition("orders", 3)


def forged(payload: bytes, *, count: int, last_offset_delta: int, attributes: int = 0) -> bytes:
    """A batch with a correct CRC around whatever `payload` and header fields say."""
    return encode_batch_bytes(
        payload,
        attributes=attributes,
        last_offset_delta=last_offset_delta,
        base_timestamp=1_000,
        max_timestamp=1_000,
        records_count=count,
    )


def rows(n: int) -> bytes:
    return msgpack.packb([[0, 0, i, b"k", b"v", []] for i in range(n)])


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4, Compression.ZSTD])
def test_producer_batches_pass(compression: Compression) -> None:
    records = [Record(value=b"v%d" % i, key=b"k%d" % i) for i in range(5)]
    two = build_batch(records, compression=compression) + build_batch(records[:1])
    validate_client_records(two, TP, compacted=True)
    validate_client_records(forged(rows(3), count=3, last_offset_delta=2), TP, compacted=False)


def refused(records: bytes, *, compacted: bool = False) -> tuple[int, str]:
    with pytest.raises((KafkaError, CorruptRecordBatchError)) as info:
        validate_client_records(records, TP, compacted=compacted)
    exc = info.value
    code = exc.code if isinstance(exc, KafkaError) else ErrorCode.CORRUPT_MESSAGE
    message = exc.message if isinstance(exc, KafkaError) else str(exc)
    assert "orders-3" in message
    return code, message


def test_control_batches_are_refused() -> None:
    control = forged(rows(1), count=1, last_offset_delta=0, attributes=CONTROL_FLAG)
    assert refused(control) == (
        ErrorCode.INVALID_RECORD,
        "Clients are not allowed to write control records in topic partition orders-3.",
    )


def test_garbage_records_are_refused() -> None:
    code, message = refused(forged(b"\xc1\xc1garbage", count=1, last_offset_delta=0))
    assert code == ErrorCode.CORRUPT_MESSAGE and "not valid msgpack" in message
    code, message = refused(forged(msgpack.packb([["x"]]), count=1, last_offset_delta=0))
    assert code == ErrorCode.CORRUPT_MESSAGE and "record 0" in message


def test_a_false_record_count_is_refused() -> None:
    code, message = refused(forged(rows(2), count=3, last_offset_delta=2))
    assert code == ErrorCode.CORRUPT_MESSAGE and "holds 2 records" in message


@pytest.mark.parametrize(("count", "last"), [(2**31 - 1, 2**31 - 2), (1, 2**31 - 2), (0, -1)])
def test_offsets_the_records_do_not_have_are_refused(count: int, last: int) -> None:
    """The claimed offset span drove the leader's segment rolls (one segment per request)."""
    code, _ = refused(forged(rows(1), count=count, last_offset_delta=max(last, 0)))
    assert code in (ErrorCode.INVALID_RECORD, ErrorCode.CORRUPT_MESSAGE)


def test_offset_deltas_out_of_order_are_refused() -> None:
    payload = msgpack.packb([[0, 0, 1, b"k", b"v", []], [0, 0, 0, b"k", b"v", []]])
    code, message = refused(forged(payload, count=2, last_offset_delta=1))
    assert code == ErrorCode.CORRUPT_MESSAGE and "out of order" in message


def test_a_compacted_topic_needs_keys() -> None:
    keyless = build_batch([Record(value=b"v", key=b"k"), Record(value=b"v")])
    validate_client_records(keyless, TP, compacted=False)
    assert refused(keyless, compacted=True)[0] == ErrorCode.INVALID_RECORD


def test_a_truncated_batch_is_refused() -> None:
    whole = build_batch([Record(value=b"v")])
    assert refused(whole + whole[:30])[0] == ErrorCode.CORRUPT_MESSAGE
