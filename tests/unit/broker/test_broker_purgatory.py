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
