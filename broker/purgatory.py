"""The fetch purgatory: long polls wait here until an append to a partition they read wakes them.
The same class parks acks=all produces until the HW of their partitions moves (Kafka's
DelayedProduce purgatory).

A waiting Fetch calls `watch(partitions)` and waits on the returned event under its own
deadline (`fetch.max.wait.ms`); `notify(tp)` (after an append, or when the HW moves) sets the
events of every fetch watching that partition, and the fetch then re-checks `fetch.min.bytes`.
`wake_all()` releases every waiter at shutdown so in-flight long polls answer at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import trio

from protocol.names import TopicPartition


@dataclass(slots=True, eq=False)
class _Waiter:
    event: trio.Event
    fired: set[TopicPartition] | None


class FetchPurgatory:
    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[_Waiter]] = {}
        self._waiters: dict[trio.Event, _Waiter] = {}
        self._closed = False

    def watch(
        self, partitions: Iterable[TopicPartition], fired: set[TopicPartition] | None = None
    ) -> trio.Event:
        """An event set at the next append to any of `partitions`. Call `unwatch` after.
        `fired`, when given, collects every watched partition notified until `unwatch`, so a
        fetch of thousands of partitions re-reads only those. The partitions stay watched
        until `unwatch`: `rearm` gives a fresh event for the next wait without walking them."""
        event = trio.Event()
        if self._closed:
            event.set()
            return event
        waiter = _Waiter(event, fired)
        for tp in partitions:
            self._watchers.setdefault(tp, set()).add(waiter)
        self._waiters[event] = waiter
        return event

    def rearm(self, event: trio.Event) -> trio.Event:
        """The event for the next wait of the watch that returned `event` (same partitions,
        same `fired` set): O(1), where a new watch costs one step per partition (a follower
        session has thousands). Already set when `fired` is not empty or the purgatory closed."""
        fresh = trio.Event()
        waiter = self._waiters.pop(event, None)
        if waiter is None or self._closed:
            fresh.set()
            return fresh
        waiter.event = fresh
        self._waiters[fresh] = waiter
        if waiter.fired:
            fresh.set()
        return fresh

    def unwatch(self, partitions: Iterable[TopicPartition], event: trio.Event) -> None:
        waiter = self._waiters.pop(event, None)
        if waiter is None:
            return
        for tp in partitions:
            watchers = self._watchers.get(tp)
            if watchers is not None:
                watchers.discard(waiter)
                if not watchers:
                    del self._watchers[tp]

    def notify(self, tp: TopicPartition) -> None:
        watchers = self._watchers.get(tp)
        if watchers:
            for waiter in watchers:
                if waiter.fired is not None:
                    waiter.fired.add(tp)
                waiter.event.set()

    def wake_all(self) -> None:
        """Answer every waiting fetch now and from now on (shutdown)."""
        self._closed = True
        self._watchers = {}
        waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.event.set()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def waiting(self) -> int:
        """Requests parked now (Kafka's PurgatorySize)."""
        return len(self._waiters)

    @property
    def watched(self) -> int:
        return len(self._watchers)
