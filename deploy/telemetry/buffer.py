"""The in-memory side of the shipper: a bounded queue the log tee and the metrics loop fill.

`offer()` never blocks and never awaits, so it is safe on any hot path and from any thread
(kazoo's, trio's worker threads): a deque append under the GIL. At the bound the new record is
refused and counted per topic (`dropped`), never silently lost; the shipper reports the counts
(trioka_telemetry_records_dropped_total and one warning per metrics interval).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_RECORDS = 20_000
"""About 20 s of a busy process's log events at 1,000 a second; a few MB of dicts."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One record waiting to be shipped: its topic, its key (the source) and its JSON object."""

    topic: str
    key: str
    record: Mapping[str, Any]


class TelemetryBuffer:
    """Bounded FIFO of entries. `offer` from anywhere; `take` from the shipper's task."""

    def __init__(self, max_records: int = DEFAULT_MAX_RECORDS) -> None:
        if max_records < 1:
            raise ValueError(f"max_records must be at least 1, got {max_records}")
        self.max_records = max_records
        self._entries: deque[Entry] = deque()
        self.dropped: dict[str, int] = {}
        """Records refused at the bound, per topic, since the start."""

    def __len__(self) -> int:
        return len(self._entries)

    def offer(self, entry: Entry) -> bool:
        """Queue `entry`; False (and counted in `dropped`) when the buffer is full."""
        if len(self._entries) >= self.max_records:
            self.dropped[entry.topic] = self.dropped.get(entry.topic, 0) + 1
            return False
        self._entries.append(entry)
        return True

    def take(self, max_records: int) -> list[Entry]:
        """Up to `max_records` of the oldest entries, removed from the buffer."""
        out: list[Entry] = []
        entries = self._entries
        while entries and len(out) < max_records:
            out.append(entries.popleft())
        return out
