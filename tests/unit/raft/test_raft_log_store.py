"""MemoryLogStore: the LogStore port's semantics (epoch cache, flush/crash, truncation,
reads, snapshots). A disk store can run the same table against itself."""

from __future__ import annotations

import pytest

from raft.log_store import (
    NO_EPOCH,
    Entry,
    LogStore,
    LogStoreError,
    MemoryLogStore,
    OffsetAndEpoch,
    SnapshotId,
)


def _store(epochs: list[int]) -> MemoryLogStore:
    """A store holding one entry per item of `epochs` (offsets 0..n-1)."""
    store = MemoryLogStore()
    store.append([Entry(i, e, b"x%d" % i) for i, e in enumerate(epochs)])
    return store


def test_memory_store_satisfies_the_port() -> None:
    assert isinstance(MemoryLogStore(), LogStore)


def test_empty_store() -> None:
    store = MemoryLogStore()
    assert (store.start_offset, store.end_offset, store.last_epoch) == (0, 0, NO_EPOCH)
    assert store.end_offset_for_epoch(NO_EPOCH) == OffsetAndEpoch(0, NO_EPOCH)
    assert store.read(0) == []


# log epochs by offset: [1, 1, 3, 3, 3, 5]
@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (5, OffsetAndEpoch(6, 5)),  # the last epoch: the log end offset
        (3, OffsetAndEpoch(5, 3)),  # start of the next epoch (5)
        (4, OffsetAndEpoch(5, 3)),  # not in the log: the largest epoch below it, next start
        (2, OffsetAndEpoch(2, 1)),
        (1, OffsetAndEpoch(2, 1)),
        (0, OffsetAndEpoch(0, 0)),  # below every epoch: the first epoch's start offset
        (7, OffsetAndEpoch(6, 5)),  # above every epoch: our end and last epoch
    ],
)
def test_end_offset_for_epoch_has_kafka_epoch_cache_semantics(
    epoch: int, expected: OffsetAndEpoch
) -> None:
    assert _store([1, 1, 3, 3, 3, 5]).end_offset_for_epoch(epoch) == expected


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([Entry(1, 1, b"")], "out of order"),
        ([Entry(0, 0, b"")], "epoch 0"),
        ([Entry(0, 2, b""), Entry(1, 1, b"")], "never go back"),
        ([(0, 1, b"")], "Entry tuples"),
    ],
)
def test_bad_appends_are_refused_by_name_and_change_nothing(
    entries: list[Entry], message: str
) -> None:
    store = MemoryLogStore()
    with pytest.raises(LogStoreError, match=message):
        store.append(entries)
    assert store.end_offset == 0


def test_append_below_last_epoch_refused() -> None:
    store = _store([1, 3])
    with pytest.raises(LogStoreError, match="last epoch is 3"):
        store.append([Entry(2, 2, b"")])


def test_crash_drops_only_the_unflushed_tail() -> None:
    store = _store([1, 1])
    store.flush()
    store.append([Entry(2, 2, b"a"), Entry(3, 2, b"b")])
    assert store.flushed_end_offset == 2
    store.crash()
    assert (store.end_offset, store.last_epoch) == (2, 1)
    assert store.end_offset_for_epoch(2) == OffsetAndEpoch(2, 1)


def test_truncate_moves_flushed_offset_and_epoch_cache_back() -> None:
    store = _store([1, 2, 2, 3])
    store.flush()
    store.truncate_to(2)
    assert (store.end_offset, store.flushed_end_offset, store.last_epoch) == (2, 2, 2)
    assert store.end_offset_for_epoch(3) == OffsetAndEpoch(2, 2)
    store.append([Entry(2, 4, b"")])  # a new epoch may follow at the truncation point
    assert store.end_offset_for_epoch(2) == OffsetAndEpoch(2, 2)
    with pytest.raises(LogStoreError, match="outside the log"):
        store.truncate_to(9)


def test_read_limits() -> None:
    store = MemoryLogStore()
    store.append([Entry(i, 1, b"12345") for i in range(5)])
    assert [e.offset for e in store.read(1, max_entries=2)] == [1, 2]
    assert [e.offset for e in store.read(0, max_bytes=12)] == [0, 1]
    assert [e.offset for e in store.read(0, max_bytes=1)] == [0]  # at least one entry
    assert store.read(5) == []
    with pytest.raises(LogStoreError, match="outside the log"):
        store.read(6)
    with pytest.raises(LogStoreError, match="max_entries must be >= 1"):
        store.read(0, max_entries=0)


def test_snapshot_then_delete_before_it() -> None:
    store = _store([1, 1, 2, 2, 3])
    store.flush()
    snap = SnapshotId(3, 2)
    store.create_snapshot(snap, b"state")
    store.delete_before_snapshot(snap)
    assert (store.start_offset, store.end_offset, store.last_epoch) == (3, 5, 3)
    assert [e.offset for e in store.read(3)] == [3, 4]
    assert store.end_offset_for_epoch(2) == OffsetAndEpoch(4, 2)
    assert store.end_offset_for_epoch(1) == OffsetAndEpoch(3, 2)  # below the log: snapshot
    with pytest.raises(LogStoreError, match="outside the log"):
        store.read(2)
    store.crash()  # entries above the snapshot were flushed: nothing lost
    assert store.end_offset == 5


def test_truncate_to_snapshot_restarts_the_log_there() -> None:
    store = _store([1])
    snap = SnapshotId(10, 4)
    with pytest.raises(LogStoreError, match="beyond the log end offset"):
        store.create_snapshot(snap, b"s")
    store.truncate_to(0)
    store2 = MemoryLogStore()
    store2.append([Entry(i, 4, b"") for i in range(10)])
    store2.create_snapshot(snap, b"s")
    store2.truncate_to_snapshot(snap)
    assert (store2.start_offset, store2.end_offset, store2.last_epoch) == (10, 10, 4)
    assert store2.end_offset_for_epoch(4) == OffsetAndEpoch(10, 4)
    assert store2.read_snapshot(snap) == b"s"
    store2.append([Entry(10, 5, b"")])
    assert store2.read(10) == [Entry(10, 5, b"")]
    with pytest.raises(LogStoreError, match="no snapshot"):
        store2.read_snapshot(SnapshotId(1, 1))
