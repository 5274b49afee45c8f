"""One log segment: `<base offset>.log` with its `.index` and `.timeindex`.

The segment only knows bytes and batch headers; offsets, epochs and policies belong to Log.
All file access goes through the shared FileHandleCache with positional reads and writes, so
a segment holds no descriptor of its own and costs nothing while idle.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

from protocol.errors import CorruptRecordBatchError
from protocol.record_batch import (
    HEADER_SIZE,
    LENGTH_PREFIX,
    LOG_OVERHEAD,
    BatchHeader,
    read_header,
    validate_batch,
)
from storage.config import LogConfig
from storage.files import FileHandleCache, pread_exact, pwrite_all
from storage.index import OffsetIndex, TimeIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SCAN_CHUNK = 1 << 20
LOOKUP_CHUNK = 16 << 10
INT32_MAX = 2**31 - 1


def segment_stem(base_offset: int) -> str:
    """Kafka's file name: the base offset as 20 zero-padded digits."""
    return f"{base_offset:020d}"


class BatchInfo(NamedTuple):
    """Where one batch of an append sits and what the indexes need of it."""

    position: int
    """Byte position inside the appended buffer."""
    size: int
    last_offset: int
    max_timestamp: int


class RecoveryResult(NamedTuple):
    truncated_bytes: int
    next_offset: int
    problem: str | None
    """Why the scan stopped early (None when the whole file was valid)."""


class LogSegment:
    def __init__(
        self,
        directory: str,
        base_offset: int,
        handles: FileHandleCache,
        config: LogConfig,
        *,
        size: int,
        created_ms: int,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        stem = os.path.join(directory, segment_stem(base_offset))
        self.log_path = stem + LOG_SUFFIX
        self.index_path = stem + INDEX_SUFFIX
        self.time_index_path = stem + TIME_INDEX_SUFFIX
        self.config = config
        self.size = size
        self.created_ms = created_ms
        self.next_offset: int | None = base_offset if size == 0 else None
        """Offset after the last batch; computed lazily for segments loaded from disk."""
        self.dirty = False
        """Bytes were written since the last fsync."""
        self._handles = handles
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._bytes_since_index_entry = 0
        self._max_timestamp: tuple[int, int] | None = None  # (timestamp, offset), lazy
        self._rolling_timestamp: int | None = None  # first batch's max timestamp, lazy
        self._file_may_be_longer = False
        self._index_files_checked = False

    # -- creation ---------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: str,
        base_offset: int,
        handles: FileHandleCache,
        config: LogConfig,
        now_ms: int,
    ) -> LogSegment:
        """A new empty segment. Its .log file exists at once so a restart sees the segment."""
        seg = cls(directory, base_offset, handles, config, size=0, created_ms=now_ms)
        handles.fd(seg.log_path)
        seg._offset_index = OffsetIndex(base_offset, config.max_index_entries)
        seg._time_index = TimeIndex(base_offset, config.max_time_index_entries)
        seg.dirty = True
        return seg

    @classmethod
    def open_existing(
        cls,
        directory: str,
        base_offset: int,
        handles: FileHandleCache,
        config: LogConfig,
        now_ms: int,
    ) -> LogSegment:
        size = os.stat(os.path.join(directory, segment_stem(base_offset) + LOG_SUFFIX)).st_size
        return cls(directory, base_offset, handles, config, size=size, created_ms=now_ms)

    # -- indexes (loaded on first use) -------------------------------------------------------

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._load_indexes()
            assert self._offset_index is not None
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._load_indexes()
            assert self._time_index is not None
        return self._time_index

    def _load_indexes(self) -> None:
        cfg = self.config
        oi = OffsetIndex.from_bytes(
            _read_file(self.index_path), self.base_offset, cfg.max_index_entries
        )
        ti = TimeIndex.from_bytes(
            _read_file(self.time_index_path), self.base_offset, cfg.max_time_index_entries
        )
        self._offset_index, self._time_index = oi, ti
        if not oi.is_sane(self.size) or (self.size > 0 and len(ti) == 0):
            self.rebuild_indexes()
            return
        next_offset = self.read_next_offset()
        if not ti.is_sane(next_offset):
            self.rebuild_indexes()

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from the batch headers (no CRC check) and rewrite their files."""
        oi = OffsetIndex(self.base_offset, self.config.max_index_entries)
        ti = TimeIndex(self.base_offset, self.config.max_time_index_entries)
        self._offset_index, self._time_index = oi, ti
        self._index_batches(self.iter_headers(0, self.size), oi, ti)
        self._rewrite_index_files()

    def _index_batches(
        self, batches: Iterator[tuple[int, BatchHeader]], oi: OffsetIndex, ti: TimeIndex
    ) -> None:
        interval = self.config.index_interval_bytes
        since = 0
        max_ts, max_off = -1, self.base_offset
        next_offset = self.base_offset
        first_ts: int | None = None
        for pos, h in batches:
            last = h.base_offset + h.last_offset_delta
            if h.max_timestamp > max_ts:
                max_ts, max_off = h.max_timestamp, last
            if since > interval:
                oi.append(last, pos)
                ti.maybe_append(max_ts, max_off)
                since = 0
            since += h.size
            next_offset = last + 1
            if first_ts is None:
                first_ts = h.max_timestamp
        if max_ts >= 0:
            ti.maybe_append(max_ts, max_off)
        self._max_timestamp = (max_ts, max_off)
        self._rolling_timestamp = first_ts
        self._bytes_since_index_entry = since
        self.next_offset = next_offset

    # -- reading -------------------------------------------------------------------------------

    def _pread(self, size: int, position: int) -> bytes:
        return pread_exact(self._handles.fd(self.log_path), size, position)

    def iter_headers(
        self, start: int, end: int, *, verify_crc: bool = False, chunk: int = SCAN_CHUNK
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch in [start, end). Raises CorruptRecordBatchError
        (position = absolute byte in the file) at the first torn or bad batch."""
        pos = start
        buf = b""
        buf_start = start
        while pos < end:
            rel = pos - buf_start
            if len(buf) - rel < HEADER_SIZE:
                buf = self._pread(min(chunk, end - pos), pos)
                buf_start, rel = pos, 0
            try:
                header = read_header(buf, rel)
            except CorruptRecordBatchError as exc:
                raise CorruptRecordBatchError(_reason(exc), position=pos) from None
            size = header.size
            if pos + size > end:
                raise CorruptRecordBatchError(
                    f"truncated batch: header says {size} bytes, {end - pos} left in "
                    f"{os.path.basename(self.log_path)}",
                    position=pos,
                )
            if verify_crc:
                if rel + size > len(buf):
                    buf = self._pread(min(max(chunk, size), end - pos), pos)
                    buf_start, rel = pos, 0
                try:
                    validate_batch(buf, rel)
                except CorruptRecordBatchError as exc:
                    raise CorruptRecordBatchError(_reason(exc), position=pos) from None
            yield pos, header
            pos += size

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= `offset`."""
        _, start = self.offset_index.lookup(offset)
        for pos, header in self.iter_headers(start, self.size, chunk=LOOKUP_CHUNK):
            if header.base_offset + header.last_offset_delta >= offset:
                return pos, header
        return None

    def read(
        self, offset: int, max_bytes: int, max_position: int, min_one_batch: bool
    ) -> tuple[int, bytes] | None:
        """Whole batches from the one holding `offset`, at most `max_bytes` (unless
        min_one_batch and the first is bigger) and not past `max_position`.
        Returns (position, data), or None when no batch here reaches `offset`."""
        found = self.translate_offset(offset)
        if found is None:
            return None
        pos, header = found
        limit = min(max_position, self.size)
        if pos >= limit:
            return pos, b""
        data = self._pread(min(max_bytes, limit - pos), pos)
        cut = 0
        n = len(data)
        while cut + LOG_OVERHEAD <= n:
            size = LOG_OVERHEAD + LENGTH_PREFIX.unpack_from(data, cut)[1]
            if cut + size > n:
                break
            cut += size
        if cut == 0:
            if not min_one_batch:
                return pos, b""
            return pos, self._pread(header.size, pos)
        return pos, data if cut == n else data[:cut]

    def read_next_offset(self) -> int:
        """Offset after the last batch, scanning from the last index entry."""
        if self.next_offset is None:
            _, start = self.offset_index.last_entry()
            next_offset = self.base_offset
            for _pos, header in self.iter_headers(start, self.size, chunk=LOOKUP_CHUNK):
                next_offset = header.base_offset + header.last_offset_delta + 1
            self.next_offset = next_offset
        return self.next_offset

    def max_timestamp(self) -> tuple[int, int]:
        """(largest record timestamp, offset of the batch holding it); (-1, base) if none."""
        if self._max_timestamp is None:
            last = self.time_index.last_entry()
            if self._max_timestamp is None:  # loading the indexes may have rebuilt them
                self._max_timestamp = last if last is not None else (-1, self.base_offset)
        return self._max_timestamp

    def largest_timestamp(self) -> int:
        """For time retention: the largest record timestamp, or the file's mtime if none."""
        ts = self.max_timestamp()[0]
        if ts >= 0:
            return ts
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return -1

    def rolling_based_timestamp(self) -> int | None:
        """The first batch's max timestamp, which segment.ms counts from (as Kafka)."""
        if self._rolling_timestamp is None and self.size >= HEADER_SIZE:
            with contextlib.suppress(CorruptRecordBatchError):
                self._rolling_timestamp = read_header(self._pread(HEADER_SIZE, 0)).max_timestamp
        return self._rolling_timestamp

    def time_waited_for_roll(self, now_ms: int, max_timestamp: int) -> int:
        first = self.rolling_based_timestamp()
        if first is not None and first >= 0:
            return max_timestamp - first
        return now_ms - self.created_ms

    def read_batch(self, position: int, size: int) -> bytes:
        return self._pread(size, position)

    # -- writing -------------------------------------------------------------------------------

    def index_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def can_hold_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def append(self, data: bytes | bytearray, batches: Sequence[BatchInfo]) -> None:
        """Write `data` (whole, already validated batches) in one pwrite at the end.

        On an OSError the file is cut back to its previous size and the error re-raised; the
        segment's state is then exactly what it was.
        """
        oi, ti = self.offset_index, self.time_index
        max_ts = self.max_timestamp()
        first_ts = self.rolling_based_timestamp()
        start = self.size
        try:
            with _naming(self.log_path):
                pwrite_all(self._handles.fd(self.log_path), data, start)
        except OSError:
            try:
                os.ftruncate(self._handles.fd(self.log_path), start)
            except OSError:
                # Reads stop at self.size and the next write overwrites; trim at close.
                self._file_may_be_longer = True
            raise
        self.size = start + len(data)
        self.dirty = True
        interval = self.config.index_interval_bytes
        since = self._bytes_since_index_entry
        ts, ts_off = max_ts
        for b in batches:
            if b.max_timestamp > ts:
                ts, ts_off = b.max_timestamp, b.last_offset
            if since > interval:
                oi.append(b.last_offset, start + b.position)
                ti.maybe_append(ts, ts_off)
                since = 0
            since += b.size
        self._bytes_since_index_entry = since
        self._max_timestamp = (ts, ts_off)
        if first_ts is None:
            self._rolling_timestamp = batches[0].max_timestamp
        self.next_offset = batches[-1].last_offset + 1

    def finalize_time_index(self) -> None:
        """Record the segment's largest timestamp as the last time-index entry (on roll and
        close), so a later start knows it without scanning."""
        ts, off = self.max_timestamp()
        if ts >= 0:
            self.time_index.maybe_append(ts, off)

    def persist_indexes(self) -> None:
        """Write index entries added since the last call to the index files (creating them,
        even empty, as Kafka's layout has them)."""
        for index, path in (
            (self._offset_index, self.index_path),
            (self._time_index, self.time_index_path),
        ):
            if index is None:
                continue
            unchanged = index.persisted == len(index) and not index.trim_needed
            if unchanged and (self._index_files_checked or os.path.exists(path)):
                continue
            try:
                fd = self._handles.fd(path)
                data = index.unpersisted_bytes()
                if data:
                    pwrite_all(fd, data, index.persisted * index.entry_size)
                if index.trim_needed:
                    os.ftruncate(fd, len(index) * index.entry_size)
            except OSError as exc:
                index.trim_needed = True
                if exc.filename is None:
                    exc.filename = path
                raise
            index.persisted = len(index)
            index.trim_needed = False
        self._index_files_checked = True

    def _rewrite_index_files(self) -> None:
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.persisted = 0
                index.trim_needed = True
        self.persist_indexes()

    def flush(self) -> None:
        """Index entries to their files, then fsync the log and the indexes."""
        self.persist_indexes()
        if self._file_may_be_longer:
            os.ftruncate(self._handles.fd(self.log_path), self.size)
            self._file_may_be_longer = False
        if self.dirty:
            with _naming(self.log_path):
                os.fsync(self._handles.fd(self.log_path))
            for path in (self.index_path, self.time_index_path):
                if os.path.exists(path):
                    with _naming(path):
                        os.fsync(self._handles.fd(path))
            self.dirty = False

    def truncate_to(self, offset: int) -> int:
        """Drop the batch holding `offset` and everything after it; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        pos, header = found
        removed = self.size - pos
        with _naming(self.log_path):
            os.ftruncate(self._handles.fd(self.log_path), pos)
        self.size = pos
        self.dirty = True
        self.next_offset = header.base_offset
        oi, ti = self.offset_index, self.time_index
        oi.truncate_to_offset(header.base_offset)
        ti.truncate_to_offset(header.base_offset)
        # The largest timestamp left: the last time-index entry covers offsets up to its own;
        # scan the (short) stretch of headers after it.
        last = ti.last_entry()
        ts, off = last if last is not None else (-1, self.base_offset)
        _, scan_from = oi.lookup(off + 1 if last is not None else self.base_offset)
        since = 0
        for _p, h in self.iter_headers(scan_from, pos, chunk=LOOKUP_CHUNK):
            if h.max_timestamp > ts:
                ts, off = h.max_timestamp, h.base_offset + h.last_offset_delta
            since += h.size
        self._max_timestamp = (ts, off)
        self._bytes_since_index_entry = since
        if pos == 0:
            self._rolling_timestamp = None
        return removed

    def recover(self, accept: Callable[[BatchHeader], str | None]) -> RecoveryResult:
        """Re-scan the whole file checking every CRC (and `accept`, which checks offsets and
        epochs), cut it at the first bad or torn batch, and rebuild both indexes."""
        file_size = os.fstat(self._handles.fd(self.log_path)).st_size
        oi = OffsetIndex(self.base_offset, self.config.max_index_entries)
        ti = TimeIndex(self.base_offset, self.config.max_time_index_entries)
        self._offset_index, self._time_index = oi, ti
        valid_end = 0
        problem: str | None = None

        def checked() -> Iterator[tuple[int, BatchHeader]]:
            nonlocal valid_end, problem
            try:
                for pos, header in self.iter_headers(0, file_size, verify_crc=True):
                    reason = accept(header)
                    if reason is not None:
                        problem = f"{reason} (at byte {pos})"
                        return
                    valid_end = pos + header.size
                    yield pos, header
            except CorruptRecordBatchError as exc:
                problem = str(exc)

        self.size = file_size
        self._index_batches(checked(), oi, ti)
        truncated = file_size - valid_end
        if truncated:
            os.ftruncate(self._handles.fd(self.log_path), valid_end)
        self.size = valid_end
        self._file_may_be_longer = False
        self._rewrite_index_files()
        if file_size:
            # Recovered bytes, or a cut, that the next flush makes durable. An empty segment
            # has neither (its rewritten indexes are empty): fsyncing it at the next flush was
            # 75,000 fsyncs in the clean shutdown of a broker restarted after a SIGKILL with
            # 25,000 partitions.
            self.dirty = True
        assert self.next_offset is not None
        return RecoveryResult(truncated, self.next_offset, problem)

    def close(self) -> None:
        """Final time-index entry, index entries to disk, trim, and give back descriptors."""
        try:
            if self._offset_index is not None:
                self.finalize_time_index()
                self.persist_indexes()
            if self._file_may_be_longer:
                os.ftruncate(self._handles.fd(self.log_path), self.size)
                self._file_may_be_longer = False
        finally:
            self.release_handles()

    def release_handles(self) -> None:
        for path in (self.log_path, self.index_path, self.time_index_path):
            self._handles.close(path)

    def delete(self) -> None:
        self.release_handles()
        for path in (self.log_path, self.index_path, self.time_index_path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path!r}, size={self.size})"


@contextlib.contextmanager
def _naming(path: str) -> Iterator[None]:
    """Attach `path` to OSErrors raised by positional I/O (which knows no file name), so
    storage errors can say which file failed."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            exc.filename = path
        raise


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""


def _reason(exc: CorruptRecordBatchError) -> str:
    """The message without the buffer-relative ' (at byte N)' suffix."""
    text = str(exc)
    if exc.position is not None:
        suffix = f" (at byte {exc.position})"
        if text.endswith(suffix):
            return text[: -len(suffix)]
    return text
