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

import trio

from protocol.names import TopicPartition


class FetchPurgatory:
    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[trio.Event]] = {}
        self._fired: dict[trio.Event, set[TopicPartition]] = {}
        self._closed = False

    def watch(
        self, partitions: Iterable[TopicPartition], fired: set[TopicPartition] | None = None
    ) -> trio.Event:
        """An event set at the next append to any of `partitions`. Call `unwatch` after.
        `fired`, when given, collects every watched partition notified until `unwatch`, so a
        fetch of thousands of partitions re-reads only those."""
        event = trio.Event()
        if self._closed:
            event.set()
            return event
        for tp in partitions:
            self._watchers.setdefault(tp, set()).add(event)
        if fired is not None:
            self._fired[event] = fired
        return event

    def unwatch(self, partitions: Iterable[TopicPartition], event: trio.Event) -> None:
        self._fired.pop(event, None)
        for tp in partitions:
            watchers = self._watchers.get(tp)
            if watchers is not None:
                watchers.discard(event)
                if not watchers:
                    del self._watchers[tp]

    def notify(self, tp: TopicPartition) -> None:
        watchers = self._watchers.pop(tp, None)
        if watchers:
            for event in watchers:
                fired = self._fired.get(event)
                if fired is not None:
                    fired.add(tp)
                event.set()

    def wake_all(self) -> None:
        """Answer every waiting fetch now and from now on (shutdown)."""
        self._closed = True
        self._fired.clear()
        watchers, self._watchers = self._watchers, {}
        for events in watchers.values():
            for event in events:
                event.set()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def watched(self) -> int:
        return len(self._watchers)
