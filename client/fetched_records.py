"""What a consumer's Fetch brings back: the bytes of one partition (CompletedFetch), decoded a
batch at a time into ConsumerRecords as poll() asks for records.

    cf = CompletedFetch(tp, fetch_offset, partition_records, check_crc=True)
    used_up = cf.take(max_records, out)        # appends ConsumerRecords to `out`
    cf.next_offset, cf.last_epoch              # the position reached, its batch's leader epoch

Records below the fetch offset in a first batch are skipped (the fetch started inside it); a
partial batch at the end is left for the next fetch, which starts at it again. Batches wholly
below the fetch offset are skipped without decoding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from client.positions import NO_EPOCH
from protocol.names import TopicPartition
from protocol.record_batch import HEADER_SIZE, decode_batch_records, read_header


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


def decode_batch(
    topic: str, partition: int, data: bytes | memoryview, pos: int, check_crc: bool = True
) -> tuple[list[ConsumerRecord], int, int]:
    """Decode the batch at `pos` into ConsumerRecords; returns (records, batch end, next
    offset). `check_crc` is Kafka's check.crcs."""
    header, records = decode_batch_records(
        data, pos, factory=_record_factory(topic, partition), verify_crc=check_crc
    )
    return records, pos + header.size, header.next_offset


def _record_factory(
    topic: str, partition: int
) -> Callable[[int, int, bytes | None, bytes | None, tuple[Any, ...]], ConsumerRecord]:
    """Builds ConsumerRecords with tuple.__new__: half the cost of the NamedTuple constructor,
    which matters once per record on the consumer's hot path."""
    new = tuple.__new__

    def make(
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[Any, ...],
    ) -> ConsumerRecord:
        return new(ConsumerRecord, (topic, partition, offset, timestamp, key, value, headers))

    return make


class CompletedFetch:
    """Fetched bytes of one partition, decoded a batch at a time as poll() asks for records."""

    __slots__ = (
        "_batch_next",
        "_check_crc",
        "_data",
        "_idx",
        "_pos",
        "_records",
        "last_epoch",
        "next_offset",
        "tp",
    )

    def __init__(
        self, tp: TopicPartition, fetch_offset: int, data: bytes, check_crc: bool = True
    ) -> None:
        self.tp = tp
        self._check_crc = check_crc
        self.next_offset = fetch_offset
        self._data = data
        self._pos = 0
        self._records: list[ConsumerRecord] = []
        self._idx = 0
        self._batch_next = fetch_offset
        self.last_epoch = NO_EPOCH
        """Leader epoch of the batch `next_offset` was reached in (the position's epoch)."""

    def take(self, max_records: int, out: list[ConsumerRecord]) -> bool:
        """Append up to `max_records` records to `out`; True when this fetch is used up."""
        topic, partition = self.tp
        data = self._data
        taken = 0
        while taken < max_records:
            if self._idx >= len(self._records):
                if self._batch_next > self.next_offset:
                    self.next_offset = self._batch_next
                if self._pos + HEADER_SIZE > len(data):
                    return True
                header = read_header(data, self._pos)
                if self._pos + header.size > len(data):
                    # a partial batch at the end: the next fetch starts at it again
                    return True
                self.last_epoch = header.partition_leader_epoch  # per batch, not per record
                if header.next_offset > self.next_offset:
                    self._records, end, self._batch_next = decode_batch(
                        topic, partition, data, self._pos, self._check_crc
                    )
                else:
                    self._records, end, self._batch_next = (
                        [],
                        self._pos + header.size,
                        header.next_offset,
                    )
                self._pos = end
                # records below the fetch offset (the fetch started inside this batch)
                first = self.next_offset
                idx = 0
                records = self._records
                while idx < len(records) and records[idx].offset < first:
                    idx += 1
                self._idx = idx
                continue
            stop = min(len(self._records), self._idx + max_records - taken)
            chunk = self._records[self._idx : stop]
            out += chunk
            taken += len(chunk)
            self.next_offset = chunk[-1].offset + 1
            self._idx = stop
        if self._idx >= len(self._records) and self._pos >= len(data):
            if self._batch_next > self.next_offset:
                self.next_offset = self._batch_next
            return True
        return False
