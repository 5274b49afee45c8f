"""FetchPurgatory: events set by notify, and the partitions that fired collected per watch."""

from __future__ import annotations

from broker.purgatory import FetchPurgatory
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
