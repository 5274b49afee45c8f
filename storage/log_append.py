"""What an append to a partition's log is checked against before anything is written, and what
it answers (Kafka's LogValidator and LogAppendInfo, the parts trioka keeps).

    found = stamp_leader_batches(buf, log_end_offset, leader_epoch, config, tp, producers)
    found = check_follower_batches(buf, log_end_offset, tp)
    info = duplicate_answer(found.duplicates, found.in_order, first, new, log_start_offset)

A leader append: every batch valid (magic, CRC), within max.message.bytes, its record count
matching its offsets; batches with a producer id pass the producer's epoch and sequence checks
(storage.producer_state), and a retry of batches already in the log is set aside as a duplicate;
the others get their offsets and the leader epoch stamped in place. A follower append (replication,
Raft): batches carry their offsets and epochs already, which must only go up. storage.log.Log
writes what passed (nothing, when any check fails).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from protocol.errors import CorruptRecordBatchError, ErrorCode, KafkaError
from protocol.names import TopicPartition
from protocol.record_batch import (
    CONTROL_FLAG,
    BatchHeader,
    decode_batch_records,
    iter_batches,
    stamp,
    validate_batch,
)
from storage.config import LogConfig
from storage.errors import UnexpectedAppendOffsetError
from storage.producer_snapshots import ProducerStateStore
from storage.producer_state import BatchMetadata, LeaderAppendCheck, last_sequence
from storage.segment import BatchInfo


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    """Largest batch max timestamp in the append (-1 if none)."""
    offset_of_max_timestamp: int
    num_batches: int
    num_records: int
    """Sum of the batches' records_count headers (records are never decoded)."""
    valid_bytes: int
    log_start_offset: int
    log_append_time: int = -1
    """-1: trioka keeps CreateTime (message.timestamp.type)."""
    duplicate: bool = False
    """Some or all batches were a producer's retry of batches already in the log: those were
    not written again; `first_offset` is the first original's, or -1 when the append's batches
    are not contiguous in the log (offsets unknown); `last_offset` is the last of them all."""


@dataclass(slots=True)
class LeaderBatches:
    """A leader append's batches once checked, the new ones stamped."""

    batches: list[BatchInfo]
    """The new batches (where they sit in the buffer, their last offsets)."""
    num_records: int
    duplicates: list[BatchMetadata]
    """The originals of the batches that retried ones already in the log."""
    in_order: bool
    """Every duplicate came before every new batch."""
    producer_headers: list[BatchHeader]
    """Headers of the new batches with a producer id, with their offsets."""


@dataclass(slots=True)
class FollowerBatches:
    batches: list[BatchInfo]
    epochs: list[tuple[int, int]]
    """(leader epoch, start offset) of each epoch the batches begin."""
    producer_headers: list[BatchHeader]
    num_records: int
    gap: bool
    """Some batch starts past the end of the one before it (what a cleaner removed)."""


def stamp_leader_batches(
    buf: bytearray,
    first: int,
    leader_epoch: int,
    cfg: LogConfig,
    tp: TopicPartition,
    producers: ProducerStateStore,
) -> LeaderBatches:
    """Check every batch of `buf` and stamp the new ones, in place, with offsets from `first`
    and `leader_epoch`. KafkaError (or CorruptRecordBatchError) on the first that fails."""
    n = len(buf)
    offset = first
    batches: list[BatchInfo] = []
    num_records = 0
    pos = 0
    check: LeaderAppendCheck | None = None  # made at the first batch with a producer id
    duplicates: list[BatchMetadata] = []
    in_order = True  # every duplicate came before every new batch
    producer_headers: list[BatchHeader] = []
    while pos < n:
        h = _valid_leader_batch(buf, pos, cfg, tp)
        size = h.size
        if h.producer_id >= 0 and producers.enabled:
            if check is None:
                check = producers.state.leader_check()
            dup = _check_producer(check, h, offset, tp)
            if dup is not None:
                in_order = in_order and not batches
                duplicates.append(dup)
                pos += size
                continue
            producer_headers.append(h._replace(base_offset=offset))
        stamp(buf, pos, offset, leader_epoch)
        last = offset + h.last_offset_delta
        batches.append(BatchInfo(pos, size, last, h.max_timestamp))
        num_records += h.records_count
        offset = last + 1
        pos += size
    return LeaderBatches(batches, num_records, duplicates, in_order, producer_headers)


def _valid_leader_batch(
    buf: bytearray, pos: int, cfg: LogConfig, tp: TopicPartition
) -> BatchHeader:
    try:
        h = validate_batch(buf, pos)
    except CorruptRecordBatchError as exc:
        raise CorruptRecordBatchError(f"append to {tp} refused: {exc}") from None
    size = h.size
    if size > cfg.max_message_bytes:
        raise KafkaError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"append to {tp} refused: the record batch at byte {pos} is {size} bytes, "
            f"over max.message.bytes={cfg.max_message_bytes}",
        )
    if h.records_count != h.last_offset_delta + 1:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"append to {tp} refused: the record batch at byte {pos} has "
            f"records_count {h.records_count} but last_offset_delta "
            f"{h.last_offset_delta} (expected records_count = last_offset_delta + 1)",
        )
    return h


def validate_client_records(
    records: bytes | bytearray | memoryview, tp: TopicPartition, *, compacted: bool
) -> None:
    """Kafka's LogValidator for a client's append (AppendOrigin.CLIENT), before the leader's
    own checks: no control batches, and the records of every batch decode to exactly the count
    and offsets its header claims (a batch with a valid CRC may hold garbage, a false count,
    or offsets that made the leader roll a segment per request); on a compacted topic every
    record has a key. KafkaError INVALID_RECORD or CorruptRecordBatchError (CORRUPT_MESSAGE);
    nothing is appended. Message timestamps are not bounded (Kafka's
    log.message.timestamp.*.max.ms default to no bound either)."""
    try:
        _validate_client_batches(records, tp, compacted)
    except CorruptRecordBatchError as exc:
        raise CorruptRecordBatchError(f"append to {tp} refused: {exc}") from None


def _validate_client_batches(
    records: bytes | bytearray | memoryview, tp: TopicPartition, compacted: bool
) -> None:
    for pos, h in iter_batches(records):
        if h.attributes & CONTROL_FLAG:
            raise KafkaError(
                ErrorCode.INVALID_RECORD,
                f"Clients are not allowed to write control records in topic partition {tp}.",
            )
        if h.records_count <= 0 or h.records_count != h.last_offset_delta + 1:
            raise KafkaError(
                ErrorCode.INVALID_RECORD,
                f"Inconsistent batch offset range [0, {h.last_offset_delta}] and count of "
                f"records {h.records_count} in topic partition {tp}.",
            )
        keys = decode_batch_records(records, pos, factory=_key_of, verify_crc=False)[1]
        if compacted and None in keys:
            raise KafkaError(
                ErrorCode.INVALID_RECORD,
                f"append to {tp} refused: compacted topic cannot accept a record without a key",
            )


def _key_of(
    _offset: int, _timestamp: int, key: bytes | None, _value: bytes | None, _headers: object
) -> bytes | None:
    return key


def _check_producer(
    check: LeaderAppendCheck, h: BatchHeader, offset: int, tp: TopicPartition
) -> BatchMetadata | None:
    if h.base_sequence < 0:
        raise KafkaError(
            ErrorCode.INVALID_RECORD,
            f"append to {tp} refused: the batch of producer "
            f"{h.producer_id} has no sequence number ({h.base_sequence})",
        )
    last_seq = last_sequence(h.base_sequence, h.last_offset_delta)
    return check.check(h.producer_id, h.producer_epoch, h.base_sequence, last_seq, offset)


def duplicate_answer(
    dups: list[BatchMetadata],
    in_order: bool,
    first: int,
    new: AppendInfo | None,
    log_start_offset: int,
) -> AppendInfo:
    """Kafka answers a retried batch with its original offsets. Several batches in one
    append get the first one's base offset only when, all together, they sit in the log
    one after the other (retries first, then what was new); otherwise first_offset is -1:
    every batch is in the log but the offsets cannot be told in one base offset."""
    contiguous = (
        in_order
        and all(a.last_offset + 1 == b.first_offset for a, b in itertools.pairwise(dups))
        and (new is None or dups[-1].last_offset + 1 == first)
    )
    last = new.last_offset if new is not None else max(d.last_offset for d in dups)
    return AppendInfo(
        first_offset=dups[0].first_offset if contiguous else -1,
        last_offset=last,
        max_timestamp=max([d.timestamp for d in dups] + [new.max_timestamp if new else -1]),
        offset_of_max_timestamp=dups[0].first_offset,
        num_batches=new.num_batches if new else 0,
        num_records=new.num_records if new else 0,
        valid_bytes=new.valid_bytes if new else 0,
        log_start_offset=log_start_offset,
        duplicate=True,
    )


def check_follower_batches(
    buf: bytes | bytearray, first: int, tp: TopicPartition
) -> FollowerBatches:
    """Check the batches of a follower append starting at the log end offset `first`: CRCs,
    and offsets going up from it (a forward gap is what the leader's cleaner removed)."""
    expected = first
    batches: list[BatchInfo] = []
    epochs: list[tuple[int, int]] = []
    producer_headers: list[BatchHeader] = []
    num_records = 0
    pos = 0
    gap = False
    while pos < len(buf):
        h = _valid_follower_batch(buf, pos, expected, tp)
        gap = gap or h.base_offset > expected
        epoch = h.partition_leader_epoch
        if epoch >= 0 and (not epochs or epochs[-1][0] != epoch):
            epochs.append((epoch, h.base_offset))
        expected = h.base_offset + h.last_offset_delta + 1
        batches.append(BatchInfo(pos, h.size, expected - 1, h.max_timestamp))
        num_records += h.records_count
        if h.producer_id >= 0:
            producer_headers.append(h)
        pos += h.size
    return FollowerBatches(batches, epochs, producer_headers, num_records, gap)


def _valid_follower_batch(
    buf: bytes | bytearray, pos: int, expected: int, tp: TopicPartition
) -> BatchHeader:
    try:
        h = validate_batch(buf, pos)
    except CorruptRecordBatchError as exc:
        raise CorruptRecordBatchError(f"append to {tp} refused: {exc}") from None
    if h.base_offset < expected:
        if pos == 0:
            raise UnexpectedAppendOffsetError(
                f"append to {tp} starts at offset {h.base_offset} but the log ends at {expected}",
                first_offset=h.base_offset,
                log_end_offset=expected,
            )
        raise CorruptRecordBatchError(
            f"append to {tp} refused: batch at byte {pos} has base offset "
            f"{h.base_offset}, expected at least {expected} (offsets must go up)"
        )
    return h
