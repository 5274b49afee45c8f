"""Sparse offset and time indexes, kept in memory and appended to their files in batches.

Kafka's formats (big-endian):
    .index      relative offset int32, file position int32    (8 bytes an entry)
    .timeindex  timestamp int64, relative offset int32         (12 bytes an entry)

An offset-index entry (o, p) says "the batch at byte p has last offset o"; a lookup gives the
last entry at or below the target and the caller scans batch headers forward from there.
A time-index entry (t, o) says "t is the largest timestamp in this segment up to offset o".
Entries are added in memory on append and reach the file on flush, roll and close; a segment
the recovery scan visits has its indexes rebuilt, so a lost tail of entries costs nothing.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_right
from typing import Self

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _SparseIndex:
    """Two columns of fixed-size entries, kept in memory; `persisted` of them are in the file.

    Subclasses name the columns; the relative-offset column is the one truncation cuts by.
    """

    _ENTRY: struct.Struct
    _TYPECODES: tuple[str, str]
    entry_size: int

    def __init__(self, base_offset: int, max_entries: int) -> None:
        self.base_offset = base_offset
        self.max_entries = max_entries
        self._first = array(self._TYPECODES[0])
        self._second = array(self._TYPECODES[1])
        self.persisted = 0
        """Entries already in the file."""
        self.trim_needed = False
        """The file may hold bytes past `persisted` entries (a truncation or a failed write)."""

    @property
    def relative_offsets(self) -> array[int]:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._first)

    @classmethod
    def from_bytes(cls, data: bytes, base_offset: int, max_entries: int) -> Self:
        index = cls(base_offset, max_entries)
        usable = len(data) - len(data) % cls.entry_size
        for first, second in cls._ENTRY.iter_unpack(data[:usable]):
            index._first.append(first)
            index._second.append(second)
        index.persisted = len(index)
        index.trim_needed = usable != len(data)
        return index

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries for offsets >= `offset`."""
        keep = bisect_right(self.relative_offsets, offset - self.base_offset - 1)
        del self._first[keep:]
        del self._second[keep:]
        if keep < self.persisted:
            self.persisted = keep
            self.trim_needed = True

    def unpersisted_bytes(self) -> bytes:
        return self._pack(self.persisted)

    def to_bytes(self) -> bytes:
        return self._pack(0)

    def _pack(self, start: int) -> bytes:
        first, second, pack = self._first, self._second, self._ENTRY.pack
        return b"".join(pack(first[i], second[i]) for i in range(start, len(first)))


class OffsetIndex(_SparseIndex):
    _ENTRY = _OFFSET_ENTRY
    _TYPECODES = ("i", "i")
    entry_size = _OFFSET_ENTRY.size

    @property
    def relative_offsets(self) -> array[int]:
        return self._first

    @property
    def positions(self) -> array[int]:
        return self._second

    def append(self, offset: int, position: int) -> None:
        self._first.append(offset - self.base_offset)
        self._second.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= `offset`, else (base, 0)."""
        i = bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[i], self.positions[i]

    def last_entry(self) -> tuple[int, int]:
        if not self.relative_offsets:
            return self.base_offset, 0
        return self.base_offset + self.relative_offsets[-1], self.positions[-1]

    def is_sane(self, segment_size: int) -> bool:
        """Offsets strictly increasing, positions increasing and inside the segment."""
        rel, pos = self.relative_offsets, self.positions
        for i in range(len(rel)):
            if rel[i] < 0 or pos[i] < 0 or pos[i] >= max(segment_size, 1):
                return False
            if i and (rel[i] <= rel[i - 1] or pos[i] <= pos[i - 1]):
                return False
        return True


class TimeIndex(_SparseIndex):
    _ENTRY = _TIME_ENTRY
    _TYPECODES = ("q", "i")
    entry_size = _TIME_ENTRY.size

    @property
    def timestamps(self) -> array[int]:
        return self._first

    @property
    def relative_offsets(self) -> array[int]:
        return self._second

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) when it moves the largest timestamp forward."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        rel = offset - self.base_offset
        if self.relative_offsets and rel < self.relative_offsets[-1]:
            return
        self.timestamps.append(timestamp)
        self.relative_offsets.append(rel)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= `timestamp`, else
        (-1, base offset)."""
        i = bisect_right(self.timestamps, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self.timestamps[i], self.base_offset + self.relative_offsets[i]

    def last_entry(self) -> tuple[int, int] | None:
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.base_offset + self.relative_offsets[-1]

    def is_sane(self, next_offset: int) -> bool:
        ts, rel = self.timestamps, self.relative_offsets
        for i in range(len(ts)):
            if rel[i] < 0 or self.base_offset + rel[i] >= max(next_offset, self.base_offset + 1):
                return False
            if i and (ts[i] <= ts[i - 1] or rel[i] < rel[i - 1]):
                return False
        return True
