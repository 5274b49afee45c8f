"""Append batching with a linger, like KRaft's BatchAccumulator: proposals get their offsets
at once and reach the log together when the linger expires or the batch is full."""

from __future__ import annotations

from raft.log_store import Entry


class BatchAccumulator:
    def __init__(self, epoch: int, next_offset: int, linger_ms: int, max_entries: int) -> None:
        self.epoch = epoch
        self._next_offset = next_offset
        self._linger_ms = linger_ms
        self._max_entries = max_entries
        self._pending: list[Entry] = []
        self._drain_at: int | None = None

    def append(self, records: list[bytes], now_ms: int) -> int:
        """Queue records; returns the offset of the last one."""
        for data in records:
            self._pending.append(Entry(self._next_offset, self.epoch, data))
            self._next_offset += 1
        if self._drain_at is None:
            self._drain_at = now_ms + self._linger_ms
        return self._next_offset - 1

    def ready_to_drain(self, now_ms: int) -> bool:
        return bool(self._pending) and (
            len(self._pending) >= self._max_entries
            or (self._drain_at is not None and now_ms >= self._drain_at)
        )

    def drain(self) -> list[Entry]:
        out, self._pending, self._drain_at = self._pending, [], None
        return out

    def pending_offsets(self) -> tuple[int, int] | None:
        """First and last offset still queued (None when empty)."""
        if not self._pending:
            return None
        return self._pending[0].offset, self._pending[-1].offset

    @property
    def deadline_ms(self) -> int | None:
        return self._drain_at if self._pending else None
