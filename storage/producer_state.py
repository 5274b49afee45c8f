"""Per-partition state of idempotent producers (Kafka's ProducerStateManager, ProducerStateEntry
and ProducerAppendInfo, without transactions). Pure: no file I/O except the snapshot bytes, which
`encode_snapshot` / `decode_snapshot` turn into and out of `<20-digit offset>.snapshot` files
(storage.log writes and reads them).

The leader checks each batch that carries a producer id (`LeaderAppendCheck`): an older epoch is
INVALID_PRODUCER_EPOCH, a batch equal to one of the producer's last five (same epoch, same first
and last sequence) is a duplicate answered with its original offsets, a new epoch must start at
sequence 0 and otherwise the sequence must follow the last one, else OUT_OF_ORDER_SEQUENCE_NUMBER.
Followers and log scans only `update` (no checks), so every replica holds the same state.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import crc32c
import msgpack

from protocol.errors import ErrorCode, KafkaError

BATCHES_TO_RETAIN = 5
"""Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN (max.in.flight.requests.per.connection)."""
NO_EPOCH = -1
INT32_MAX = (1 << 31) - 1
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEADER = struct.Struct(">hI")  # version, CRC32C of the msgpack body


class SnapshotError(ValueError):
    """A producer snapshot that cannot be used (torn, corrupt, unknown version)."""


class BatchMetadata(NamedTuple):
    """What dedup needs of one appended batch."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    last_timestamp: int = -1
    """Largest batch max timestamp seen (Kafka's lastTimestamp: what expiry looks at)."""

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def last_sequence(base_seq: int, last_offset_delta: int) -> int:
    """Sequences wrap at Int32.MAX_VALUE to 0, as Kafka's DefaultRecordBatch.incrementSequence."""
    if base_seq > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - base_seq) - 1
    return base_seq + last_offset_delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class ProducerStateManager:
    """The producers of one partition, as of `map_end_offset` (the next offset to apply)."""

    def __init__(self, partition: str) -> None:
        self.partition = partition
        self.entries: dict[int, ProducerEntry] = {}
        self.map_end_offset = 0

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self.entries.get(producer_id)

    def update(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        first_offset: int,
        last_offset: int,
        timestamp: int,
    ) -> None:
        """Record an appended batch (leader after its checks, follower, log scan)."""
        entry = self.entries.get(producer_id)
        if entry is None:
            entry = self.entries[producer_id] = ProducerEntry(producer_id, epoch)
        elif epoch != entry.epoch:
            # A new epoch starts a new sequence space: older batches cannot be retried.
            entry.epoch = epoch
            entry.batches.clear()
        entry.batches.append(
            BatchMetadata(first_seq, last_seq, first_offset, last_offset, timestamp)
        )
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        self.map_end_offset = max(self.map_end_offset, last_offset + 1)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for producer.id.expiration.ms (by their batches' timestamps,
        as Kafka's isProducerExpired); returns how many."""
        doomed = [
            pid for pid, e in self.entries.items() if now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in doomed:
            del self.entries[pid]
        return len(doomed)

    def clear(self, map_end_offset: int) -> None:
        self.entries.clear()
        self.map_end_offset = map_end_offset

    def load(self, entries: Iterable[ProducerEntry], map_end_offset: int) -> None:
        self.entries = {e.producer_id: e for e in entries}
        self.map_end_offset = map_end_offset

    def leader_check(self) -> LeaderAppendCheck:
        return LeaderAppendCheck(self)


class LeaderAppendCheck:
    """Kafka's ProducerAppendInfo for one leader append: checks each batch against the state
    plus the batches of the same append before it (so several batches of one producer in one
    Produce are checked in order). Changes nothing; the log calls `update` once the append
    is written."""

    def __init__(self, manager: ProducerStateManager) -> None:
        self._manager = manager
        self._pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq)

    def check(
        self, producer_id: int, epoch: int, first_seq: int, last_seq: int, offset: int
    ) -> BatchMetadata | None:
        """None when the batch may be appended; the original batch's metadata when it is a
        duplicate of one of the producer's last five; KafkaError otherwise."""
        entry = self._manager.get(producer_id)
        pending = self._pending.get(producer_id)
        if pending is None and entry is not None:
            dup = entry.find_duplicate(epoch, first_seq, last_seq)
            if dup is not None:
                return dup
        current_epoch, current_last = (
            pending
            if pending is not None
            else (entry.epoch, entry.last_seq)
            if entry is not None
            else (NO_EPOCH, -1)
        )
        where = f"producer {producer_id} at offset {offset} in {self._manager.partition}"
        if epoch < current_epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"{where}: epoch {epoch} is older than the last seen epoch {current_epoch}",
            )
        if epoch != current_epoch:
            # An unknown producer (no state: new, expired or retention took its batches) may
            # start anywhere, as Kafka since KIP-360; a known one's new epoch starts at 0.
            if first_seq != 0 and current_epoch != NO_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"{where}: new epoch {epoch} (was {current_epoch}) must start at sequence "
                    f"0, found sequence {first_seq}",
                )
        elif not in_sequence(current_last, first_seq):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"{where}: out of order sequence number: expected sequence "
                f"{(current_last + 1) & INT32_MAX}, found sequence {first_seq} (epoch {epoch})",
            )
        self._pending[producer_id] = (epoch, last_seq)
        return None


# -- snapshot files ------------------------------------------------------------------------------


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offset(name: str) -> int | None:
    """The offset of a `<20 digits>.snapshot` file name; None for any other name."""
    stem, dot, ext = name.partition(".")
    if dot and "." + ext == SNAPSHOT_SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    body = msgpack.packb(
        [[e.producer_id, e.epoch, e.last_timestamp, [list(b) for b in e.batches]] for e in entries]
    )
    return _SNAPSHOT_HEADER.pack(SNAPSHOT_VERSION, crc32c.crc32c(body)) + body


def decode_snapshot(data: bytes) -> list[ProducerEntry]:
    """Raises SnapshotError naming what is wrong."""
    if len(data) < _SNAPSHOT_HEADER.size:
        raise SnapshotError(f"{len(data)} bytes is too short for a producer snapshot")
    version, crc = _SNAPSHOT_HEADER.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise SnapshotError(f"unknown producer snapshot version {version}")
    body = data[_SNAPSHOT_HEADER.size :]
    actual = crc32c.crc32c(body)
    if actual != crc:
        raise SnapshotError(f"CRC mismatch: stored {crc:#010x}, computed {actual:#010x}")
    try:
        return list(_entries(msgpack.unpackb(body)))
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise SnapshotError(f"malformed producer snapshot: {exc}") from None


def _entries(raw: object) -> Iterator[ProducerEntry]:
    if not isinstance(raw, list):
        raise ValueError("the body is not a list")
    for item in raw:
        pid, epoch, last_ts, batches = item
        entry = ProducerEntry(int(pid), int(epoch), last_timestamp=int(last_ts))
        for b in batches:
            entry.batches.append(BatchMetadata(*(int(x) for x in b)))
        yield entry
