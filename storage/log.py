"""Log: one partition's segmented log (Kafka's UnifiedLog + LocalLog, without tiering).

Log owns the segment list and its offsets (log start, log end, recovery point) and every change
to them: open, append and roll, truncation, retention deletes, the cleaner's swap, flushes.
What it delegates lives beside it: storage.log_loader (the directory at open, the recovery scan
after an unclean stop), storage.log_append (the checks of an append's batches, AppendInfo),
storage.log_read (reads by offset and timestamp), storage.retention (which segments retention
deletes), storage.swap (the cleaner's swap protocol and its crash recovery).

Not thread-safe: one owner calls it at a time (the broker's event loop, or the Raft driver).
"""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Callable, Iterator

import structlog

from protocol.clock import SYSTEM_CLOCK
from protocol.errors import ErrorCode, KafkaError
from protocol.names import TopicPartition
from protocol.record_batch import BatchHeader
from storage.checkpoints import PARTITION_METADATA, write_partition_metadata
from storage.config import LogConfig
from storage.epoch_cache import LeaderEpochFileCache, OffsetAndEpoch
from storage.errors import KafkaStorageError, LogClosedError
from storage.files import FileHandleCache, fsync_dir
from storage.log_append import (
    AppendInfo,
    check_follower_batches,
    duplicate_answer,
    stamp_leader_batches,
)
from storage.log_loader import open_segments, prepare_dir, recover_segments
from storage.log_read import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ReadResult,
    TimestampOffset,
    headers_from,
    offset_at_timestamp,
    read_segments,
)
from storage.producer_snapshots import ProducerStateStore
from storage.retention import segments_past_retention
from storage.segment import BatchInfo, LogSegment
from storage.swap import Failpoints, swap_files

logger = structlog.get_logger("storage.log")

OFFSET_GAPS_MARKER = "offset-gaps"
"""An empty file in a partition dir: its log has offset gaps (it was compacted here or by its
leader), so recovery must accept batches that start past the expected offset."""

FLUSH_MS_NEVER = 1 << 62
"""A flush.ms at least this large (Kafka's default is Long.MAX_VALUE) never comes due."""


class Log:
    """Open with Log.open(); the constructor is internal."""

    def __init__(
        self,
        directory: str,
        topic_partition: TopicPartition,
        config: LogConfig,
        handles: FileHandleCache,
        clock_ms: Callable[[], int],
        epoch_cache: LeaderEpochFileCache,
        topic_id: str | None,
        producer_state: bool = True,
    ) -> None:
        self.directory = directory
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self._config = config
        self._handles = handles
        self._clock = clock_ms
        self._epoch_cache = epoch_cache
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._log_start = 0
        self._leo = 0
        self._recovery_point = 0
        self._unflushed_messages = 0
        self._last_flush_ms = clock_ms()
        self._metadata_dirty = False  # files created/renamed in the dir since its last fsync
        self._rolled_unflushed = False
        self._parent_dirty = False  # the log dir itself is new
        self._created_here = False  # created empty by this open (not found on disk)
        self._closed = False
        self._gaps_marked = False  # OFFSET_GAPS_MARKER known to be on disk
        self.layout_version = 0
        """Bumped whenever segments are truncated, deleted or replaced: the log cleaner swaps
        its output in only if this did not move while it worked."""
        self.on_storage_error: Callable[[KafkaStorageError], None] | None = None
        """Told of every disk error of this log (the LogManager takes the log dir offline, as
        Kafka's LogDirFailureChannel)."""
        self._offline: str | None = None
        """Why the log's dir is offline: every operation then fails with KAFKA_STORAGE_ERROR."""
        self.on_dirty: Callable[[Log], None] | None = None
        """Called after an append, a roll or a config change (LogManager keeps the logs that
        may need a flush, so its flusher does not visit every log)."""
        self.recovered_bytes_truncated = 0
        """Bytes cut by recovery at open (tests and logs)."""
        self.producers = ProducerStateStore(directory, str(topic_partition), enabled=producer_state)
        """Idempotent producers' state and its .snapshot files (storage.producer_snapshots)."""

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        config: LogConfig | None = None,
        *,
        handles: FileHandleCache | None = None,
        clock_ms: Callable[[], int] | None = None,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        clean_shutdown: bool = False,
        topic_id: str | None = None,
        producer_state: bool = True,
    ) -> Log:
        """Open (creating if needed) the log in `directory`, named `<topic>-<partition>`.

        After an unclean stop (clean_shutdown=False) the segments from the one holding
        `recovery_point` on are re-scanned: every CRC checked, offsets contiguous, epochs
        matching the leader-epoch-checkpoint; the log is cut at the first bad or torn batch.
        `producer_state=False` (the Raft metadata log) keeps no producer state and never
        touches `.snapshot` files.
        """
        directory = os.fspath(directory)
        tp = TopicPartition.from_dir_name(os.path.basename(os.path.normpath(directory)))
        config = config or LogConfig()
        handles = FileHandleCache(64) if handles is None else handles
        clock = clock_ms or SYSTEM_CLOCK.wall_ms
        created, stored_id = prepare_dir(directory, tp, topic_id)
        log = cls(
            directory,
            tp,
            config,
            handles,
            clock,
            LeaderEpochFileCache(directory),
            topic_id or stored_id,
            producer_state,
        )
        try:
            if topic_id is not None and stored_id is None:
                write_partition_metadata(
                    os.path.join(directory, PARTITION_METADATA), topic_id, fsync=False
                )
                log._metadata_dirty = True
            log._load(created, recovery_point, log_start_offset, clean_shutdown)
        except OSError as exc:
            handles.close_under(directory)
            raise KafkaStorageError.from_os_error(f"loading the log of {tp}", exc) from exc
        return log

    def _load(
        self,
        created: bool,
        recovery_point: int,
        log_start_offset: int | None,
        clean_shutdown: bool,
    ) -> None:
        now = self._clock()
        self._segments = open_segments(self.directory, self._handles, self._config, now)
        if not self._segments:
            start = log_start_offset if log_start_offset is not None else 0
            self._segments.append(
                LogSegment.create(self.directory, start, self._handles, self._config, now)
            )
            self._metadata_dirty = True
        self._bases = [s.base_offset for s in self._segments]
        if clean_shutdown or created:
            self._leo = self._segments[-1].read_next_offset()
        else:
            before = self._bases
            self._recover(recovery_point)
            if self._bases != before:
                # Recovery deleted damaged segments (or started an empty one): the next
                # flush fsyncs the directory, or those entries could come back after a
                # power loss under a later clean-shutdown marker.
                self._metadata_dirty = True
        self._log_start = min(max(log_start_offset or 0, self._bases[0]), self._leo)
        self._epoch_cache.truncate_from_end(self._leo)
        self._epoch_cache.truncate_from_start(self._log_start)
        # Kafka's LogLoader: the recovery point moves only when the log is flushed; after an
        # unclean stop it stays where it was (recovery checked, but did not fsync, the rest).
        unclean = not (clean_shutdown or created)
        self._recovery_point = min(recovery_point, self._leo) if unclean else self._leo
        # Recovered segments before the active one get the fsync of rolled segments from the
        # log manager's flusher, which then moves the recovery point up to the active one.
        self._rolled_unflushed = self._recovery_point < self._bases[-1]
        if created:
            self._metadata_dirty = self._parent_dirty = self._created_here = True
        # After an unclean stop only what was flushed before it (the old recovery point) is
        # known to match the snapshots written then.
        limit = self._leo if clean_shutdown else recovery_point
        self.producers.load(limit, self._log_start, self._leo, self._headers_from, clean_shutdown)

    def _recover(self, recovery_point: int) -> None:
        """Re-scan the segments from the one holding `recovery_point`; cut at the damage."""
        found = recover_segments(
            self.directory,
            self._segments,
            recovery_point,
            self._epoch_cache,
            self.may_have_offset_gaps,
            str(self.topic_partition),
            self._new_segment,
        )
        self.recovered_bytes_truncated += found.truncated_bytes
        self._bases = [s.base_offset for s in self._segments]
        self._leo = found.log_end_offset

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.create(
            self.directory, base_offset, self._handles, self._config, self._clock()
        )

    # -- state -------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def recovery_point(self) -> int:
        """Every offset below this is on disk (fsynced) and needs no recovery scan."""
        return self._recovery_point

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def size(self) -> int:
        """Bytes in all segments. Read from the metrics server's thread as well (the Log Size
        gauge): the list is copied in one step, so a retention deleting segments meanwhile
        cannot make the walk skip one."""
        return sum(s.size for s in tuple(self._segments))

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def may_have_offset_gaps(self) -> bool:
        """A compacted log has gaps between batches (what the cleaner removed): recovery then
        accepts a batch or segment that starts past the expected offset. Other logs keep the
        strict check, which catches a damaged base offset (outside the CRC). The gaps marker
        says so too: a broker recovers its logs before it knows their topics' configs (they
        open with the default policy), and a log keeps its gaps after a switch to delete."""
        return "compact" in self._config.cleanup_policy or os.path.exists(
            os.path.join(self.directory, OFFSET_GAPS_MARKER)
        )

    def mark_offset_gaps(self) -> None:
        """Persist that this log has (or is about to have) offset gaps, before the first one
        reaches the disk: the cleaner's swap, or a follower appending a compacted leader's
        batches."""
        if self._gaps_marked:
            return
        path = os.path.join(self.directory, OFFSET_GAPS_MARKER)
        try:
            if not os.path.exists(path):
                with open(path, "wb") as f:
                    os.fsync(f.fileno())
                fsync_dir(self.directory)
        except OSError as exc:
            raise self._storage_error("marking the log as having offset gaps", exc) from exc
        self._gaps_marked = True

    def update_config(self, config: LogConfig) -> None:
        """New topic configs apply from the next append (index sizes: from the next segment)."""
        self._config = config
        for seg in self._segments:
            seg.config = config
        if self.on_dirty is not None:
            self.on_dirty(self)  # flush.ms may have changed

    def latest_epoch(self) -> int | None:
        return self._epoch_cache.latest_epoch()

    def epoch_entries(self) -> list[tuple[int, int]]:
        """The leader epoch cache as (epoch, start offset) pairs."""
        return [(e.epoch, e.start_offset) for e in self._epoch_cache.entries()]

    def end_offset_for_epoch(self, leader_epoch: int) -> OffsetAndEpoch | None:
        """Kafka's UnifiedLog.endOffsetForEpoch: (end offset, epoch) of the largest epoch <=
        `leader_epoch`, or None when the cache cannot say."""
        found = self._epoch_cache.end_offset_for(leader_epoch, self._leo)
        return None if found.offset < 0 else found

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"the log of {self.topic_partition} is closed")
        if self._offline is not None:
            raise KafkaStorageError(
                f"the log of {self.topic_partition} is in an offline log dir ({self._offline})",
                path=self.directory,
            )

    def take_offline(self, reason: str) -> None:
        """Its log dir failed: nothing is read or written any more (close releases the files
        without flushing)."""
        self._offline = reason

    @property
    def offline(self) -> bool:
        return self._offline is not None

    def _storage_error(self, what: str, exc: OSError) -> KafkaStorageError:
        err = KafkaStorageError.from_os_error(f"{what} (partition {self.topic_partition})", exc)
        logger.error("storage_error", partition=str(self.topic_partition), error=err.message)
        if self.on_storage_error is not None:
            self.on_storage_error(err)
        return err

    # -- appending ---------------------------------------------------------------------------

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int
    ) -> AppendInfo:
        """Validate every batch (magic, CRC, max.message.bytes, record count), stamp offsets
        and `leader_epoch`, and write them in one go. On any error nothing is written.

        Batches with a producer id are checked as Kafka's leader does (storage.producer_state):
        KafkaError INVALID_PRODUCER_EPOCH / OUT_OF_ORDER_SEQUENCE_NUMBER. Batches that retry
        ones already in the log are not written again (the new ones of the same append are)
        and the answer has `duplicate=True` with the originals' first offset, or -1 when the
        batches do not sit one after the other in the log (storage.log_append)."""
        self._check_open()
        buf = bytearray(records)
        first = self._leo
        found = stamp_leader_batches(
            buf, first, leader_epoch, self._config, self.topic_partition, self.producers
        )
        if found.duplicates:
            new = self._append_new_only(buf, found.batches, first, found.num_records, leader_epoch)
            if new is not None:
                self.producers.apply_headers(found.producer_headers)
                self.producers.state.map_end_offset = self._leo
            return duplicate_answer(found.duplicates, found.in_order, first, new, self._log_start)
        info = self._append(buf, found.batches, first, found.num_records, [(leader_epoch, first)])
        if found.producer_headers:
            self.producers.apply_headers(found.producer_headers)
        self.producers.state.map_end_offset = self._leo
        return info

    def _append_new_only(
        self,
        buf: bytearray,
        batches: list[BatchInfo],
        first: int,
        num_records: int,
        leader_epoch: int,
    ) -> AppendInfo | None:
        """Write only the new batches of an append that also retried some already written."""
        if not batches:
            return None
        pieces: list[bytearray] = []
        moved: list[BatchInfo] = []
        pos = 0
        for b in batches:
            pieces.append(buf[b.position : b.position + b.size])
            moved.append(b._replace(position=pos))
            pos += b.size
        return self._append(
            bytearray().join(pieces), moved, first, num_records, [(leader_epoch, first)]
        )

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches that already carry offsets and epochs (replication, Raft). Offsets
        must go up from the log end offset: a forward gap is what the leader's cleaner removed
        (as Kafka, which refuses only offsets below the log end); CRCs are checked."""
        self._check_open()
        buf = records if isinstance(records, bytes | bytearray) else bytes(records)
        first = self._leo
        found = check_follower_batches(buf, first, self.topic_partition)
        if found.gap:
            self.mark_offset_gaps()
        info = self._append(buf, found.batches, first, found.num_records, found.epochs)
        if found.producer_headers:
            self.producers.apply_headers(found.producer_headers)
        self.producers.state.map_end_offset = self._leo
        return info

    def _append(
        self,
        buf: bytes | bytearray,
        batches: list[BatchInfo],
        first_offset: int,
        num_records: int,
        epochs: list[tuple[int, int]],
    ) -> AppendInfo:
        if not batches:
            return AppendInfo(
                first_offset, first_offset - 1, -1, first_offset, 0, 0, 0, self._log_start
            )
        tp = self.topic_partition
        if len(buf) > self._config.segment_bytes:
            raise KafkaError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"append to {tp} refused: {len(buf)} bytes in one append exceed "
                f"segment.bytes={self._config.segment_bytes}",
            )
        max_ts, max_ts_offset = -1, first_offset
        for b in batches:
            if b.max_timestamp > max_ts:
                max_ts, max_ts_offset = b.max_timestamp, b.last_offset
        last_offset = batches[-1].last_offset
        cache = self._epoch_cache
        snapshot = cache.entries()
        rolled_from: LogSegment | None = None
        try:
            for epoch, start in epochs:
                cache.assign(epoch, start)
            seg = self._segments[-1]
            if self._should_roll(seg, len(buf), max_ts, last_offset):
                rolled_from = seg
                seg = self._roll()
            seg.append(buf, batches)
        except OSError as exc:
            if rolled_from is not None and self._segments[-1] is not rolled_from:
                self._unroll(rolled_from)
            with contextlib.suppress(OSError):
                cache.restore(snapshot)
            raise self._storage_error(f"appending {len(buf)} bytes", exc) from exc
        self._leo = last_offset + 1
        if self.on_dirty is not None:
            self.on_dirty(self)
        self._unflushed_messages += num_records
        if self._unflushed_messages >= self._config.flush_messages:
            # The append itself succeeded; a failed flush is logged and retried next time.
            with contextlib.suppress(KafkaStorageError):
                self.flush()
        return AppendInfo(
            first_offset=first_offset,
            last_offset=last_offset,
            max_timestamp=max_ts,
            offset_of_max_timestamp=max_ts_offset,
            num_batches=len(batches),
            num_records=num_records,
            valid_bytes=len(buf),
            log_start_offset=self._log_start,
        )

    def _should_roll(self, seg: LogSegment, size: int, max_ts: int, last_offset: int) -> bool:
        if seg.size == 0:
            return False
        cfg = self._config
        return (
            seg.size + size > cfg.segment_bytes
            or seg.time_waited_for_roll(self._clock(), max_ts) > cfg.segment_ms
            or seg.index_full()
            or not seg.can_hold_offset(last_offset)
        )

    def roll(self) -> LogSegment:
        """Start a new segment at the log end offset (no-op when the active one is empty)."""
        self._check_open()
        if self._segments[-1].size == 0:
            return self._segments[-1]
        try:
            return self._roll()
        except OSError as exc:
            raise self._storage_error("rolling a new segment", exc) from exc

    def _roll(self) -> LogSegment:
        old = self._segments[-1]
        old.finalize_time_index()
        old.persist_indexes()
        # The fsync of the rolled segment is left to flush_rolled_segments (LogManager's
        # flush_dirty), off the append path, as Kafka flushes rolled segments in the background.
        self._rolled_unflushed = True
        if self.on_dirty is not None:
            self.on_dirty(self)
        # As Kafka at each roll: a later open scans at most the segments after this snapshot.
        self.producers.take_snapshot(self._leo, fsync=False, always=True)
        new = self._new_segment(self._leo)
        self._segments.append(new)
        self._bases.append(new.base_offset)
        self._metadata_dirty = True
        return new

    def _unroll(self, previous: LogSegment) -> None:
        new = self._segments.pop()
        self._bases.pop()
        with contextlib.suppress(OSError):
            new.delete()
        assert self._segments[-1] is previous

    # -- reading -----------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> ReadResult:
        """Raw bytes of whole batches from the batch holding `offset`: at most `max_bytes`
        (but one whole batch when min_one_batch and the first is larger), only batches whose
        last offset is below `max_offset` (e.g. the high watermark), from one segment.
        Raises KafkaError OFFSET_OUT_OF_RANGE outside [log_start_offset, log_end_offset]."""
        self._check_open()
        leo = self._leo
        if offset < self._log_start or offset > leo:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {offset} is out of range for {self.topic_partition}: the log holds "
                f"offsets [{self._log_start}, {leo})",
            )
        limit = leo if max_offset is None else min(max_offset, leo)
        if offset >= limit:
            i = bisect.bisect_right(self._bases, offset) - 1
            return ReadResult(b"", offset, self._log_start, leo, self._bases[i], 0)
        try:
            found = read_segments(
                self._segments,
                self._bases,
                offset,
                limit,
                leo,
                max_bytes,
                min_one_batch,
                self.topic_partition,
            )
        except OSError as exc:
            raise self._storage_error(f"reading offset {offset}", exc) from exc
        if found is None:
            return ReadResult(b"", offset, self._log_start, leo, self._bases[-1], 0)
        seg, pos, data = found
        return ReadResult(data, offset, self._log_start, leo, seg.base_offset, pos)

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """Kafka's fetchOffsetByTimestamp: the first offset whose record timestamp is >=
        `timestamp` (and that timestamp), or None when there is none. -2 (earliest) and -1
        (latest) return the log start and end offsets with timestamp -1."""
        self._check_open()
        if timestamp == EARLIEST_TIMESTAMP:
            return TimestampOffset(-1, self._log_start)
        if timestamp == LATEST_TIMESTAMP:
            return TimestampOffset(-1, self._leo)
        if timestamp < 0:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"timestamp {timestamp} is not a valid target"
            )
        try:
            return offset_at_timestamp(self._segments, self._bases, self._log_start, timestamp)
        except OSError as exc:
            raise self._storage_error(f"looking up timestamp {timestamp}", exc) from exc

    def _headers_from(self, offset: int) -> Iterator[BatchHeader]:
        """Headers of the batches starting at or after `offset` (producer state scans)."""
        yield from headers_from(self._segments, self._bases, offset)

    # -- truncation and retention ------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything from `offset` on (from the batch holding it). True if anything
        was removed. Below the log start offset this is truncate_fully_and_start_at."""
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self._leo:
            return False
        if offset < self._log_start:
            self.truncate_fully_and_start_at(offset)
            return True
        i = bisect.bisect_right(self._bases, offset) - 1
        try:
            for seg in self._segments[i + 1 :]:
                seg.delete()
            del self._segments[i + 1 :]
            del self._bases[i + 1 :]
            seg = self._segments[i]
            self.layout_version += 1
            seg.truncate_to(offset)
            self._leo = seg.read_next_offset()
            self._recovery_point = min(self._recovery_point, self._leo)
            self._log_start = min(self._log_start, self._leo)
            self._epoch_cache.truncate_from_end(self._leo)
            self._metadata_dirty = True
            self.producers.rebuild(self._log_start, self._leo, self._headers_from)
        except OSError as exc:
            raise self._storage_error(f"truncating to offset {offset}", exc) from exc
        logger.info("log_truncated", partition=str(self.topic_partition), log_end_offset=self._leo)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log, empty, at `offset`."""
        self._check_open()
        self.layout_version += 1
        try:
            for seg in self._segments:
                seg.delete()
            self._segments = [self._new_segment(offset)]
            self._bases = [offset]
            self._leo = self._log_start = self._recovery_point = offset
            self._epoch_cache.clear()
            self._metadata_dirty = True
            self.producers.delete_all(offset)
        except OSError as exc:
            raise self._storage_error(f"restarting the log at offset {offset}", exc) from exc

    def delete_old_segments(self, now_ms: int, high_watermark: int | None = None) -> int:
        """Retention: delete whole oldest segments past retention.ms (by their largest record
        timestamp) or beyond retention.bytes, or below the log start offset; never the active
        segment, and (when given) only segments wholly below `high_watermark`. Returns how many
        were deleted; the log start offset moves to the new first segment."""
        self._check_open()
        try:
            count = segments_past_retention(
                self._segments, self._config, self._log_start, now_ms, high_watermark
            )
        except OSError as exc:
            raise self._storage_error("checking retention", exc) from exc
        if count:
            self._delete_oldest(count)
        return count

    def _delete_oldest(self, count: int) -> None:
        self.layout_version += 1
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        self._log_start = max(self._log_start, self._bases[0])
        self._recovery_point = max(self._recovery_point, self._log_start)
        try:
            for seg in doomed:
                seg.delete()
            self._epoch_cache.truncate_from_start(self._log_start)
            self.producers.delete_before(self._log_start)
        except OSError as exc:
            raise self._storage_error("deleting old segments", exc) from exc
        self._metadata_dirty = True
        logger.info(
            "segments_deleted",
            partition=str(self.topic_partition),
            segments=[os.path.basename(s.log_path) for s in doomed],
            log_start_offset=self._log_start,
        )

    # -- compaction ----------------------------------------------------------------------------

    def replace_segments(
        self,
        old: list[LogSegment],
        cleaned_path: str,
        layout_version: int,
        failpoints: Failpoints | None = None,
    ) -> LogSegment | None:
        """Swap a cleaned file in for the consecutive inactive segments `old` (Kafka's
        replaceSegments). Returns the new segment, or None (and deletes `cleaned_path`) when
        the log was truncated, had segments deleted or replaced, or was closed since
        `layout_version` was read: the cleaned data may then no longer match the log.

        Crash-safe (storage.swap): `.cleaned` -> `.swap`, old segments -> `.deleted`, `.swap`
        -> `.log`; a log opened after a kill anywhere in between holds every kept record."""
        i = self._position_of(old)
        if self._closed or layout_version != self.layout_version or i is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(cleaned_path)
            return None
        base = old[0].base_offset
        self.mark_offset_gaps()
        try:
            swap_files(self.directory, old, cleaned_path, failpoints)
            new = LogSegment.open_existing(
                self.directory, base, self._handles, self._config, self._clock()
            )
        except OSError as exc:
            raise self._storage_error(f"replacing segments from offset {base}", exc) from exc
        self._segments[i : i + len(old)] = [new]
        self._bases = [s.base_offset for s in self._segments]
        self.layout_version += 1
        return new

    def _position_of(self, old: list[LogSegment]) -> int | None:
        """Where the run `old` sits in the segment list, if it is still there, whole and
        inactive."""
        if not old:
            return None
        try:
            i = next(k for k, s in enumerate(self._segments) if s is old[0])
        except StopIteration:
            return None
        run = self._segments[i : i + len(old)]
        if len(run) != len(old) or any(a is not b for a, b in zip(run, old, strict=True)):
            return None
        return i if i + len(old) < len(self._segments) else None

    # -- durability --------------------------------------------------------------------------

    def needs_flush(self, now_ms: int) -> bool:
        """Rolled segments not yet flushed, or unflushed data older than flush.ms."""
        return self._rolled_unflushed or self.flush_ms_due(now_ms)

    def may_need_flush(self) -> bool:
        """Whether `needs_flush` can become true without another append, roll or config
        change: rolled segments not yet flushed, or unflushed data under a finite flush.ms."""
        return self._rolled_unflushed or (
            self._recovery_point < self._leo and self._config.flush_ms < FLUSH_MS_NEVER
        )

    def flush_ms_due(self, now_ms: int) -> bool:
        """Unflushed data older than flush.ms (Kafka's periodic log flusher)."""
        return (
            self._recovery_point < self._leo
            and now_ms - self._last_flush_ms >= self._config.flush_ms
        )

    def flush(self) -> None:
        """fsync everything written since the recovery point; the recovery point becomes the
        log end offset."""
        self._flush_up_to(len(self._segments), self._leo)
        self._unflushed_messages = 0
        self._last_flush_ms = self._clock()

    def flush_rolled_segments(self) -> None:
        """fsync the segments before the active one (rolled ones); the recovery point moves to
        the active segment's base offset. What Kafka schedules right after a roll."""
        if self._rolled_unflushed:
            self._flush_up_to(len(self._segments) - 1, self._bases[-1])

    def _flush_up_to(self, end: int, new_recovery_point: int) -> None:
        if self._closed:
            return
        try:
            if self._epoch_cache.flush():
                self._metadata_dirty = True
            elif self._untouched_since_created():
                # No byte to make durable (Kafka's flush of an empty log does nothing either):
                # its files and directory are made durable with its first data. A crash before
                # loses nothing; the replica is created again from the metadata. Without this,
                # a clean shutdown fsynced 5 files per fresh partition (20 s at 10,000).
                return
            i = max(0, bisect.bisect_right(self._bases, self._recovery_point) - 1)
            for seg in self._segments[i:end]:
                seg.flush()
            if self._metadata_dirty:
                fsync_dir(self.directory)
                self._metadata_dirty = False
            if self._parent_dirty:
                fsync_dir(os.path.dirname(self.directory) or ".")
                self._parent_dirty = False
        except OSError as exc:
            raise self._storage_error("flushing", exc) from exc
        self._recovery_point = max(self._recovery_point, new_recovery_point)
        self._rolled_unflushed = False

    def _untouched_since_created(self) -> bool:
        """Created empty by this open and never appended to, truncated or reshaped since."""
        return self._created_here and self._leo == 0 and self.layout_version == 0

    def close(self, flush: bool = True) -> None:
        """Flush (unless the log is about to be deleted), write the final index entries and
        give back every file descriptor."""
        if self._closed:
            return
        if self._offline is not None:
            flush = False  # a failed disk is not written again
        if flush and self._untouched_since_created():
            # Nothing to write (no data, index entry or producer); the empty index files that
            # Kafka's layout shows come with the first data (a missing one reads as empty).
            for seg in self._segments:
                seg.release_handles()
            self._closed = True
            return
        error: KafkaStorageError | None = None
        if flush:
            try:
                self.flush()
            except KafkaStorageError as exc:
                error = exc
            problem = self.producers.take_snapshot(self._leo, fsync=True) if error is None else None
            if problem is not None:
                # Without it the next clean open would start with no producer state.
                error = self._storage_error("writing the producer snapshot", problem)
        else:
            self._handles.close_under(self.directory)
            self._closed = True
            return
        for seg in self._segments:
            try:
                seg.close()
            except OSError as exc:
                error = error or self._storage_error("closing", exc)
        self._closed = True
        if error is not None:
            raise error

    def release_handles(self) -> None:
        """Close this log's descriptors without closing the log (before moving its dir)."""
        self._handles.close_under(self.directory)

    def __repr__(self) -> str:
        return (
            f"Log({self.topic_partition}, start={self._log_start}, end={self._leo}, "
            f"segments={len(self._segments)})"
        )
