"""The simulation's time-ordered event heap.

Events at the same virtual millisecond run in the order they were pushed (a sequence number
breaks ties), so a run depends on the seed alone, never on heap or dict ordering.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Deliver:
    """A message from `src` reaches `dst` (unless a partition now blocks that direction)."""

    src: int
    dst: int
    message: Any


@dataclass(frozen=True, slots=True)
class Tick:
    """A node's next deadline. The simulation drops a stale tick (not counted as an event):
    one from an earlier incarnation (the node crashed since) or whose time is no longer the
    node's scheduled deadline."""

    node: int
    incarnation: int


@dataclass(frozen=True, slots=True)
class Propose:
    """A client asks the node it believes is leader to append one entry with `data`."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Crash:
    """A node process dies: its un-flushed log tail is lost, its quorum state file is kept.
    `torn` means it died inside a Ready, after the append and before the flush."""

    node: int
    torn: bool = False


@dataclass(frozen=True, slots=True)
class Restart:
    node: int


@dataclass(frozen=True, slots=True)
class Resign:
    """The leader of the highest epoch resigns gracefully (EndQuorumEpoch), as on shutdown."""


@dataclass(frozen=True, slots=True)
class TakeSnapshot:
    """A random live node snapshots its state machine at a random applied offset and, if
    `delete_log`, drops its log below its latest snapshot."""

    delete_log: bool


@dataclass(frozen=True, slots=True)
class Partition:
    """Block messages from every node in `a` to every node in `b` (and back if symmetric)."""

    a: frozenset[int]
    b: frozenset[int]
    symmetric: bool


@dataclass(frozen=True, slots=True)
class Heal:
    """Remove every partition; with `restart_all`, also restart every crashed node."""

    restart_all: bool = False


Event = Deliver | Tick | Propose | Crash | Restart | Resign | TakeSnapshot | Partition | Heal


class EventQueue:
    """A min-heap of (at_ms, seq, event); `seq` makes equal times first-in first-out."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Event]] = []
        self._seq = 0

    def push(self, at_ms: int, event: Event) -> None:
        if at_ms < 0:
            raise ValueError(f"event time must be >= 0, got {at_ms} for {event!r}")
        heapq.heappush(self._heap, (at_ms, self._seq, event))
        self._seq += 1

    def pop(self) -> tuple[int, Event]:
        at_ms, _, event = heapq.heappop(self._heap)
        return at_ms, event

    def __len__(self) -> int:
        return len(self._heap)
