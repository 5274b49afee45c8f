"""Log compaction (Kafka's LogCleaner's Cleaner, OffsetMap and cleaner-offset-checkpoint).

A cleaning of one log has three steps, split by thread:

1. `plan_cleaning(log, ...)` (the log's owner thread): which inactive segments to read and up
   to where (the first uncleanable offset), as plain values: paths, sizes, offsets.
2. `clean(plan, ...)` (any thread; it never touches the Log): build the offset map (latest
   offset per key) over the dirty range [first dirty, end), then write each group of segments
   (Kafka's groupSegmentsBySize) as one `<base>.log.cleaned`, keeping a record when it is the
   latest of its key, or a tombstone not yet past delete.retention.ms; fsync each file.
3. `swap_in(log, result)` (the owner thread): `Log.replace_segments` per group, which aborts if
   the log was truncated, had segments deleted or was closed meanwhile (storage.swap has the
   crash-safe file protocol).

What a cleaned batch keeps: its base offset, last offset delta (so the batch still spans the
same offsets and producers' sequences stay right), leader epoch, attributes, base timestamp,
producer id/epoch and base sequence; only the removed records go (the log has gaps). A batch
that loses all its records goes entirely, except each producer's last batch, kept empty as Kafka
does (CleaningPlan.producer_last_offsets: the `.snapshot` files hold the producer state, but a
crash whose recovery point predates them rebuilds it from the log). Records
without a key are dropped (as Kafka's cleaner does; Produce refuses them on compacted topics).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import msgpack

from protocol.errors import CorruptRecordBatchError
from protocol.names import TopicPartition
from protocol.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    compress_payload,
    decode_batch_records,
    encode_batch_bytes,
    read_header,
    validate_batch,
)
from storage.checkpoints import read_offsets, write_offsets
from storage.errors import CheckpointError
from storage.log import Log
from storage.segment import LogSegment
from storage.swap import CLEANED_SUFFIX, Failpoints, crash_point

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
OFFSET_MAP_BYTES_PER_ENTRY = 24
"""As Kafka's SkimpyOffsetMap: a 16-byte key hash and an 8-byte offset per entry."""
OFFSET_MAP_LOAD_FACTOR = 0.9
READ_CHUNK = 1 << 20
DEFAULT_DEDUPE_BUFFER_BYTES = 128 << 20
"""Kafka's log.cleaner.dedupe.buffer.size default."""


class CleanerCorruptionError(Exception):
    """A segment being cleaned holds a bad batch: cleaning of that log stops, nothing changes."""


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """An inactive segment as the cleaning thread sees it: plain values only."""

    base_offset: int
    path: str
    size: int
    end_offset: int
    """The next segment's base offset: every offset of this one is below it."""
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class CleaningPlan:
    topic_partition: TopicPartition
    segments: tuple[SegmentRef, ...]
    """From the first segment up to the first uncleanable offset."""
    first_dirty: int
    end: int
    """First uncleanable offset (a segment base): nothing at or past it is read or changed."""
    delete_horizon_ms: int
    """Tombstones in segments whose largest timestamp is below this are removed."""
    segment_bytes: int
    layout_version: int
    live_segments: tuple[LogSegment, ...]
    """The segment objects, for the swap's identity check only (never used by `clean`)."""
    producer_last_offsets: frozenset[int] = frozenset()
    """The last offset of each producer's last batch: such a batch stays (empty if it loses
    every record), as Kafka's cleaner keeps it, so a rebuild of the producer state from the
    log (after a crash that predates the .snapshot files) still knows the producer's last
    sequence and answers its retry as a duplicate."""

    @property
    def dirty_bytes(self) -> int:
        return sum(s.size for s in self.segments if s.end_offset > self.first_dirty)

    @property
    def total_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def dirty_ratio(self) -> float:
        total = self.total_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    replaced: tuple[int, ...]
    """Base offsets of the segments the cleaned file replaces (index into the plan)."""
    cleaned_path: str


@dataclass(slots=True)
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    batches_rewritten: int = 0
    batches_dropped: int = 0
    elapsed_s: float = 0.0


@dataclass(frozen=True, slots=True)
class CleaningResult:
    plan: CleaningPlan
    groups: tuple[CleanedGroup, ...]
    next_dirty: int
    """The new cleaner checkpoint: where the next cleaning's dirty range starts."""
    stats: CleanerStats = field(default_factory=CleanerStats)


# -- planning (owner thread) -------------------------------------------------------------------


def first_uncleanable_offset(log: Log, now_ms: int, high_watermark: int | None) -> int:
    """Kafka's firstUncleanableOffset: the active segment's base, bounded by the high watermark
    (never clean what may be truncated), the recovery point (recovery never re-scans a cleaned
    segment) and min.compaction.lag.ms (the first segment with a record younger than that)."""
    segs = log.segments
    bound = segs[-1].base_offset
    bound = min(bound, log.recovery_point)
    if high_watermark is not None:
        bound = min(bound, high_watermark)
    lag = log.config.min_compaction_lag_ms
    end = segs[0].base_offset
    for seg, nxt in itertools.pairwise(segs):
        if nxt.base_offset > bound:
            break
        if lag > 0 and seg.max_timestamp()[0] > now_ms - lag:
            break
        end = nxt.base_offset
    return end


def plan_cleaning(
    log: Log, *, first_dirty: int, now_ms: int, high_watermark: int | None = None
) -> CleaningPlan | None:
    """What to clean in `log` now, or None when it has no dirty inactive segment."""
    first_dirty = max(first_dirty, log.log_start_offset)
    end = first_uncleanable_offset(log, now_ms, high_watermark)
    if end <= first_dirty:
        return None
    segs = log.segments
    refs = []
    live = []
    for seg, nxt in itertools.pairwise(segs):
        if nxt.base_offset > end:
            break
        refs.append(
            SegmentRef(seg.base_offset, seg.log_path, seg.size, nxt.base_offset,
                       seg.max_timestamp()[0])
        )  # fmt: skip
        live.append(seg)
    return CleaningPlan(
        topic_partition=log.topic_partition,
        segments=tuple(refs),
        first_dirty=first_dirty,
        end=end,
        delete_horizon_ms=now_ms - log.config.delete_retention_ms,
        segment_bytes=log.config.segment_bytes,
        layout_version=log.layout_version,
        live_segments=tuple(live),
        producer_last_offsets=frozenset(
            e.batches[-1].last_offset for e in log.producers.state.entries.values() if e.batches
        ),
    )


def max_compaction_lag_due(log: Log, first_dirty: int, now_ms: int) -> bool:
    """max.compaction.lag.ms: the first dirty inactive segment began longer ago than that."""
    segs = log.segments
    for seg, nxt in itertools.pairwise(segs):
        if nxt.base_offset > first_dirty:
            first_ts = seg.rolling_based_timestamp()
            return (
                first_ts is not None and 0 <= first_ts < now_ms - log.config.max_compaction_lag_ms
            )
    return False


# -- cleaning (any thread) ---------------------------------------------------------------------


class OffsetMap:
    """Latest offset per key over the dirty range, with Kafka's capacity accounting
    (log.cleaner.dedupe.buffer.size / 24 bytes per entry * 0.9 load factor)."""

    def __init__(self, buffer_bytes: int) -> None:
        entries = buffer_bytes / OFFSET_MAP_BYTES_PER_ENTRY * OFFSET_MAP_LOAD_FACTOR
        self.capacity = max(1, int(entries))
        self._latest: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._latest)

    @property
    def full(self) -> bool:
        return len(self._latest) >= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        self._latest[key] = offset

    def get(self, key: bytes) -> int:
        return self._latest.get(key, -1)


def _row(
    offset: int, timestamp: int, key: bytes | None, value: bytes | None, headers: tuple
) -> list:  # type: ignore[type-arg]
    return [offset, timestamp, key, value, headers]


def _batches(ref: SegmentRef) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every batch of an inactive segment file, CRC-checked, read with a descriptor of its own
    (the log's FileHandleCache belongs to the owner thread). Raises CleanerCorruptionError."""
    try:
        with open(ref.path, "rb") as f:
            fd = f.fileno()
            pos = 0
            buf = b""
            buf_start = 0
            while pos < ref.size:
                rel = pos - buf_start
                if len(buf) - rel < HEADER_SIZE:
                    buf = os.pread(fd, min(READ_CHUNK, ref.size - pos), pos)
                    buf_start, rel = pos, 0
                if len(buf) - rel < HEADER_SIZE:
                    raise CorruptRecordBatchError(f"truncated batch header at byte {pos}")
                size = read_header(buf, rel).size
                if len(buf) - rel < size:
                    buf = os.pread(fd, max(size, min(READ_CHUNK, ref.size - pos)), pos)
                    buf_start, rel = pos, 0
                h = validate_batch(buf, rel)
                yield h, buf[rel : rel + size]
                pos += size
    except CorruptRecordBatchError as exc:
        raise CleanerCorruptionError(
            f"corrupt segment {ref.path}, cleaning of this log stops: {exc}"
        ) from exc
    except OSError as exc:
        raise CleanerCorruptionError(f"cannot read segment {ref.path}: {exc}") from exc


def _records(batch: bytes) -> list[list]:  # type: ignore[type-arg]
    try:
        return decode_batch_records(batch, factory=_row, verify_crc=False)[1]
    except CorruptRecordBatchError as exc:
        raise CleanerCorruptionError(f"undecodable records: {exc}") from exc


def build_offset_map(plan: CleaningPlan, offset_map: OffsetMap, stats: CleanerStats) -> int:
    """Fill `offset_map` from the dirty segments; returns where it stopped (a segment end): the
    map covers [first dirty, that offset). At least one segment is always taken."""
    stop = plan.first_dirty
    for ref in plan.segments:
        if ref.end_offset <= plan.first_dirty:
            continue
        if offset_map.full and stop > plan.first_dirty:
            break
        for h, batch in _batches(ref):
            stats.bytes_read += h.size
            if h.next_offset <= plan.first_dirty or h.is_control:
                continue
            for offset, _ts, key, _value, _headers in _records(batch):
                if key is not None and offset >= plan.first_dirty:
                    offset_map.put(key, offset)
        stop = ref.end_offset
    return stop


def group_segments_by_size(
    segments: tuple[SegmentRef, ...], max_size: int
) -> list[list[SegmentRef]]:
    """Kafka's groupSegmentsBySize: consecutive segments whose sizes sum to at most
    segment.bytes (and whose offsets fit a 32-bit delta) become one cleaned segment."""
    groups: list[list[SegmentRef]] = []
    for ref in segments:
        group = groups[-1] if groups else None
        if (
            group is not None
            and sum(s.size for s in group) + ref.size <= max_size
            and ref.end_offset - 1 - group[0].base_offset <= 2**31 - 1
        ):
            group.append(ref)
        else:
            groups.append([ref])
    return groups


def _keep(
    key: bytes | None, value: bytes | None, offset: int, tombstone_expired: bool, om: OffsetMap
) -> bool:
    if key is None:
        return False
    if om.get(key) > offset:
        return False
    return not (value is None and tombstone_expired)


def _filter_batch(
    h: BatchHeader, batch: bytes, om: OffsetMap, tombstone_expired: bool, stats: CleanerStats
) -> bytes | None:
    """The batch with only its kept records (the same bytes when all are kept), or None."""
    rows = _records(batch)
    stats.records_read += len(rows)
    kept = [r for r in rows if _keep(r[2], r[3], r[0], tombstone_expired, om)]
    stats.records_kept += len(kept)
    if len(kept) == len(rows):
        return batch
    if not kept:
        stats.batches_dropped += 1
        return None
    stats.batches_rewritten += 1
    base_ts = h.base_timestamp
    packed = [
        [0, ts - base_ts, off - h.base_offset, key, value, [list(x) for x in headers]]
        for off, ts, key, value, headers in kept
    ]
    payload = compress_payload(h.compression, msgpack.packb(packed, use_bin_type=True))
    return encode_batch_bytes(
        payload,
        attributes=h.attributes,
        last_offset_delta=h.last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max(r[1] for r in kept),
        records_count=len(kept),
        base_offset=h.base_offset,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
    )


def _empty_batch(h: BatchHeader) -> bytes:
    """A batch with no records spanning h's offsets (Kafka keeps such batches too)."""
    return encode_batch_bytes(
        compress_payload(h.compression, msgpack.packb([])),
        attributes=h.attributes,
        last_offset_delta=h.last_offset_delta,
        base_timestamp=h.base_timestamp,
        max_timestamp=h.max_timestamp,
        records_count=0,
        base_offset=h.base_offset,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        partition_leader_epoch=h.partition_leader_epoch,
    )


def _clean_group(
    plan: CleaningPlan,
    group: list[SegmentRef],
    om: OffsetMap,
    stats: CleanerStats,
    *,
    last_group: bool,
) -> str:
    path = group[0].path + CLEANED_SUFFIX
    last_dropped: BatchHeader | None = None
    with open(path, "wb") as out:
        for ref in group:
            expired = ref.max_timestamp < plan.delete_horizon_ms
            for h, batch in _batches(ref):
                stats.bytes_read += h.size
                if h.is_control:
                    kept: bytes | None = batch
                else:
                    kept = _filter_batch(h, batch, om, expired, stats)
                if kept is None and h.last_offset in plan.producer_last_offsets:
                    kept = _empty_batch(h)
                last_dropped = h if kept is None else None
                if kept is not None:
                    out.write(kept)
                    stats.bytes_written += len(kept)
        if last_group and last_dropped is not None:
            # The cleaned range's last batch stays, empty: were the active segment empty, a
            # reader at an offset in the gap before it would find no batch below the log end
            # offset and never move on.
            empty = _empty_batch(last_dropped)
            out.write(empty)
            stats.bytes_written += len(empty)
        out.flush()
        os.fsync(out.fileno())
    return path


def clean(
    plan: CleaningPlan, dedupe_buffer_bytes: int, failpoints: Failpoints | None = None
) -> CleaningResult:
    """Steps 2 of the module doc. Raises CleanerCorruptionError (nothing left behind)."""
    started = time.monotonic()
    stats = CleanerStats()
    om = OffsetMap(dedupe_buffer_bytes)
    written: list[str] = []
    try:
        upto = build_offset_map(plan, om, stats)
        cleanable = tuple(s for s in plan.segments if s.end_offset <= upto)
        groups = []
        grouped = group_segments_by_size(cleanable, plan.segment_bytes)
        for n, group in enumerate(grouped):
            written.append(group[0].path + CLEANED_SUFFIX)
            path = _clean_group(plan, group, om, stats, last_group=n == len(grouped) - 1)
            groups.append(CleanedGroup(tuple(s.base_offset for s in group), path))
        crash_point(failpoints, "log.cleaner.after_cleaned")
    except (CleanerCorruptionError, OSError):
        for path in written:
            _unlink(path)
        raise
    stats.elapsed_s = time.monotonic() - started
    return CleaningResult(plan, tuple(groups), upto, stats)


def swap_in(log: Log, result: CleaningResult, failpoints: Failpoints | None = None) -> bool:
    """Step 3 (owner thread): replace each group; False when the log changed meanwhile (the
    rest of the cleaned files are deleted, nothing of the log changes)."""
    by_base = {s.base_offset: s for s in result.plan.live_segments}
    version = result.plan.layout_version
    for n, group in enumerate(result.groups):
        old = [by_base[b] for b in group.replaced]
        if log.replace_segments(old, group.cleaned_path, version, failpoints) is None:
            for later in result.groups[n + 1 :]:
                _unlink(later.cleaned_path)
            return False
        version = log.layout_version
    return True


def discard(result: CleaningResult) -> None:
    for group in result.groups:
        _unlink(group.cleaned_path)


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


# -- produce-side check ------------------------------------------------------------------------


# -- cleaner-offset-checkpoint -----------------------------------------------------------------


class CleanerCheckpoints:
    """`cleaner-offset-checkpoint` per log dir: where each log's dirty range starts."""

    def __init__(self, log_dirs: list[str]) -> None:
        self._offsets: dict[str, dict[TopicPartition, int]] = {}
        self.problems: dict[str, str] = {}
        for d in log_dirs:
            path = os.path.join(d, CLEANER_OFFSET_CHECKPOINT)
            try:
                self._offsets[d] = read_offsets(path)
            except CheckpointError as exc:
                # Losing it costs a cleaning from the start, never data.
                self._offsets[d] = {}
                self.problems[d] = str(exc)

    def get(self, log_dir: str, tp: TopicPartition) -> int:
        return self._offsets.get(log_dir, {}).get(tp, 0)

    def offsets(self, log_dir: str) -> Mapping[TopicPartition, int]:
        return dict(self._offsets.get(log_dir, {}))

    def update(self, log_dir: str, tp: TopicPartition, offset: int) -> None:
        self._offsets.setdefault(log_dir, {})[tp] = offset
        self._write(log_dir)

    def remove(self, tps: set[TopicPartition]) -> None:
        for d, offsets in self._offsets.items():
            if tps & offsets.keys():
                for tp in tps:
                    offsets.pop(tp, None)
                self._write(d)

    def _write(self, log_dir: str) -> None:
        write_offsets(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT), self._offsets[log_dir])


__all__ = [
    "CLEANER_OFFSET_CHECKPOINT",
    "DEFAULT_DEDUPE_BUFFER_BYTES",
    "CleanedGroup",
    "CleanerCheckpoints",
    "CleanerCorruptionError",
    "CleanerStats",
    "CleaningPlan",
    "CleaningResult",
    "OffsetMap",
    "clean",
    "discard",
    "group_segments_by_size",
    "max_compaction_lag_due",
    "plan_cleaning",
    "swap_in",
]
