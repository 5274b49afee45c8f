"""FetchPurgatory: events set by notify, and the partitions that fired collected per watch; the
Fetch long poll and the acks=all wait built on it."""

from __future__ import annotations

from dataclasses import dataclass

import trio
import trio.testing

from broker.purgatory import FetchPurgatory, await_replication, long_poll
from protocol.errors import ErrorCode
from protocol.names import TopicPartition

A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def test_fired_collects_every_notified_partition_until_unwatch() -> None:
    purgatory = FetchPurgatory()
    fired: set[TopicPartition] = set()
    event = purgatory.watch([A, B], fired)
    purgatory.notify(C)  # not watched
    assert not event.is_set() and fired == set()
    purgatory.notify(A)
    assert event.is_set() and fired == {A}
    purgatory.notify(B)  # before the waiter ran: still collected
    assert fired == {A, B}
    purgatory.unwatch([A, B], event)
    purgatory.notify(A)
    assert fired == {A, B}
    assert purgatory.watched == 0


def test_watch_without_fired_and_several_waiters() -> None:
    purgatory = FetchPurgatory()
    plain = purgatory.watch([A])
    fired: set[TopicPartition] = set()
    collecting = purgatory.watch([A, C], fired)
    purgatory.notify(A)
    assert plain.is_set() and collecting.is_set() and fired == {A}
    purgatory.unwatch([A], plain)
    purgatory.unwatch([A, C], collecting)
    assert purgatory.watched == 0


def test_wake_all_sets_every_event_and_later_watches_at_once() -> None:
    purgatory = FetchPurgatory()
    fired: set[TopicPartition] = set()
    event = purgatory.watch([A], fired)
    purgatory.wake_all()
    assert event.is_set() and fired == set() and purgatory.closed
    assert purgatory.watch([B], set()).is_set()


def test_rearm_keeps_the_partitions_watched_with_a_fresh_event() -> None:
    purgatory = FetchPurgatory()
    fired: set[TopicPartition] = set()
    first = purgatory.watch([A, B], fired)
    purgatory.notify(A)
    assert first.is_set() and fired == {A}
    fired.clear()
    second = purgatory.rearm(first)
    assert not second.is_set()
    purgatory.notify(B)  # still watched, no second watch() needed
    assert second.is_set() and fired == {B}
    # Something already collected: the rearmed event is set at once (no lost wake-up).
    third = purgatory.rearm(second)
    assert third.is_set()
    purgatory.unwatch([A, B], third)
    assert purgatory.watched == 0
    assert purgatory.rearm(third).is_set()  # unknown (unwatched) event: nothing to wait for


def test_rearm_after_wake_all_is_set() -> None:
    purgatory = FetchPurgatory()
    event = purgatory.watch([A], set())
    purgatory.wake_all()
    assert purgatory.rearm(event).is_set()


# -- long_poll: the Fetch wait ------------------------------------------------------------------


async def test_long_poll_rereads_only_the_notified_partitions_in_session_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    purgatory = FetchPurgatory()
    rereads: list[list[int]] = []

    async def appends() -> None:
        await trio.sleep(1)
        purgatory.notify(C)  # position 2
        purgatory.notify(A)  # position 0
        await trio.sleep(1)
        purgatory.notify(B)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(appends)
        await long_poll(
            purgatory,
            [A, B, C],
            trio.current_time() + 10,
            satisfied=lambda: len(rereads) == 2,
            reread=rereads.append,
        )
    assert rereads == [[0, 2], [1]]
    assert purgatory.watched == 0 and purgatory.waiting == 0


async def test_long_poll_ends_at_its_deadline_or_at_shutdown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    purgatory = FetchPurgatory()
    start = trio.current_time()
    await long_poll(purgatory, [A], start + 2, lambda: False, lambda _: None)
    assert trio.current_time() == start + 2
    purgatory.wake_all()
    await long_poll(purgatory, [A], start + 100, lambda: False, lambda _: None)
    assert trio.current_time() == start + 2  # closed: no wait at all


# -- await_replication: the acks=all wait -------------------------------------------------------


@dataclass
class FakeState:
    """The partition state an acks=all append waits on: done once the HW reaches the offset."""

    high_watermark: int = 0
    is_leader: bool = True
    maximal_isr: tuple[int, ...] = (1, 2)
    min_insync_replicas: int = 1

    def effective_min_isr(self) -> int:
        return self.min_insync_replicas

    def check_enough_replicas_reach_offset(self, required: int) -> tuple[bool, ErrorCode]:
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return self.high_watermark >= required, ErrorCode.NONE


@dataclass
class FakePartition:
    state: FakeState


async def test_await_replication_answers_once_the_hw_passes_or_the_leadership_moves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    purgatory = FetchPurgatory()
    a, b = FakePartition(FakeState()), FakePartition(FakeState())
    hosted: dict[TopicPartition, object] = {A: a, B: b}

    async def progress() -> None:
        await trio.sleep(1)
        a.state.high_watermark = 5
        purgatory.notify(A)
        await trio.sleep(1)
        del hosted[B]  # B's leadership moved (the partition was removed)
        purgatory.notify(B)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(progress)
        errors = await await_replication(
            purgatory,
            hosted.get,  # type: ignore[arg-type]
            {A: (a, 5), B: (b, 3)},  # type: ignore[dict-item]
            timeout_ms=30_000,
        )
    assert errors == {
        B: (
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
            f"{B}: this broker stopped leading the partition before the write was replicated",
        )
    }
    assert purgatory.watched == 0


async def test_await_replication_times_out(autojump_clock: trio.testing.MockClock) -> None:
    purgatory = FetchPurgatory()
    a = FakePartition(FakeState())
    start = trio.current_time()
    errors = await await_replication(
        purgatory,
        {A: a}.get,  # type: ignore[arg-type]
        {A: (a, 1)},  # type: ignore[dict-item]
        timeout_ms=1500,
    )
    assert errors == {
        A: (
            ErrorCode.REQUEST_TIMED_OUT,
            f"{A}: not replicated to the ISR within 1500 ms (acks=all)",
        )
    }
    assert trio.current_time() == start + 1.5
