"""Log + producer state: leader dedup and checks, followers, .snapshot files at roll and close,
reopen after clean and unclean stops, truncation, retention, corrupt snapshots, and logs that
keep no producer state (the Raft metadata log)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.errors import ErrorCode, KafkaError
from protocol.record_batch import Record, build_batch, iter_batches
from storage import Log, LogConfig
from storage.producer_state import snapshot_offset
from tests.unit.storage.storage_helpers import read_all

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=128, segment_ms=10**12)
PID = 77


def pbatch(seq: int, n: int = 2, *, pid: int = PID, epoch: int = 0, ts: int = 1_000) -> bytes:
    return build_batch(
        [Record(value=b"v%d" % (seq + i), timestamp=ts) for i in range(n)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def open_log(path: Path, **kw: object) -> Log:
    return Log.open(path / "t-0", CONFIG, **kw)  # type: ignore[arg-type]


def snapshots(log: Log) -> list[int]:
    return sorted(o for n in os.listdir(log.directory) if (o := snapshot_offset(n)) is not None)


def write_ten(log: Log) -> list[int]:
    """Ten 2-record batches (seqs 0..19); their base offsets."""
    return [log.append_as_leader(pbatch(seq), 0).first_offset for seq in range(0, 20, 2)]


def assert_dedups(log: Log, bases: list[int]) -> None:
    """The last five batches are answered as duplicates, the next sequence is appended."""
    end = log.log_end_offset
    for k, seq in enumerate(range(10, 20, 2)):
        info = log.append_as_leader(pbatch(seq), 0)
        assert info.duplicate and info.first_offset == bases[5 + k], seq
        assert info.last_offset == bases[5 + k] + 1
    assert log.log_end_offset == end
    info = log.append_as_leader(pbatch(20), 0)
    assert not info.duplicate and info.first_offset == end


def test_retry_is_answered_with_its_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(build_batch([Record(value=b"other")]), 0)  # no producer id
    bases = write_ten(log)
    assert bases[0] == 1
    assert_dedups(log, bases)
    assert len(read_all(log)) == 1 + 20 + 2


def test_gap_and_old_epoch_are_refused_and_write_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(pbatch(0, epoch=3), 0)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(pbatch(5, epoch=3), 0)
    assert err.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "expected sequence 2, found sequence 5" in err.value.message
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(pbatch(2, epoch=2), 0)
    assert err.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == 2


def test_duplicate_mixed_with_new_batches_is_duplicate_sequence(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(pbatch(0), 0)
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(pbatch(0) + pbatch(2), 0)
    assert err.value.code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    assert log.log_end_offset == 2
    # A retry of a whole multi-batch append is a duplicate as one.
    info = log.append_as_leader(pbatch(2) + pbatch(4), 0)
    again = log.append_as_leader(pbatch(2) + pbatch(4), 0)
    assert again.duplicate and (again.first_offset, again.last_offset) == (2, 5) == (
        info.first_offset,
        info.last_offset,
    )


def test_follower_appends_keep_the_state_for_a_new_leader(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "a")
    follower = open_log(tmp_path / "b")
    bases = write_ten(leader)
    data = leader.read(0, 1 << 20).data
    while follower.log_end_offset < leader.log_end_offset:
        data = leader.read(follower.log_end_offset, 1 << 20).data
        follower.append_as_follower(data)
    assert_dedups(follower, bases)


def test_snapshots_at_roll_and_clean_close_and_reopen(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    bases = write_ten(log)
    rolled = snapshots(log)
    assert rolled and rolled == [s.base_offset for s in log.segments[1:]]
    log.close()
    assert snapshots(log)[-1] == log.log_end_offset
    reopened = open_log(tmp_path, clean_shutdown=True)
    assert_dedups(reopened, bases)


@pytest.mark.parametrize("recovery_point", [0, "last-roll"])
def test_reopen_after_unclean_stop_keeps_dedup(tmp_path: Path, recovery_point: object) -> None:
    log = open_log(tmp_path)
    bases = write_ten(log)
    point = 0 if recovery_point == 0 else log.segments[-1].base_offset
    log.release_handles()  # a crash: no close, no final snapshot
    reopened = open_log(tmp_path, clean_shutdown=False, recovery_point=point)
    assert_dedups(reopened, bases)


def test_corrupt_newest_snapshot_is_skipped_and_deleted(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    bases = write_ten(log)
    log.close()
    newest = snapshots(log)[-1]
    path = os.path.join(log.directory, f"{newest:020d}.snapshot")
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(b"\xff\xff")
    reopened = open_log(tmp_path, clean_shutdown=True)
    assert newest not in snapshots(reopened)
    assert_dedups(reopened, bases)


def test_torn_snapshot_without_older_ones_rebuilds_from_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    bases = write_ten(log)
    log.close()
    for offset in snapshots(log)[:-1]:
        os.unlink(os.path.join(log.directory, f"{offset:020d}.snapshot"))
    newest = snapshots(log)[-1]
    path = os.path.join(log.directory, f"{newest:020d}.snapshot")
    os.truncate(path, 5)
    reopened = open_log(tmp_path, clean_shutdown=True)
    assert_dedups(reopened, bases)


def test_truncation_rebuilds_the_state(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    bases = write_ten(log)
    log.truncate_to(bases[8])  # batches of seqs 16 and 18 are gone
    assert all(o <= log.log_end_offset for o in snapshots(log))
    dup = log.append_as_leader(pbatch(14), 0)
    assert dup.duplicate and dup.first_offset == bases[7]
    with pytest.raises(KafkaError) as err:
        log.append_as_leader(pbatch(18), 0)
    assert err.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    again = log.append_as_leader(pbatch(16), 0)
    assert not again.duplicate and again.first_offset == bases[8]
    log.truncate_fully_and_start_at(100)
    assert snapshots(log) == []
    assert not log.append_as_leader(pbatch(0), 0).duplicate  # producer unknown again


def test_retention_deletes_the_snapshots_of_deleted_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    write_ten(log)
    before = snapshots(log)
    deleted = log.delete_old_segments(now_ms=10**13)  # everything past retention.ms
    assert deleted
    assert snapshots(log) == [o for o in before if o >= log.log_start_offset]
    assert snapshots(log)[0] == log.log_start_offset


def test_idle_producers_expire(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(pbatch(0, ts=1_000), 0)
    log.append_as_leader(pbatch(0, pid=9, ts=50_000), 0)
    assert log.producers.state.remove_expired(now_ms=60_000, expiration_ms=20_000) == 1
    assert log.producers.state.get(PID) is None and log.producers.state.get(9) is not None


def test_a_log_without_producer_state_writes_and_touches_no_snapshot(tmp_path: Path) -> None:
    directory = tmp_path / "__cluster_metadata-0"
    directory.mkdir()
    foreign = directory / "00000000000000000003.snapshot"
    foreign.write_bytes(b"not ours")
    log = Log.open(directory, CONFIG, producer_state=False)
    write_ten(log)
    write_ten(log)  # no checks: the same sequences again are appended
    assert len(list(iter_batches(log.read(0, 1 << 20).data))) >= 1
    log.close()
    reopened = Log.open(directory, CONFIG, producer_state=False, clean_shutdown=False)
    reopened.close()
    names = [n for n in os.listdir(directory) if n.endswith(".snapshot")]
    assert names == [foreign.name] and foreign.read_bytes() == b"not ours"


def test_damage_found_by_the_scan_does_not_stop_the_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    bases = write_ten(log)
    log.close()
    for offset in snapshots(log):
        os.unlink(os.path.join(log.directory, f"{offset:020d}.snapshot"))
    open(os.path.join(log.directory, "00000000000000000004.snapshot"), "wb").close()  # torn
    last = log.segments[-1]
    with open(last.log_path, "r+b") as f:
        f.seek(16)  # the magic byte of the active segment's first batch
        f.write(b"\x07")
    reopened = open_log(tmp_path, clean_shutdown=True)
    state = reopened.producers.state.get(PID)
    assert state is not None and state.batches[-1].first_offset < last.base_offset
    assert bases[0] == 0
