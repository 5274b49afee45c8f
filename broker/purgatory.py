"""The purgatories: long polls wait here until an append to a partition they read wakes them
(Kafka's DelayedFetch), and acks=all produces until the HW of their partitions moves (Kafka's
DelayedProduce); one `FetchPurgatory` instance each.

`long_poll` is the Fetch wait: it watches the session's partitions and waits under the fetch's
deadline (`fetch.max.wait.ms`); `notify(tp)` (after an append, or when the HW moves) wakes every
fetch watching that partition, which re-reads the partitions that fired and re-checks
`fetch.min.bytes`. `await_replication` is the acks=all wait. `wake_all()` releases every waiter
at shutdown so in-flight long polls answer at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice

import trio

from broker.metrics import awaiting_remote
from broker.partitions import Partition
from protocol.errors import ErrorCode
from protocol.names import TopicPartition


@dataclass(slots=True, eq=False)
class _Waiter:
    event: trio.Event
    fired: set[TopicPartition] | None


JOURNAL_CAPACITY = 100_000
"""Notifications the change journal keeps; a reader further behind reads everything."""


class FetchPurgatory:
    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[_Waiter]] = {}
        self._waiters: dict[trio.Event, _Waiter] = {}
        self._closed = False
        self._journal: deque[TopicPartition] = deque(maxlen=JOURNAL_CAPACITY)
        self._journal_end = 0
        self._changed = trio.Event()

    # -- the change journal: what a follower's fetch session reads instead of watching ------

    @property
    def mark(self) -> int:
        """The journal's position now: `changed_since(mark)` later lists what came after."""
        return self._journal_end

    def changed_since(self, mark: int) -> list[TopicPartition] | None:
        """The partitions notified since `mark` (repeats possible, any order); None when the
        journal no longer reaches back that far (or `mark` is not one of its positions)."""
        count = self._journal_end - mark
        if count < 0 or count > len(self._journal):
            return None
        return list(islice(reversed(self._journal), count))

    def next_change(self) -> trio.Event:
        """An event set at the next notification (of any partition), or set already if the
        purgatory closed. Check `mark` after taking it, then wait: nothing is missed."""
        if self._changed.is_set() and not self._closed:
            self._changed = trio.Event()
        return self._changed

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
        """An append to `tp`, a move of its HW, ISR or leadership: whatever may change what a
        fetch of it answers."""
        self._journal.append(tp)
        self._journal_end += 1
        self._changed.set()
        watchers = self._watchers.get(tp)
        if watchers:
            for waiter in watchers:
                if waiter.fired is not None:
                    waiter.fired.add(tp)
                waiter.event.set()

    def wake_all(self) -> None:
        """Answer every waiting fetch now and from now on (shutdown)."""
        self._closed = True
        self._changed.set()
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


async def long_poll(
    purgatory: FetchPurgatory,
    partitions: Sequence[TopicPartition],
    deadline: float,
    satisfied: Callable[[], bool],
    reread: Callable[[list[int]], None],
) -> None:
    """The Fetch long poll (Kafka's DelayedFetch): until `satisfied()` (enough bytes, an error,
    no wait asked), the trio `deadline` or shutdown, wait for appends or HW moves to any of
    `partitions` and hand `reread` the positions in `partitions` of those notified, in that
    order (the fetch session's), so that the fetch reads only those again."""
    fired: set[TopicPartition] = set()
    event: trio.Event | None = None
    order: dict[TopicPartition, int] | None = None
    try:
        while not (satisfied() or trio.current_time() >= deadline or purgatory.closed):
            # Watched once per request, re-armed after each wake-up: walking the ~8,300
            # partitions of a follower session for every append to any of them was O(n).
            if event is None:
                awaiting_remote()  # RemoteTimeMs: the long poll
                event = purgatory.watch(partitions, fired)
            else:
                event = purgatory.rearm(event)
            with trio.move_on_at(deadline):
                await event.wait()
            # Only partitions an append or a HW move notified can read differently: a
            # follower session of 8,000 partitions was read in full again for each append
            # to any of them (bench/run_failover.py at 25,000 partitions).
            if not fired:
                continue
            if order is None:  # session order, built at the first wake-up only
                order = {tp: i for i, tp in enumerate(partitions)}
            positions = sorted(order[tp] for tp in fired if tp in order)
            fired.clear()
            if positions:
                reread(positions)
    finally:
        if event is not None:
            purgatory.unwatch(partitions, event)


async def await_replication(
    purgatory: FetchPurgatory,
    hosted: Callable[[TopicPartition], Partition | None],
    waiting: Mapping[TopicPartition, tuple[Partition, int]],
    timeout_ms: int,
) -> dict[TopicPartition, tuple[ErrorCode, str]]:
    """The acks=all wait (Kafka's DelayedProduce): until the HW passes each append (`waiting`:
    the partition appended to and the offset after the append), the leadership moves (`hosted(tp)`,
    the partition this broker hosts now, is another or none) or `timeout_ms`; the errors of
    the appends that failed."""
    awaiting_remote()  # RemoteTimeMs: the acks=all purgatory
    errors: dict[TopicPartition, tuple[ErrorCode, str]] = {}
    pending = dict(waiting)
    deadline = trio.current_time() + max(timeout_ms, 0) / 1000
    while True:
        for tp, (partition, required) in list(pending.items()):
            if hosted(tp) is not partition:
                done, code = True, ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                done, code = partition.state.check_enough_replicas_reach_offset(required)
            if done:
                del pending[tp]
                if code != ErrorCode.NONE:
                    errors[tp] = (code, _replication_message(code, tp, partition))
        if not pending or trio.current_time() >= deadline or purgatory.closed:
            break
        event = purgatory.watch(pending)
        try:
            with trio.move_on_at(deadline):
                await event.wait()
        finally:
            purgatory.unwatch(pending, event)
    for tp in pending:
        errors[tp] = (
            ErrorCode.REQUEST_TIMED_OUT,
            f"{tp}: not replicated to the ISR within {timeout_ms} ms (acks=all)",
        )
    return errors


def _replication_message(code: ErrorCode, tp: TopicPartition, partition: Partition) -> str:
    state = partition.state
    if code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        return (
            f"{tp}: appended, but the ISR {list(state.maximal_isr)} shrank below the "
            f"{state.effective_min_isr()} in-sync replicas required (min.insync.replicas="
            f"{state.min_insync_replicas})"
        )
    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return f"{tp}: this broker stopped leading the partition before the write was replicated"
    return f"{tp}: {code.name}"
