"""The Raft log-store port (what `raft.core` needs from a log) and an in-memory store.

Modelled on KRaft's `ReplicatedLog`: entries carry their own offset and leader epoch; the epoch
cache answers `end_offset_for_epoch` with Kafka's `LeaderEpochFileCache.endOffsetFor`
semantics; appends are not durable until `flush()`; snapshots let the log start move up.

`MemoryLogStore` backs the unit tests and the simulator (`crash()` drops what was never
flushed, as a process kill drops the page cache of an un-fsynced file). A disk store over
storage/ segments implements the same `LogStore` protocol.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import NamedTuple, Protocol, runtime_checkable

# Epoch 0 is "before any leader": an empty log's last epoch. Real entries have epoch >= 1.
NO_EPOCH = 0


class Entry(NamedTuple):
    """One log entry: its offset, the leader epoch it was appended in, opaque bytes."""

    offset: int
    epoch: int
    data: bytes


class OffsetAndEpoch(NamedTuple):
    """An (offset, epoch) pair, as KRaft's OffsetAndEpoch (an end offset is exclusive)."""

    offset: int
    epoch: int


class SnapshotId(NamedTuple):
    """A snapshot covers every entry below `end_offset`; `epoch` is the epoch of its last entry."""

    end_offset: int
    epoch: int


class LogStoreError(ValueError):
    """A call the log cannot honour (bad offsets, epochs going back, unknown snapshot)."""


@runtime_checkable
class LogStore(Protocol):
    """The port the Raft core uses. Synchronous: a disk implementation writes to its file on
    `append` (page cache) and fsyncs on `flush`; the core never waits on I/O itself."""

    @property
    def start_offset(self) -> int:
        """First offset held in the log (0, or a snapshot's end offset after truncation)."""
        ...

    @property
    def end_offset(self) -> int:
        """Offset the next appended entry gets (exclusive end, Kafka's log end offset)."""
        ...

    @property
    def last_epoch(self) -> int:
        """Epoch of the last entry; with no entries, the latest snapshot's epoch or NO_EPOCH."""
        ...

    @property
    def flushed_end_offset(self) -> int:
        """Entries below this offset survive a crash."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """Kafka's epoch-cache answer for `epoch`: `(end_offset, epoch)` when `epoch` is the
        last epoch; otherwise the start offset of the first epoch above it, paired with the
        largest epoch <= `epoch` (or `epoch` itself when the log holds no smaller one); and
        `(end_offset, last_epoch)` when `epoch` is above every epoch in the log."""
        ...

    def append(self, entries: Sequence[Entry]) -> None:
        """Append entries; the first must have offset `end_offset`, offsets contiguous,
        epochs non-decreasing and not below `last_epoch`. Not durable until `flush()`."""
        ...

    def flush(self) -> None:
        """Make every appended entry durable (`flushed_end_offset = end_offset`)."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Remove every entry at or above `offset` (start_offset <= offset <= end_offset)."""
        ...

    def read(
        self, offset: int, max_entries: int | None = None, max_bytes: int | None = None
    ) -> list[Entry]:
        """Entries from `offset` (start_offset <= offset <= end_offset) in offset order, at
        most `max_entries` and about `max_bytes` of data (always at least one entry if any)."""
        ...

    def latest_snapshot_id(self) -> SnapshotId | None:
        """The newest snapshot, or None."""
        ...

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Store a snapshot (durable at once) of the state below `snapshot_id.end_offset`."""
        ...

    def store_fetched_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Store (durable at once) a snapshot fetched from the leader; unlike
        `create_snapshot` it may end beyond this log (KRaft's createNewSnapshotUnchecked):
        `truncate_to_snapshot` follows."""
        ...

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes:
        """The data of a stored snapshot; LogStoreError if unknown."""
        ...

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> None:
        """Drop the entries below a stored snapshot's end offset (the log start moves up;
        KRaft's deleteBeforeSnapshot). Entries above it stay."""
        ...

    def truncate_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        """Drop every entry and restart the log at a stored snapshot's end offset (a follower
        that fetched a snapshot beyond its log; KRaft's truncateToLatestSnapshot)."""
        ...


def check_appendable(entries: Sequence[Entry], end_offset: int, last_epoch: int) -> None:
    """Raise LogStoreError unless `entries` continue a log ending at `end_offset` whose last
    epoch is `last_epoch`: contiguous offsets, epochs >= 1 that never go back (every store
    checks the same before it writes anything)."""
    expected = end_offset
    for entry in entries:
        if not isinstance(entry, Entry):
            raise LogStoreError(f"append takes Entry tuples, got {type(entry).__name__}")
        if entry.offset != expected:
            raise LogStoreError(
                f"append out of order: entry offset {entry.offset}, log end offset {expected}"
            )
        if entry.epoch < last_epoch or entry.epoch <= NO_EPOCH:
            raise LogStoreError(
                f"append with epoch {entry.epoch} at offset {entry.offset}: "
                f"the log's last epoch is {last_epoch} (epochs start at 1, never go back)"
            )
        expected += 1
        last_epoch = entry.epoch


class MemoryLogStore:
    """An in-memory `LogStore`. Appends, truncations and snapshots are instant; only
    appends wait for `flush()` to survive `crash()`."""

    def __init__(self) -> None:
        self._start = 0
        self._entries: list[Entry] = []
        # (epoch, start offset) for each epoch in the log, ascending: Kafka's epoch cache.
        self._epochs: list[tuple[int, int]] = []
        self._flushed = 0
        self._snapshots: dict[SnapshotId, bytes] = {}

    # --- offsets -------------------------------------------------------------------------
    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def last_epoch(self) -> int:
        if self._epochs:
            return self._epochs[-1][0]
        snap = self.latest_snapshot_id()
        return snap.epoch if snap is not None and snap.end_offset == self._start else NO_EPOCH

    @property
    def flushed_end_offset(self) -> int:
        return self._flushed

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        end = self.end_offset
        if epoch == self.last_epoch:
            return OffsetAndEpoch(end, epoch)
        epochs = [e for e, _ in self._epochs]
        higher = bisect.bisect_right(epochs, epoch)
        if higher == len(epochs):
            # Above every epoch we hold: all we can say is where our log ends.
            return OffsetAndEpoch(end, self.last_epoch)
        next_start = self._epochs[higher][1]
        if higher == 0:
            # Below our first epoch: the log start, named by the snapshot there if any
            # (KRaft answers the snapshot id so a follower truncates to it).
            snap = self.latest_snapshot_id()
            if snap is not None and snap.end_offset == self._start:
                return OffsetAndEpoch(snap.end_offset, snap.epoch)
            return OffsetAndEpoch(next_start, epoch)
        return OffsetAndEpoch(next_start, self._epochs[higher - 1][0])

    # --- writes --------------------------------------------------------------------------
    def append(self, entries: Sequence[Entry]) -> None:
        check_appendable(entries, self.end_offset, self.last_epoch)
        for entry in entries:
            if not self._epochs or self._epochs[-1][0] != entry.epoch:
                self._epochs.append((entry.epoch, entry.offset))
            self._entries.append(entry)

    def flush(self) -> None:
        self._flushed = self.end_offset

    def truncate_to(self, offset: int) -> None:
        if not self._start <= offset <= self.end_offset:
            raise LogStoreError(
                f"truncate_to({offset}) outside the log [{self._start}, {self.end_offset}]"
            )
        del self._entries[offset - self._start :]
        while self._epochs and self._epochs[-1][1] >= offset:
            self._epochs.pop()
        self._flushed = min(self._flushed, offset)

    def crash(self) -> None:
        """Simulate a process kill: every entry appended since the last flush is lost."""
        self.truncate_to(max(self._flushed, self._start))

    # --- reads ---------------------------------------------------------------------------
    def read(
        self, offset: int, max_entries: int | None = None, max_bytes: int | None = None
    ) -> list[Entry]:
        if not self._start <= offset <= self.end_offset:
            raise LogStoreError(
                f"read at offset {offset} outside the log [{self._start}, {self.end_offset}]"
            )
        for name, limit in (("max_entries", max_entries), ("max_bytes", max_bytes)):
            if limit is not None and limit < 1:
                raise LogStoreError(f"read {name} must be >= 1, got {limit}")
        stop = len(self._entries)
        if max_entries is not None:
            stop = min(stop, offset - self._start + max_entries)
        out: list[Entry] = []
        size = 0
        for entry in self._entries[offset - self._start : stop]:
            size += len(entry.data)
            if out and max_bytes is not None and size > max_bytes:
                break
            out.append(entry)
        return out

    # --- snapshots -----------------------------------------------------------------------
    def latest_snapshot_id(self) -> SnapshotId | None:
        return max(self._snapshots) if self._snapshots else None

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        if snapshot_id.end_offset > self.end_offset:
            raise LogStoreError(
                f"snapshot {snapshot_id} ends beyond the log end offset {self.end_offset}"
            )
        self._snapshots[snapshot_id] = bytes(data)

    def store_fetched_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        if snapshot_id.end_offset < 0 or snapshot_id.epoch < 0:
            raise LogStoreError(f"snapshot id {snapshot_id} has a negative offset or epoch")
        self._snapshots[snapshot_id] = bytes(data)

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes:
        try:
            return self._snapshots[snapshot_id]
        except KeyError:
            raise LogStoreError(f"no snapshot {snapshot_id}") from None

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> None:
        if snapshot_id not in self._snapshots:
            raise LogStoreError(f"no snapshot {snapshot_id}")
        new_start = snapshot_id.end_offset
        if new_start <= self._start:
            return
        if new_start > self.end_offset:
            raise LogStoreError(
                f"snapshot {snapshot_id} ends beyond the log end offset {self.end_offset}"
            )
        del self._entries[: new_start - self._start]
        self._start = new_start
        self._epochs = []
        for entry in self._entries:
            if not self._epochs or self._epochs[-1][0] != entry.epoch:
                self._epochs.append((entry.epoch, entry.offset))
        self._flushed = max(self._flushed, new_start)

    def truncate_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        if snapshot_id not in self._snapshots:
            raise LogStoreError(f"no snapshot {snapshot_id}")
        self._entries.clear()
        self._epochs.clear()
        self._start = snapshot_id.end_offset
        self._flushed = self._start
