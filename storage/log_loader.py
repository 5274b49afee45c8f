"""Opening a partition's log directory (Kafka's LogLoader): its topic id, the segments found
there, and the recovery scan after an unclean stop.

    created, stored_id = prepare_dir(directory, tp, topic_id)
    segments = open_segments(directory, handles, config, now_ms)
    found = recover_segments(directory, segments, recovery_point, epoch_cache, gaps, partition,
                             new_segment)

`open_segments` first tidies the directory: a cleaning a crash interrupted is finished or undone
(storage.swap), `.tmp` and `.deleted` files go, and so do indexes without their segment.
`recover_segments` re-scans the segments from the one holding the recovery point: every CRC
checked, offsets contiguous (or only going up, in a log with offset gaps), epochs never going
down and matching the leader-epoch-checkpoint; the log is cut at the first bad or torn batch.
storage.log.Log drives both from `Log.open`.
"""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Callable
from typing import NamedTuple

import structlog

from protocol.names import TopicPartition
from protocol.record_batch import BatchHeader
from storage.checkpoints import PARTITION_METADATA, read_partition_metadata
from storage.config import LogConfig
from storage.epoch_cache import LeaderEpochFileCache
from storage.errors import CheckpointError, InconsistentTopicIdError, KafkaStorageError
from storage.files import FileHandleCache
from storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, LogSegment
from storage.swap import CLEANED_SUFFIX, SWAP_SUFFIX, complete_swaps

logger = structlog.get_logger("storage.log_loader")


class Recovered(NamedTuple):
    log_end_offset: int
    truncated_bytes: int
    """Bytes cut by the recovery (tests and logs)."""


def prepare_dir(
    directory: str, tp: TopicPartition, topic_id: str | None
) -> tuple[bool, str | None]:
    """Create `directory` if needed: (whether it was created, the topic id its partition.metadata
    holds). InconsistentTopicIdError when that is not `topic_id`."""
    created = not os.path.isdir(directory)
    try:
        os.makedirs(directory, exist_ok=True)
        stored_id = read_partition_metadata(os.path.join(directory, PARTITION_METADATA))
    except OSError as exc:
        raise KafkaStorageError.from_os_error(f"opening the log of {tp}", exc) from exc
    except CheckpointError as exc:
        logger.warning("partition_metadata_unreadable", partition=str(tp), problem=str(exc))
        stored_id = None
    if topic_id is not None and stored_id is not None and topic_id != stored_id:
        raise InconsistentTopicIdError(
            f"log dir {directory} holds topic id {stored_id} but {tp} was opened with "
            f"topic id {topic_id}"
        )
    return created, stored_id


def open_segments(
    directory: str, handles: FileHandleCache, config: LogConfig, now: int
) -> list[LogSegment]:
    """The segments in `directory`, oldest first, once it is tidied (see the module doc)."""
    return [
        LogSegment.open_existing(directory, base, handles, config, now)
        for base in _segment_bases(directory)
    ]


def _segment_bases(directory: str) -> list[int]:
    names = os.listdir(directory)
    if any(n.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) for n in names):
        complete_swaps(directory)  # a cleaning a crash interrupted
        names = os.listdir(directory)
    bases = []
    index_stems = set()
    for name in names:
        stem, ext = os.path.splitext(name)
        if ext in (".tmp", ".deleted"):
            os.unlink(os.path.join(directory, name))
        elif len(stem) == 20 and stem.isdigit():
            if ext == LOG_SUFFIX:
                bases.append(int(stem))
            elif ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                index_stems.add(stem)
    for stem in index_stems - {f"{b:020d}" for b in bases}:
        # Indexes without their segment (a crash while deleting it): useless.
        for ext in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, stem + ext))
    bases.sort()
    return bases


def recover_segments(
    directory: str,
    segments: list[LogSegment],
    recovery_point: int,
    cache: LeaderEpochFileCache,
    gaps: bool,
    partition: str,
    new_segment: Callable[[int], LogSegment],
) -> Recovered:
    """Re-scan `segments` from the one holding `recovery_point`; cut at the damage (in place:
    the damaged segments leave `segments`; `new_segment(offset)` starts an empty one at the
    damage when none is left). Nothing is fsynced here, as in Kafka's LogLoader: the recovery
    point stays where it was (the caller keeps it), so a second crash scans the same segments
    again, and the flushes that move it later make them durable. Fsyncing every recovered
    segment, its indexes and its directory was 8 of the 15 s a broker with 25,000
    partitions took to start after a SIGKILL."""
    first = max(0, bisect.bisect_right([s.base_offset for s in segments], recovery_point) - 1)
    if cache.load_problem:
        logger.warning(
            "leader_epoch_checkpoint_unreadable",
            partition=partition,
            problem=cache.load_problem,
        )
    check = _BatchCheck(cache, segments[first].base_offset, gaps)
    truncated_at, truncated = _scan(segments, first, check, partition)
    if truncated_at is not None:
        truncated += _cut(segments, truncated_at, check.expected, new_segment)
    leo = segments[-1].read_next_offset()
    cache.truncate_from_end(leo)
    return Recovered(leo, truncated)


class _BatchCheck:
    """Each batch header recovery reads (LogSegment.recover's `accept`): None when it continues
    the log, else the problem."""

    def __init__(self, cache: LeaderEpochFileCache, expected: int, gaps: bool) -> None:
        self.cache = cache
        self.expected = expected
        self.gaps = gaps
        self.last_epoch = -1
        # Without a checkpoint the cache is rebuilt from the batches, as Kafka does; with one,
        # every batch's epoch must match it: that catches a damaged epoch field, which the CRC
        # does not cover.
        self.rebuilding = cache.earliest_entry() is None

    def __call__(self, h: BatchHeader) -> str | None:
        expected = self.expected
        if h.base_offset != expected and not (self.gaps and h.base_offset > expected):
            return f"base offset {h.base_offset} where {expected} was expected"
        epoch = h.partition_leader_epoch
        if epoch < self.last_epoch:
            return f"leader epoch {epoch} after a batch of epoch {self.last_epoch}"
        if epoch >= 0:
            problem = self._epoch_problem(h, epoch)
            if problem is not None:
                return problem
        self.last_epoch = epoch
        self.expected = h.base_offset + h.last_offset_delta + 1
        return None

    def _epoch_problem(self, h: BatchHeader, epoch: int) -> str | None:
        cache = self.cache
        cached = cache.epoch_for_offset(h.base_offset)
        earliest = cache.earliest_entry()
        if self.rebuilding:
            if epoch > (cache.latest_epoch() if earliest is not None else -1):
                cache.assign(epoch, h.base_offset)
        elif cached is None:
            assert earliest is not None
            if epoch >= earliest.epoch:
                return (
                    f"leader epoch {epoch} at offset {h.base_offset}, before the first "
                    f"checkpointed epoch {earliest.epoch} (from {earliest.start_offset})"
                )
        elif epoch != cached:
            return (
                f"leader epoch {epoch} at offset {h.base_offset} but the "
                f"leader-epoch-checkpoint says epoch {cached}"
            )
        return None


def _scan(
    segments: list[LogSegment], first: int, check: _BatchCheck, partition: str
) -> tuple[int | None, int]:
    """Recover the segments from `first` on until the damage: (index of the first segment to
    delete, None when there is none; bytes cut from the segments recovered)."""
    truncated = 0
    for i in range(first, len(segments)):
        seg = segments[i]
        expected = check.expected
        if seg.base_offset != expected and not (check.gaps and seg.base_offset > expected):
            # A segment that does not continue the log: all of it is damage.
            logger.warning(
                "log_recovery_truncated",
                partition=partition,
                segment=os.path.basename(seg.log_path),
                problem=f"segment starts at {seg.base_offset}, the log ends at {expected}",
                deleted_segments=len(segments) - i,
            )
            return i, truncated
        check.expected = seg.base_offset
        result = seg.recover(check)
        truncated += result.truncated_bytes
        if result.problem is not None:
            logger.warning(
                "log_recovery_truncated",
                partition=partition,
                segment=os.path.basename(seg.log_path),
                problem=result.problem,
                truncated_bytes=result.truncated_bytes,
                log_end_offset=result.next_offset,
                deleted_segments=len(segments) - i - 1,
            )
            return i + 1, truncated
    return None, truncated


def _cut(
    segments: list[LogSegment],
    truncated_at: int,
    expected: int,
    new_segment: Callable[[int], LogSegment],
) -> int:
    """Delete the segments from `truncated_at` on; returns their bytes."""
    cut = 0
    for seg in segments[truncated_at:]:
        cut += seg.size
        seg.delete()
    del segments[truncated_at:]
    if not segments:
        segments.append(new_segment(expected))
    return cut
