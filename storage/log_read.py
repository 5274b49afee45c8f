"""Reading a partition's segments: whole batches from an offset (Fetch), the first offset at a
timestamp (ListOffsets), batch headers from an offset (producer-state scans).

    found = read_segments(segments, bases, offset, limit, leo, max_bytes, min_one_batch, tp)
    found = offset_at_timestamp(segments, bases, log_start, timestamp)
    for header in headers_from(segments, bases, offset): ...

`segments` are the log's, oldest first, and `bases` their base offsets. storage.log.Log checks
the offsets asked for and wraps the OSErrors these raise.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from protocol.errors import CorruptRecordBatchError
from protocol.names import TopicPartition
from protocol.record_batch import BatchHeader, decode_records
from storage.errors import CorruptLogError
from storage.segment import LogSegment

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
"""Kafka's ListOffsets sentinels, accepted by Log.offset_for_timestamp."""


@dataclass(frozen=True, slots=True)
class ReadResult:
    data: bytes
    """Raw bytes of whole batches; the first holds `fetch_offset` (it may start before it)."""
    fetch_offset: int
    log_start_offset: int
    log_end_offset: int
    segment_base_offset: int
    position: int
    """Byte position of `data` in its segment."""


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


def read_segments(
    segments: Sequence[LogSegment],
    bases: Sequence[int],
    offset: int,
    limit: int,
    leo: int,
    max_bytes: int,
    min_one_batch: bool,
    tp: TopicPartition,
) -> tuple[LogSegment, int, bytes] | None:
    """(segment, byte position, data) of the first segment from the one holding `offset` that
    has batches ending below `limit`, None when none has; CorruptLogError on corrupt data."""
    i = bisect.bisect_right(bases, offset) - 1
    try:
        while i < len(segments):
            seg = segments[i]
            max_pos = seg.size
            if limit < leo and (i + 1 == len(bases) or limit < bases[i + 1]):
                found = seg.translate_offset(limit)
                if found is not None:
                    max_pos = found[0]
            got = seg.read(offset, max_bytes, max_pos, min_one_batch)
            if got is not None:
                pos, data = got
                return seg, pos, data
            i += 1
    except CorruptRecordBatchError as exc:
        raise CorruptLogError(
            f"reading offset {offset} of {tp}: corrupt data in {segments[i].log_path}: {exc}",
            path=segments[i].log_path,
        ) from exc
    return None


def offset_at_timestamp(
    segments: Sequence[LogSegment], bases: Sequence[int], log_start: int, timestamp: int
) -> TimestampOffset | None:
    """The first record at or after `timestamp` (>= 0) from `log_start` on, None if none is."""
    for i, seg in enumerate(segments):
        if i + 1 < len(bases) and bases[i + 1] <= log_start:
            continue
        if seg.max_timestamp()[0] < timestamp:
            continue
        for pos, h in _batches_from_timestamp(seg, timestamp, log_start):
            # ListOffsets is no hot path: decoding this one batch gives Kafka's exact
            # answer (the first record, not the first batch, at or after `timestamp`).
            for rec in decode_records(seg.read_batch(pos, h.size)):
                if rec.timestamp >= timestamp and rec.offset >= log_start:
                    return TimestampOffset(rec.timestamp, rec.offset)
    return None


def _batches_from_timestamp(
    seg: LogSegment, timestamp: int, log_start: int
) -> Iterator[tuple[int, BatchHeader]]:
    _, offset = seg.time_index.lookup(timestamp)
    _, start = seg.offset_index.lookup(max(offset, log_start))
    for pos, h in seg.iter_headers(start, seg.size):
        if h.base_offset + h.last_offset_delta >= log_start and (h.max_timestamp >= timestamp):
            yield pos, h


def headers_from(
    segments: Sequence[LogSegment], bases: Sequence[int], offset: int
) -> Iterator[BatchHeader]:
    """Headers of the batches starting at or after `offset`."""
    i = max(0, bisect.bisect_right(bases, offset) - 1)
    for k, seg in enumerate(segments[i:]):
        start = 0
        if k == 0:
            found = seg.translate_offset(offset)
            if found is None:
                continue
            start = found[0]
        for _pos, h in seg.iter_headers(start, seg.size):
            if h.base_offset >= offset:
                yield h
