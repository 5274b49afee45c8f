"""DiskLogStore: the LogStore port on storage/ segments.

The port's semantics are checked against MemoryLogStore (the reference) on random operation
sequences, then what only a disk can do: reopen, a torn tail, and a process SIGKILLed while
appending.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio

from raft import disk_log_store
from raft.disk_log_store import (
    ENTRY_OVERHEAD_BYTES,
    METADATA_PARTITION_DIR,
    TAIL_CACHE_BYTES,
    DiskLogStore,
)
from raft.log_store import (
    NO_EPOCH,
    Entry,
    LogStore,
    LogStoreError,
    MemoryLogStore,
    OffsetAndEpoch,
    SnapshotId,
)
from storage.config import LogConfig

REPO = Path(__file__).resolve().parents[3]


def small_segments() -> LogConfig:
    """Tiny segments so that rolls, truncation across segments and deletion happen."""
    return LogConfig(
        retention_ms=-1, retention_bytes=-1, segment_bytes=600, max_message_bytes=8 * 1024 * 1024
    )


def state(store: LogStore) -> tuple[object, ...]:
    epochs = range(0, store.last_epoch + 3)
    return (
        store.start_offset,
        store.end_offset,
        store.last_epoch,
        store.read(store.start_offset),
        [store.end_offset_for_epoch(e) for e in epochs],
        store.latest_snapshot_id(),
    )


def test_disk_store_satisfies_the_port(tmp_path: Path) -> None:
    store = DiskLogStore(tmp_path)
    assert isinstance(store, LogStore)
    assert (store.start_offset, store.end_offset, store.last_epoch) == (0, 0, NO_EPOCH)
    assert store.read(0) == []
    assert os.path.isdir(tmp_path / METADATA_PARTITION_DIR)


@pytest.mark.parametrize("tail_bytes", [0, 700, TAIL_CACHE_BYTES], ids=["disk", "part", "cached"])
@pytest.mark.parametrize("seed", range(12))
def test_behaves_as_the_memory_store(tmp_path: Path, seed: int, tail_bytes: int) -> None:
    """Random appends (several epochs, batches of several entries), truncations (also inside
    a batch), flushes, reads with limits, snapshots and deletions before them: the disk store
    answers exactly as the memory store after every step, and again after a reopen. With no
    in-memory tail (every read decodes from disk), a tail holding a few entries (reads cross
    from disk into it) and the default (everything cached)."""
    rng = random.Random(seed)
    mem = MemoryLogStore()
    disk = DiskLogStore(tmp_path, config=small_segments(), tail_cache_bytes=tail_bytes)
    epoch = 1
    for step in range(60):
        op = rng.choice(["append", "append", "append", "truncate", "flush", "read", "snapshot"])
        if op == "append":
            if rng.random() < 0.3:
                epoch += rng.randint(1, 2)
            n = rng.randint(1, 6)
            entries = [
                Entry(mem.end_offset + i, epoch, rng.randbytes(rng.randint(0, 80)))
                for i in range(n)
            ]
            mem.append(entries)
            disk.append(entries)
        elif op == "truncate" and mem.end_offset > mem.start_offset:
            # Raft never truncates below a snapshot (snapshots hold committed entries only).
            snap = mem.latest_snapshot_id()
            to = rng.randint(max(mem.start_offset, snap.end_offset if snap else 0), mem.end_offset)
            mem.truncate_to(to)
            disk.truncate_to(to)
            epoch = max(epoch, mem.last_epoch)
        elif op == "flush":
            mem.flush()
            disk.flush()
            assert disk.flushed_end_offset == disk.end_offset
        elif op == "read" and mem.end_offset > mem.start_offset:
            at = rng.randint(mem.start_offset, mem.end_offset)
            me, mb = rng.choice([None, 1, 3]), rng.choice([None, 1, 50, 200])
            assert disk.read(at, me, mb) == mem.read(at, me, mb), (step, at, me, mb)
        elif op == "snapshot" and mem.end_offset > mem.start_offset:
            end = rng.randint(mem.start_offset + 1, mem.end_offset)
            snap = SnapshotId(end, mem.read(end - 1, 1)[0].epoch)
            data = rng.randbytes(30)
            mem.create_snapshot(snap, data)
            disk.create_snapshot(snap, data)
            assert disk.read_snapshot(snap) == data
            if rng.random() < 0.7:
                mem.delete_before_snapshot(snap)
                disk.delete_before_snapshot(snap)
        assert state(disk) == state(mem), (step, op)
    disk.flush()
    disk.close()
    reopened = DiskLogStore(tmp_path, config=small_segments(), tail_cache_bytes=tail_bytes)
    mem.flush()
    assert state(reopened) == state(mem)
    assert reopened.flushed_end_offset == reopened.end_offset
    reopened.close()
    if tail_bytes == TAIL_CACHE_BYTES and mem.end_offset > mem.start_offset:
        assert disk.cached_start_offset <= mem.start_offset  # everything was in memory


def _big_batch(store: DiskLogStore, n: int) -> list[Entry]:
    entries = [Entry(store.end_offset + i, 1, b"record-%06d" % i) for i in range(n)]
    store.append(entries)
    store.flush()
    return entries


def test_the_appended_tail_is_read_without_disk_or_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leader serves its followers' Fetches of what it appended from memory: with the disk
    reads and the record decoding made to fail, reads of the tail still answer (the same
    Entry objects), with the entry and byte limits of the port."""
    store = DiskLogStore(tmp_path)
    entries = _big_batch(store, 5000)

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the cached tail was read from disk")

    monkeypatch.setattr(store._log, "read", refuse)
    monkeypatch.setattr(disk_log_store, "decode_records", refuse)
    assert store.cached_start_offset == 0
    assert store.read(0) == entries
    assert store.read(1000, 1000) == entries[1000:2000]
    assert store.read(4990, 1000) == entries[4990:]
    assert store.read(10, max_bytes=3 * 13) == entries[10:13]  # 13 bytes each
    assert store.read(10, max_bytes=1) == entries[10:11]  # at least one
    assert store.read(5000) == []
    assert store.read(100, 1)[0] is entries[100]


def test_the_tail_is_bounded_by_bytes_and_older_reads_decode_each_batch_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tail keeps only about tail_cache_bytes; below it a fetcher catching up through one
    big batch 100 entries at a time decodes that batch once, not once per read (what made
    the leader decode a 25,000-record batch for every Fetch)."""
    store = DiskLogStore(tmp_path, tail_cache_bytes=300 * (13 + ENTRY_OVERHEAD_BYTES))
    entries = _big_batch(store, 5000)
    assert store.cached_start_offset == 4700
    decoded: list[int] = []
    real = disk_log_store.decode_records

    def counting(data: bytes, pos: int = 0) -> list[object]:
        decoded.append(pos)
        return real(data, pos)

    monkeypatch.setattr(disk_log_store, "decode_records", counting)
    got: list[Entry] = []
    while len(got) < 5000:
        got.extend(store.read(len(got), 100))
    assert got == entries
    assert len(decoded) == 1
    # A reopened store has no tail: the same, from disk alone.
    store.close()
    reopened = DiskLogStore(tmp_path)
    assert reopened.cached_start_offset == reopened.end_offset == 5000
    decoded.clear()
    got = []
    while len(got) < 5000:
        got.extend(reopened.read(len(got), 100))
    assert got == entries
    assert len(decoded) == 1


def test_truncation_forgets_cached_and_decoded_entries(tmp_path: Path) -> None:
    """A follower that truncates a divergent suffix and appends the new leader's entries at
    the same offsets reads the new ones, from the tail and from the decoded-batch memo."""
    store = DiskLogStore(tmp_path, tail_cache_bytes=0)
    _big_batch(store, 50)
    assert store.read(40, 1)[0].data == b"record-000040"  # decoded and kept
    store.truncate_to(30)
    store.append([Entry(30 + i, 2, b"new-%d" % i) for i in range(20)])
    assert [e.data for e in store.read(38, 3)] == [b"new-8", b"new-9", b"new-10"]
    assert store.read(29, 2) == [Entry(29, 1, b"record-000029"), Entry(30, 2, b"new-0")]
    cached = DiskLogStore(tmp_path / "b")
    _big_batch(cached, 50)
    cached.truncate_to(30)
    cached.append([Entry(30, 2, b"new")])
    assert cached.read(29) == [Entry(29, 1, b"record-000029"), Entry(30, 2, b"new")]


def test_a_negative_tail_bound_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LogStoreError, match="tail_cache_bytes must be >= 0"):
        DiskLogStore(tmp_path, tail_cache_bytes=-1)


def test_bad_appends_are_refused_by_name_and_change_nothing(tmp_path: Path) -> None:
    store = DiskLogStore(tmp_path)
    store.append([Entry(0, 2, b"a")])
    for entries, message in [
        ([Entry(2, 2, b"")], "out of order"),
        ([Entry(1, 1, b"")], "epoch 1 at offset 1"),
        ([Entry(1, 2, b""), Entry(2, 0, b"")], "epoch 0"),
        ([(1, 2, b"")], "append takes Entry tuples"),
    ]:
        with pytest.raises(LogStoreError, match=message):
            store.append(entries)  # type: ignore[arg-type]
        assert store.end_offset == 1
    for call, message in [
        (lambda: store.truncate_to(5), r"truncate_to\(5\) outside the log \[0, 1\]"),
        (lambda: store.read(2), r"read at offset 2 outside the log \[0, 1\]"),
        (lambda: store.read(0, max_bytes=0), "max_bytes must be >= 1"),
        (lambda: store.read_snapshot(SnapshotId(1, 2)), "no snapshot"),
        (lambda: store.create_snapshot(SnapshotId(5, 2), b""), "beyond the log end offset"),
    ]:
        with pytest.raises(LogStoreError, match=message):
            call()


def test_truncate_inside_a_batch_keeps_the_entries_below(tmp_path: Path) -> None:
    store = DiskLogStore(tmp_path)
    store.append([Entry(i, 1, b"e%d" % i) for i in range(5)])  # one batch
    store.flush()
    store.truncate_to(3)
    assert store.read(0) == [Entry(i, 1, b"e%d" % i) for i in range(3)]
    assert store.flushed_end_offset <= 3
    store.append([Entry(3, 2, b"new")])
    assert store.end_offset_for_epoch(1) == OffsetAndEpoch(3, 1)


def test_snapshot_files_survive_reopen_and_a_fetched_snapshot_restarts_the_log(
    tmp_path: Path,
) -> None:
    store = DiskLogStore(tmp_path)
    store.append([Entry(i, 1, b"x") for i in range(4)])
    store.create_snapshot(SnapshotId(3, 1), b"state@3")
    assert (
        tmp_path / METADATA_PARTITION_DIR / "00000000000000000003-0000000001.checkpoint"
    ).exists()
    # A follower stored a snapshot from the leader ending beyond its log, then crashed
    # before restarting the log there: the reopen does it (Kafka's truncateToLatestSnapshot).
    store.store_fetched_snapshot(SnapshotId(10, 4), b"state@10")
    store.flush()
    store.close()
    store = DiskLogStore(tmp_path)
    assert (store.start_offset, store.end_offset, store.last_epoch) == (10, 10, 4)
    assert store.read_snapshot(SnapshotId(3, 1)) == b"state@3"
    assert store.end_offset_for_epoch(2) == OffsetAndEpoch(10, 4)
    store.append([Entry(10, 5, b"y")])
    store.close()
    store = DiskLogStore(tmp_path)
    assert (store.start_offset, store.end_offset, store.last_epoch) == (10, 11, 5)


def test_torn_tail_is_cut_at_reopen(tmp_path: Path) -> None:
    """A write cut short (the last batch half on disk) is dropped whole; the rest stays."""
    store = DiskLogStore(tmp_path)
    store.append([Entry(0, 1, b"a" * 100), Entry(1, 1, b"b" * 100)])
    store.append([Entry(2, 2, b"c" * 100)])  # its own batch (new epoch)
    store.flush()
    store.close()
    segment = next((tmp_path / METADATA_PARTITION_DIR).glob("*.log"))
    with open(segment, "r+b") as f:
        f.truncate(segment.stat().st_size - 7)
    store = DiskLogStore(tmp_path)
    assert store.read(0) == [Entry(0, 1, b"a" * 100), Entry(1, 1, b"b" * 100)]
    assert (store.end_offset, store.last_epoch) == (2, 1)


WRITER = textwrap.dedent(
    """
    import sys
    from raft.disk_log_store import DiskLogStore
    from raft.log_store import Entry

    def payload(offset):
        return (b"%d:" % offset) * (1 + offset % 700)

    store = DiskLogStore(sys.argv[1])
    offset = store.end_offset
    epoch = max(1, store.last_epoch)
    while True:
        if offset % 97 == 0:
            epoch += 1
        n = 1 + offset % 13
        store.append([Entry(offset + i, epoch, payload(offset + i)) for i in range(n)])
        offset += n
        if offset % 3 == 0:
            store.flush()
            print(store.flushed_end_offset, flush=True)
    """
)


async def test_sigkill_mid_append_keeps_every_flushed_entry_and_no_torn_one(tmp_path: Path) -> None:
    """A writer appends and flushes in a loop (reporting each flushed offset) until SIGKILL;
    reopened, the log holds every entry it reported flushed, each one whole and in order."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _round in range(3):  # kill the same log three times, each resuming where it ended
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-c", WRITER, str(tmp_path)],
            stdout=subprocess.PIPE,
            env=env,
            cwd=REPO,
        )
        assert proc.stdout is not None
        flushed, reports, pending = -1, 0, b""
        try:
            with trio.fail_after(30):
                while reports < 20:
                    chunk = await proc.stdout.receive_some()
                    if not chunk:
                        raise AssertionError(f"writer exited early with {proc.poll()}")
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        flushed, reports = int(line), reports + 1
            os.kill(proc.pid, signal.SIGKILL)  # mid-append: it never stops appending
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            with trio.fail_after(10):
                await proc.wait()
            await proc.stdout.aclose()
        assert proc.returncode == -signal.SIGKILL
        store = DiskLogStore(tmp_path)
        assert store.end_offset >= flushed > 0
        entries = store.read(0)
        assert [e.offset for e in entries] == list(range(store.end_offset))
        for e in entries:
            assert e.data == (b"%d:" % e.offset) * (1 + e.offset % 700), e.offset
        epochs = [e.epoch for e in entries]
        assert epochs == sorted(epochs)
        store.close()
