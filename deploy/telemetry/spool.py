"""The local spool: records the cluster could not take, in append-only JSONL files, drained later.

Layout of a spool directory (one per process, `trioka.telemetry.spool.dir`, default
`<log.dirs[0]>/telemetry-spool`, a controller's `<metadata.log.dir>/telemetry-spool`):

    00000000000000000000.jsonl     segments, oldest first; one record per line:
    00000000000000000001.jsonl       {"topic": "__trioka_logs", "key": "broker-1", "value": {...}}
    drain-position.json            {"segment": 0, "offset": 8123}: what the cluster has taken

Crash safety without fsync on every append: a line is written whole by one write() and only
appended; a process that starts never appends to an older segment (its last line may be torn by
a crash) but opens a new one. When draining, a line that does not end in a newline or is not a
JSON record is skipped and reported (`SpoolBatch.skipped`), never fatal. The drain position is
replaced atomically (write + rename) after the records before it were acknowledged; a crash in
between sends them again (at-least-once).

Bound: the segment files together stay under `max_bytes`; a record that does not fit is refused
and counted as dropped (the oldest records are kept: they tell how an outage began). Fully
drained segments are deleted, so an empty spool has no segment files.

Plain synchronous file code (small appends and reads, like storage/); the trio shipper calls it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from protocol.telemetry import SPOOL_SEGMENT_SUFFIX

SEGMENT_SUFFIX = SPOOL_SEGMENT_SUFFIX
POSITION_FILE = "drain-position.json"
DEFAULT_SEGMENT_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class SpoolRecord:
    """One record: topic, key and the value as JSON object text (no newline in it)."""

    topic: str
    key: str
    value: str

    def line(self) -> bytes:
        return (
            f'{{"topic":{json.dumps(self.topic)},"key":{json.dumps(self.key)},'
            f'"value":{self.value}}}\n'
        ).encode()

    @classmethod
    def parse(cls, line: bytes) -> SpoolRecord:
        """A spooled line back into a record; ValueError names what is wrong with it."""
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise ValueError("not a JSON object")
        topic, key, value = obj.get("topic"), obj.get("key"), obj.get("value")
        if not isinstance(topic, str) or not isinstance(key, str) or not isinstance(value, dict):
            raise ValueError("needs a string topic, a string key and an object value")
        return cls(topic, key, json.dumps(value, separators=(",", ":")))


@dataclass(frozen=True, order=True, slots=True)
class SpoolPosition:
    """Where draining stands: a segment number and a byte offset in it."""

    segment: int
    offset: int


@dataclass(slots=True)
class SpoolBatch:
    """What `read` found: records in spool order, the position after them, and the lines it
    skipped (torn or not a record), each described for the warning."""

    records: list[SpoolRecord]
    end: SpoolPosition
    skipped: list[str] = field(default_factory=list)


@dataclass(slots=True)
class AppendResult:
    spooled: dict[str, int] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)


def _count(counts: dict[str, int], topic: str) -> None:
    counts[topic] = counts.get(topic, 0) + 1


class Spool:
    """One process's spool directory. `open()` first; then `append`, `read`, `commit`."""

    def __init__(
        self, directory: str | Path, max_bytes: int, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES
    ) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes
        self._sizes: dict[int, int] = {}
        """Segment number -> its size in bytes, oldest first."""
        self._active: int | None = None
        """The segment this process appends to (None until its first append)."""
        self._position = SpoolPosition(0, 0)

    # -- state --------------------------------------------------------------------------------

    def open(self) -> None:
        """Create the directory if needed; find the segments and the drain position."""
        self.directory.mkdir(parents=True, exist_ok=True)
        sizes = {}
        for path in self.directory.iterdir():
            stem = path.name.removesuffix(SEGMENT_SUFFIX)
            if path.name.endswith(SEGMENT_SUFFIX) and stem.isascii() and stem.isdigit():
                sizes[int(stem)] = path.stat().st_size
        self._sizes = dict(sorted(sizes.items()))
        self._position = self._read_position()

    @property
    def size_bytes(self) -> int:
        return sum(self._sizes.values())

    @property
    def pending(self) -> bool:
        """Whether records may wait to be drained."""
        pos = self._position
        return any(
            seg > pos.segment or (seg == pos.segment and size > pos.offset)
            for seg, size in self._sizes.items()
        )

    def _path(self, segment: int) -> Path:
        return self.directory / f"{segment:020d}{SEGMENT_SUFFIX}"

    def _read_position(self) -> SpoolPosition:
        first = next(iter(self._sizes), 0)
        try:
            obj = json.loads((self.directory / POSITION_FILE).read_text())
            pos = SpoolPosition(int(obj["segment"]), int(obj["offset"]))
        except (OSError, ValueError, KeyError, TypeError):
            return SpoolPosition(first, 0)
        if pos.segment not in self._sizes:
            return SpoolPosition(first, 0)
        return pos

    # -- appending ----------------------------------------------------------------------------

    def append(self, records: Iterable[SpoolRecord]) -> AppendResult:
        """Append records in order; what would pass `max_bytes` is refused (`dropped`)."""
        result = AppendResult()
        total = self.size_bytes
        out: list[bytes] = []
        for record in records:
            line = record.line()
            if total + len(line) > self.max_bytes:
                _count(result.dropped, record.topic)
                continue
            total += len(line)
            out.append(line)
            _count(result.spooled, record.topic)
        if out:
            self._write(out)
        return result

    def _write(self, lines: Sequence[bytes]) -> None:
        start = 0
        while start < len(lines):
            segment = self._segment_for_append()
            room = self.segment_bytes - self._sizes[segment]
            end, size = start, 0
            # At least one line per segment, even one larger than segment_bytes.
            while end < len(lines) and (end == start or size + len(lines[end]) <= room):
                size += len(lines[end])
                end += 1
            with self._path(segment).open("ab") as f:
                f.write(b"".join(lines[start:end]))
            self._sizes[segment] += size
            start = end

    def _segment_for_append(self) -> int:
        active = self._active
        if active is None or self._sizes.get(active, 0) >= self.segment_bytes:
            # Numbers only grow (readers, analytics/ too, take segments in name order).
            active = max([*self._sizes, self._position.segment - 1]) + 1
            self._path(active).touch()
            self._sizes[active] = 0
            self._active = active
            if len(self._sizes) == 1:
                self._position = SpoolPosition(active, 0)
        return active

    # -- draining -----------------------------------------------------------------------------

    def read(self, max_records: int) -> SpoolBatch:
        """Up to `max_records` records from the drain position on (nothing is consumed until
        `commit(batch.end)`)."""
        pos = self._position
        batch = SpoolBatch([], pos)
        for segment in [s for s in self._sizes if s >= pos.segment]:
            offset = pos.offset if segment == pos.segment else 0
            offset = self._read_segment(segment, offset, max_records, batch)
            batch.end = SpoolPosition(segment, offset)
            if len(batch.records) >= max_records or offset < self._sizes[segment]:
                break
        return batch

    def _read_segment(self, segment: int, offset: int, max_records: int, batch: SpoolBatch) -> int:
        path = self._path(segment)
        with path.open("rb") as f:
            f.seek(offset)
            while len(batch.records) < max_records and offset < self._sizes[segment]:
                line = f.readline()
                if not line:
                    break
                where = f"{path.name} at byte {offset}"
                offset += len(line)
                if not line.endswith(b"\n"):
                    batch.skipped.append(f"{where}: torn line ({len(line)} bytes, no newline)")
                    continue
                try:
                    batch.records.append(SpoolRecord.parse(line))
                except ValueError as exc:
                    batch.skipped.append(f"{where}: {exc}")
        return offset

    def commit(self, end: SpoolPosition) -> None:
        """Everything before `end` reached the cluster: delete drained segments and persist
        the position (atomically)."""
        for segment in [s for s in self._sizes if s < end.segment]:
            self._delete(segment)
        if end.segment in self._sizes and end.offset >= self._sizes[end.segment]:
            later = [s for s in self._sizes if s > end.segment]
            self._delete(end.segment)
            end = SpoolPosition(later[0], 0) if later else SpoolPosition(end.segment + 1, 0)
        self._position = end
        position_file = self.directory / POSITION_FILE
        if not self._sizes:
            position_file.unlink(missing_ok=True)
            return
        tmp = position_file.with_suffix(".tmp")
        tmp.write_text(json.dumps({"segment": end.segment, "offset": end.offset}))
        os.replace(tmp, position_file)

    def _delete(self, segment: int) -> None:
        self._path(segment).unlink(missing_ok=True)
        del self._sizes[segment]
        if self._active == segment:
            self._active = None
