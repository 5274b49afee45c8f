"""DiskLogStore: the Raft `LogStore` port on storage/ segments (KRaft's KafkaMetadataLog).

The log is a storage `Log` in `<metadata.log.dir>/__cluster_metadata-0/`, where
raft.local_log keeps the standalone broker's metadata log too: each entry is one record (its
value the entry's bytes) and consecutive entries of one epoch share a record batch whose
partition leader epoch is that epoch, so storage's leader-epoch cache is the Raft epoch cache.

Durability: `append` writes to the segment files (the page cache: it survives a process kill,
not a power loss); `flush` fsyncs them and moves `flushed_end_offset`. At open, recovery
re-checks every batch's CRC and cuts the log at the first torn or corrupt one, so a crash
leaves a prefix of what was appended, whole entries only; what is on disk after recovery
counts as flushed.

Snapshots are files next to the segments named as Kafka's (`<20-digit end offset>-<10-digit
epoch>.checkpoint`), written atomically and fsynced. The log start offset (moved by
`delete_before_snapshot` and `truncate_to_snapshot`) is kept in `log-start-offset` in the same
directory; the Raft log has no retention of its own. storage.Log itself only ever starts at a
segment's base offset (its recovery checks every batch's epoch against the epoch checkpoint,
which a start inside a batch would trip): entries between that base and the Raft log start are
hidden here, and whole segments below the start are deleted.

Reads without decoding (KRaft serves the tail of its log from the page cache): the entries
appended last stay in memory, bounded by `tail_cache_bytes` (`TAIL_CACHE_BYTES`), so the
leader answers its followers' and observers' Fetches of the tail, and hands out committed
entries, from those objects; no disk read, no record decoding. Below that tail a read decodes
whole batches from disk and keeps the last decoded batch, so a fetcher catching up through a
big batch in pieces decodes it once, not once per piece (a 25,000-record fencing batch read
1,000 entries at a time cost the leader ~1.4 s of decoding per fetcher before).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Sequence

from protocol.clock import SYSTEM_CLOCK
from protocol.names import METADATA_PARTITION
from protocol.record_batch import Record, build_batch, decode_records, read_header
from raft.log_store import (
    NO_EPOCH,
    Entry,
    LogStoreError,
    OffsetAndEpoch,
    SnapshotId,
    check_appendable,
)
from storage.config import LogConfig
from storage.files import atomic_write
from storage.log import Log

METADATA_PARTITION_DIR = METADATA_PARTITION.dir_name
LOG_START_FILE = "log-start-offset"
SNAPSHOT_SUFFIX = ".checkpoint"
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
MAX_BATCH_BYTES = 8 * 1024 * 1024
"""Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: a batch is cut before it grows past this."""
TAIL_CACHE_BYTES = 32 * 1024 * 1024
"""Default bound of the in-memory tail: entry data plus ENTRY_OVERHEAD_BYTES per entry."""
ENTRY_OVERHEAD_BYTES = 120
"""Rough memory of one cached Entry besides its data (tuple, ints, bytes header)."""


def raft_log_config() -> LogConfig:
    """No retention (snapshots move the log start instead); batches up to 8 MiB."""
    return LogConfig(retention_ms=-1, retention_bytes=-1, max_message_bytes=MAX_BATCH_BYTES)


def snapshot_file_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"


class DiskLogStore:
    """A `raft.log_store.LogStore` on disk. Not thread-safe; synchronous, like storage."""

    def __init__(
        self,
        metadata_log_dir: str | os.PathLike[str],
        *,
        config: LogConfig | None = None,
        clock_ms: Callable[[], int] | None = None,
        tail_cache_bytes: int = TAIL_CACHE_BYTES,
    ) -> None:
        if tail_cache_bytes < 0:
            raise LogStoreError(f"tail_cache_bytes must be >= 0, got {tail_cache_bytes}")
        self.directory = os.path.join(os.fspath(metadata_log_dir), METADATA_PARTITION_DIR)
        self._config = config or raft_log_config()
        self._clock = clock_ms or SYSTEM_CLOCK.wall_ms
        os.makedirs(self.directory, exist_ok=True)
        self._snapshots: set[SnapshotId] = set()
        for name in os.listdir(self.directory):
            m = _SNAPSHOT_NAME.match(name)
            if m:
                self._snapshots.add(SnapshotId(int(m.group(1)), int(m.group(2))))
        self._start = self._read_log_start() or 0
        self._log = self._open(None)
        # The in-memory tail: `_tail` holds the entries [_tail_start, end_offset) (empty:
        # _tail_start == end_offset); `_tail_bytes` is its accounted size.
        self._tail_max = tail_cache_bytes
        self._tail: list[Entry] = []
        self._tail_start = self._log.log_end_offset
        self._tail_bytes = 0
        # The last batch decoded from disk: (base offset, next offset, its entries).
        self._memo: tuple[int, int, list[Entry]] | None = None
        # Kafka's truncateToLatestSnapshot at start-up: a follower that crashed after fetching
        # a snapshot beyond its log, before restarting the log there.
        latest = self.latest_snapshot_id()
        if latest is not None and latest.end_offset > self._log.log_end_offset:
            self.truncate_to_snapshot(latest)

    def _open(self, log_start: int | None, *, clean: bool = False) -> Log:
        log = Log.open(
            self.directory,
            self._config,
            clock_ms=self._clock,
            log_start_offset=log_start,
            clean_shutdown=clean,
            # Metadata batches carry no producer ids; and this directory's own snapshots
            # (.checkpoint files) are the Raft store's, never the producer state's.
            producer_state=False,
        )
        if not clean:
            # Recovery checked the log without fsyncing it (storage keeps the recovery point
            # where it was): what it kept is made durable here, one log, so that it counts
            # as flushed.
            log.flush()
        return log

    def _read_log_start(self) -> int | None:
        path = os.path.join(self.directory, LOG_START_FILE)
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except FileNotFoundError:
            return None
        if not text.isdigit():
            raise LogStoreError(f"{path}: expected a log start offset, got {text[:40]!r}")
        return int(text)

    def _write_log_start(self, offset: int) -> None:
        atomic_write(os.path.join(self.directory, LOG_START_FILE), f"{offset}\n".encode())

    # --- offsets -------------------------------------------------------------------------
    @property
    def start_offset(self) -> int:
        return min(max(self._start, self._log.log_start_offset), self._log.log_end_offset)

    def _epochs(self) -> list[tuple[int, int]]:
        """storage's epoch cache clipped to the Raft log start (as Kafka's truncateFromStart)."""
        start = self.start_offset
        entries = self._log.epoch_entries()
        below = [i for i, (_, s) in enumerate(entries) if s <= start]
        if below:
            i = below[-1]
            entries = [(entries[i][0], start), *entries[i + 1 :]]
        if entries and entries[0][1] >= self.end_offset:
            return []
        return entries

    @property
    def end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def last_epoch(self) -> int:
        epochs = self._epochs()
        if epochs:
            return epochs[-1][0]
        snap = self.latest_snapshot_id()
        if snap is not None and snap.end_offset == self.start_offset:
            return snap.epoch
        return NO_EPOCH

    @property
    def flushed_end_offset(self) -> int:
        # Below the start everything is in a durable snapshot.
        return max(self._log.recovery_point, self.start_offset)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        # The port's semantics (raft.log_store), computed from storage's epoch cache.
        end = self.end_offset
        last = self.last_epoch
        if epoch == last:
            return OffsetAndEpoch(end, epoch)
        epochs = self._epochs()
        higher = next((i for i, (e, _) in enumerate(epochs) if e > epoch), len(epochs))
        if higher == len(epochs):
            return OffsetAndEpoch(end, last)
        next_start = epochs[higher][1]
        if higher == 0:
            snap = self.latest_snapshot_id()
            if snap is not None and snap.end_offset == self.start_offset:
                return OffsetAndEpoch(snap.end_offset, snap.epoch)
            return OffsetAndEpoch(next_start, epoch)
        return OffsetAndEpoch(next_start, epochs[higher - 1][0])

    # --- writes --------------------------------------------------------------------------
    def append(self, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        check_appendable(entries, self.end_offset, self.last_epoch)
        now = self._clock()
        batches: list[bytes] = []
        group: list[Entry] = []
        size = 0
        for entry in entries:
            # One epoch per batch (the batch header carries it); cut big groups well under
            # max.message.bytes (the record encoding adds a little to each value).
            if group and (
                entry.epoch != group[0].epoch or size + len(entry.data) > MAX_BATCH_BYTES // 2
            ):
                batches.append(self._batch(group, now))
                group, size = [], 0
            group.append(entry)
            size += len(entry.data)
        batches.append(self._batch(group, now))
        # One storage append: it validates everything before writing anything.
        self._log.append_as_follower(b"".join(batches))
        self._cache_appended(entries)

    # --- the in-memory tail ----------------------------------------------------------------
    def _cache_appended(self, entries: Sequence[Entry]) -> None:
        if self._tail_start + len(self._tail) != entries[0].offset:
            self._reset_tail()  # not contiguous with the tail (cannot happen after a check)
        for e in entries:
            data = e.data if type(e.data) is bytes else bytes(e.data)
            self._tail.append(e if data is e.data else Entry(e.offset, e.epoch, data))
            self._tail_bytes += len(data) + ENTRY_OVERHEAD_BYTES
        self._trim_tail()

    def _trim_tail(self) -> None:
        """Drop the oldest cached entries until the tail fits its bound."""
        if self._tail_bytes <= self._tail_max:
            return
        drop, freed = 0, 0
        excess = self._tail_bytes - self._tail_max
        while drop < len(self._tail) and freed < excess:
            freed += len(self._tail[drop].data) + ENTRY_OVERHEAD_BYTES
            drop += 1
        del self._tail[:drop]
        self._tail_start += drop
        self._tail_bytes -= freed

    def _reset_tail(self) -> None:
        self._tail = []
        self._tail_start = self._log.log_end_offset
        self._tail_bytes = 0

    def _cut_tail(self, offset: int) -> None:
        """Forget cached entries at or above `offset` (a truncation), and the disk memo."""
        self._memo = None
        if offset <= self._tail_start:
            self._tail, self._tail_start, self._tail_bytes = [], offset, 0
            return
        gone = self._tail[offset - self._tail_start :]
        del self._tail[offset - self._tail_start :]
        self._tail_bytes -= sum(len(e.data) + ENTRY_OVERHEAD_BYTES for e in gone)

    @property
    def cached_start_offset(self) -> int:
        """Reads from here to the end are served from memory (for tests and benchmarks)."""
        return self._tail_start

    @staticmethod
    def _batch(group: list[Entry], now: int) -> bytes:
        return build_batch(
            [Record(value=bytes(e.data), timestamp=now) for e in group],
            base_offset=group[0].offset,
            partition_leader_epoch=group[0].epoch,
        )

    def flush(self) -> None:
        self._log.flush()

    def truncate_to(self, offset: int) -> None:
        start, end = self.start_offset, self.end_offset
        if not start <= offset <= end:
            raise LogStoreError(f"truncate_to({offset}) outside the log [{start}, {end}]")
        if offset == end:
            return
        # storage cuts at the start of the batch holding `offset`: write back the entries of
        # that batch below `offset` (those below the Raft log start too: they stay hidden).
        keep = self._entries_of_batch_before(offset)
        self._log.truncate_to(offset)
        if keep:
            self._log.append_as_follower(self._batch(keep, self._clock()))
        self._cut_tail(offset)

    def _entries_of_batch_before(self, offset: int) -> list[Entry]:
        data = self._log.read(offset, 1).data
        if not data:
            return []
        header = read_header(data, 0)
        if header.base_offset >= offset:
            return []
        return [
            Entry(r.offset, header.partition_leader_epoch, r.value or b"")
            for r in decode_records(data, 0)
            if r.offset < offset
        ]

    # --- reads ---------------------------------------------------------------------------
    def read(
        self, offset: int, max_entries: int | None = None, max_bytes: int | None = None
    ) -> list[Entry]:
        start, end = self.start_offset, self.end_offset
        if not start <= offset <= end:
            raise LogStoreError(f"read at offset {offset} outside the log [{start}, {end}]")
        for name, limit in (("max_entries", max_entries), ("max_bytes", max_bytes)):
            if limit is not None and limit < 1:
                raise LogStoreError(f"read {name} must be >= 1, got {limit}")
        out: list[Entry] = []
        budget = _Budget(max_entries, max_bytes)
        position = offset
        # Below the cached tail: whole batches from disk (decoded once, see _decoded_batch).
        while position < min(self._tail_start, end) and not budget.full:
            batch = self._decoded_batch(position)
            if not batch:
                break
            for entry in batch:
                if entry.offset < position:
                    continue
                if entry.offset >= self._tail_start or not budget.take(entry, bool(out)):
                    break
                out.append(entry)
                if budget.full:
                    break
            after = min(batch[-1].offset + 1, self._tail_start)
            if after <= position:
                break  # a batch not holding `position`: never loop on it
            position = after
        # The cached tail: a slice, no disk read, no decoding.
        if position >= self._tail_start and not budget.full:
            i = position - self._tail_start
            stop = len(self._tail)
            if max_entries is not None:
                stop = min(stop, i + max_entries - len(out))
            if max_bytes is None:
                out.extend(self._tail[i:stop])
            else:
                for entry in self._tail[i:stop]:
                    if not budget.take(entry, bool(out)):
                        break
                    out.append(entry)
        return out

    def _decoded_batch(self, position: int) -> list[Entry] | None:
        """The entries of the on-disk batch holding `position` (None past the end); the last
        one decoded is kept, so reading a big batch in pieces decodes it once."""
        memo = self._memo
        if memo is not None and memo[0] <= position < memo[1]:
            return memo[2]
        chunk = self._log.read(position, 1).data  # one whole batch at least
        if not chunk:
            return None
        header = read_header(chunk, 0)
        epoch = header.partition_leader_epoch
        entries = [Entry(r.offset, epoch, r.value or b"") for r in decode_records(chunk, 0)]
        self._memo = (header.base_offset, header.next_offset, entries)
        return entries

    # --- snapshots -----------------------------------------------------------------------
    def latest_snapshot_id(self) -> SnapshotId | None:
        return max(self._snapshots) if self._snapshots else None

    def create_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        if snapshot_id.end_offset > self.end_offset:
            raise LogStoreError(
                f"snapshot {snapshot_id} ends beyond the log end offset {self.end_offset}"
            )
        self._write_snapshot(snapshot_id, data)

    def _write_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        if snapshot_id.end_offset < 0 or snapshot_id.epoch < 0:
            raise LogStoreError(f"snapshot id {snapshot_id} has a negative offset or epoch")
        atomic_write(os.path.join(self.directory, snapshot_file_name(snapshot_id)), bytes(data))
        self._snapshots.add(snapshot_id)

    def store_fetched_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Keep a snapshot fetched from the leader (it may end beyond this log); follow with
        `truncate_to_snapshot` when it does."""
        self._write_snapshot(snapshot_id, data)

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes:
        if snapshot_id not in self._snapshots:
            raise LogStoreError(f"no snapshot {snapshot_id}")
        with open(os.path.join(self.directory, snapshot_file_name(snapshot_id)), "rb") as f:
            return f.read()

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> None:
        if snapshot_id not in self._snapshots:
            raise LogStoreError(f"no snapshot {snapshot_id}")
        new_start = snapshot_id.end_offset
        if new_start <= self.start_offset:
            return
        if new_start > self.end_offset:
            raise LogStoreError(
                f"snapshot {snapshot_id} ends beyond the log end offset {self.end_offset}"
            )
        self._write_log_start(new_start)
        self._start = new_start
        self._memo = None
        if new_start > self._tail_start:
            drop = min(new_start - self._tail_start, len(self._tail))
            self._tail_bytes -= sum(len(e.data) + ENTRY_OVERHEAD_BYTES for e in self._tail[:drop])
            del self._tail[:drop]
            self._tail_start += drop
        # storage.Log moves its start only when opened, and only to a segment base here:
        # reopen at the last segment base <= the new start, then drop the segments below it.
        base = max(b for b in (seg.base_offset for seg in self._log.segments) if b <= new_start)
        if base > self._log.log_start_offset:
            self._log.flush()
            self._log.close()
            self._log = self._open(base, clean=True)
            self._log.delete_old_segments(self._clock())
        # Snapshots older than the new start are no longer needed (Kafka keeps only newer).
        for old in [s for s in self._snapshots if s.end_offset < new_start]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.directory, snapshot_file_name(old)))
            self._snapshots.discard(old)

    def truncate_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        if snapshot_id not in self._snapshots:
            raise LogStoreError(f"no snapshot {snapshot_id}")
        self._write_log_start(snapshot_id.end_offset)
        self._start = snapshot_id.end_offset
        self._log.truncate_fully_and_start_at(snapshot_id.end_offset)
        self._log.flush()
        self._memo = None
        self._reset_tail()

    def close(self) -> None:
        """Flush and release the files."""
        self._log.close()


class _Budget:
    """A read's limits: at most `max_entries`, about `max_bytes` of data (at least one)."""

    def __init__(self, max_entries: int | None, max_bytes: int | None) -> None:
        self._entries_left = max_entries
        self._bytes_left = max_bytes
        self.full = False

    def take(self, entry: Entry, have_some: bool) -> bool:
        """Count `entry` if it fits (the first entry always does)."""
        if self._bytes_left is not None:
            if have_some and len(entry.data) > self._bytes_left:
                self.full = True
                return False
            self._bytes_left -= len(entry.data)
        if self._entries_left is not None:
            self._entries_left -= 1
            if self._entries_left <= 0:
                self.full = True
        return True
