"""Log: append validation, reads and their limits, roll, truncation, timestamps, epochs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.errors import CorruptRecordBatchError, ErrorCode, KafkaError
from protocol.record_batch import CRC_OFFSET, Compression, Record, build_batch, read_header
from storage import Log, LogConfig, UnexpectedAppendOffsetError
from storage import log as storage_log
from storage.files import FileHandleCache
from tests.unit.storage.storage_helpers import SMALL, batch, read_all, records_of


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_log(tmp_path: Path, config: LogConfig = SMALL, **kw: object) -> Log:
    return Log.open(tmp_path / "t-0", config, **kw)  # type: ignore[arg-type]


def seg_files(log: Log) -> list[str]:
    return sorted(os.listdir(log.directory))


# -- append and validation ---------------------------------------------------------------------


def test_append_stamps_offsets_and_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append_as_leader(batch(3) + batch(2), leader_epoch=7)
    assert (info.first_offset, info.last_offset, info.num_batches, info.num_records) == (0, 4, 2, 5)
    info = log.append_as_leader(batch(1), leader_epoch=7)
    assert (info.first_offset, info.last_offset) == (5, 5)
    assert log.log_end_offset == 6
    data = log.read(0, 1 << 20).data
    headers = []
    pos = 0
    while pos < len(data):
        h = read_header(data, pos)
        headers.append((h.base_offset, h.partition_leader_epoch))
        pos += h.size
    assert headers == [(0, 7), (3, 7), (5, 7)]
    assert [r.offset for r in records_of(data)] == list(range(6))


def test_append_info_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append_as_leader(batch(2, ts=50) + batch(3, ts=10), 0)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (51, 1)


def _corrupt_crc(data: bytes) -> bytes:
    buf = bytearray(data)
    buf[CRC_OFFSET] ^= 0xFF
    return bytes(buf)


def _bad_magic(data: bytes) -> bytes:
    buf = bytearray(data)
    buf[16] = 1
    return bytes(buf)


def _flip_payload(data: bytes) -> bytes:
    buf = bytearray(data)
    buf[-1] ^= 0x01
    return bytes(buf)


@pytest.mark.parametrize(
    ("mangle", "error", "words"),
    [
        (_corrupt_crc, CorruptRecordBatchError, "CRC mismatch"),
        (_flip_payload, CorruptRecordBatchError, "CRC mismatch"),
        (_bad_magic, CorruptRecordBatchError, "magic"),
        (lambda b: b[:-3], CorruptRecordBatchError, "truncated"),
        (lambda b: b[:30], CorruptRecordBatchError, "truncated batch header"),
    ],
)
def test_bad_batch_refuses_whole_append(
    tmp_path: Path, mangle: object, error: type[Exception], words: str
) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(1), 0)
    size_before = log.size
    good = batch(2)
    with pytest.raises(error, match=words) as exc:
        log.append_as_leader(good + mangle(batch(2)), 0)  # type: ignore[operator]
    assert "t-0" in str(exc.value)
    assert log.log_end_offset == 1 and log.size == size_before
    assert os.path.getsize(log.segments[-1].log_path) == size_before
    assert [r.offset for r in read_all(log)] == [0]


def test_message_too_large(tmp_path: Path) -> None:
    log = open_log(tmp_path, SMALL.replace(max_message_bytes=200))
    with pytest.raises(KafkaError) as exc:
        log.append_as_leader(batch(1) + batch(1, size=500), 0)
    assert exc.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert "max.message.bytes=200" in exc.value.message and "t-0" in exc.value.message
    assert log.log_end_offset == 0 and log.size == 0


def test_records_count_must_match_offset_span(tmp_path: Path) -> None:
    from protocol.record_batch import encode_batch_bytes

    bad = encode_batch_bytes(
        b"\x90", attributes=0, last_offset_delta=4, base_timestamp=0, max_timestamp=0,
        records_count=2,
    )  # fmt: skip
    log = open_log(tmp_path)
    with pytest.raises(KafkaError) as exc:
        log.append_as_leader(batch(1) + bad, 0)
    assert exc.value.code == ErrorCode.INVALID_RECORD
    assert "records_count 2" in exc.value.message
    assert log.log_end_offset == 0


def test_append_larger_than_segment_is_refused(tmp_path: Path) -> None:
    log = open_log(tmp_path, SMALL.replace(segment_bytes=300, max_message_bytes=10_000))
    with pytest.raises(KafkaError) as exc:
        log.append_as_leader(batch(1, size=400), 0)
    assert exc.value.code == ErrorCode.RECORD_LIST_TOO_LARGE


def test_empty_append_is_a_noop(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append_as_leader(b"", 0)
    assert info.num_batches == 0 and log.log_end_offset == 0


def test_compressed_batches_are_stored_as_they_came(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    raw = batch(20, compression=Compression.ZSTD, size=100)
    log.append_as_leader(raw, 0)
    data = log.read(0, 1 << 20).data
    assert data[61:] == raw[61:]
    assert [r.offset for r in records_of(data)] == list(range(20))


# -- follower appends --------------------------------------------------------------------------


def test_follower_append_keeps_offsets_and_epochs(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l")
    leader.append_as_leader(batch(2), 1)
    leader.append_as_leader(batch(3), 4)
    follower = open_log(tmp_path / "f")
    info = follower.append_as_follower(leader.read(0, 1 << 20).data)
    assert (info.first_offset, info.last_offset) == (0, 4)
    assert follower.epoch_entries() == [(1, 0), (4, 2)] == leader.epoch_entries()
    with pytest.raises(
        UnexpectedAppendOffsetError, match="starts at offset 0 but the log ends at 5"
    ):
        follower.append_as_follower(leader.read(0, 1 << 20).data)


# -- reads -------------------------------------------------------------------------------------


@pytest.fixture
def ten_batches(tmp_path: Path) -> Log:
    """Ten batches of 3 records (offsets 0..29), one segment, an index entry per batch."""
    log = open_log(tmp_path, SMALL.replace(index_interval_bytes=0, segment_bytes=1 << 20))
    for i in range(10):
        log.append_as_leader(batch(3, ts=1000 + 10 * i), 0)
    return log


def batch_offsets(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        h = read_header(data, pos)
        out.append(h.base_offset)
        pos += h.size
    return out


@pytest.mark.parametrize(
    ("offset", "max_bytes", "max_offset", "min_one", "expected"),
    [
        (0, 1 << 20, None, True, [0, 3, 6, 9, 12, 15, 18, 21, 24, 27]),
        (4, 1 << 20, None, True, [3, 6, 9, 12, 15, 18, 21, 24, 27]),  # mid-batch: whole batch
        (29, 1 << 20, None, True, [27]),
        (30, 1 << 20, None, True, []),  # the log end: nothing yet
        (0, 1, None, True, [0]),  # min_one_batch returns the first batch whole
        (0, 1, None, False, []),
        (0, 1 << 20, 9, True, [0, 3, 6]),  # max_offset (high watermark) is exclusive
        (0, 1 << 20, 10, True, [0, 3, 6]),  # the batch holding offset 10 reaches past it
        (0, 1 << 20, 12, True, [0, 3, 6, 9]),
        (12, 1 << 20, 12, True, []),
        (0, 1 << 20, 0, True, []),
    ],
)
def test_read_limits(
    ten_batches: Log,
    offset: int,
    max_bytes: int,
    max_offset: int | None,
    min_one: bool,
    expected: list[int],
) -> None:
    result = ten_batches.read(offset, max_bytes, max_offset, min_one)
    assert batch_offsets(result.data) == expected
    assert result.fetch_offset == offset and result.log_end_offset == 30


def test_read_max_bytes_counts_whole_batches(ten_batches: Log) -> None:
    one = len(ten_batches.read(0, 1).data)
    assert batch_offsets(ten_batches.read(0, one * 3).data) == [0, 3, 6]
    assert batch_offsets(ten_batches.read(0, one * 3 - 1).data) == [0, 3]
    assert batch_offsets(ten_batches.read(0, one * 3 + 1).data) == [0, 3, 6]


@pytest.mark.parametrize("offset", [-1, 31, 1000])
def test_read_out_of_range(ten_batches: Log, offset: int) -> None:
    with pytest.raises(KafkaError) as exc:
        ten_batches.read(offset, 100)
    assert exc.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert "[0, 30)" in exc.value.message


def test_reads_cross_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, SMALL.replace(segment_bytes=400))
    for _ in range(30):
        log.append_as_leader(batch(2, size=30), 0)
    assert len(log.segments) > 5
    assert [r.offset for r in read_all(log)] == list(range(60))
    assert [r.offset for r in read_all(log, max_bytes=1)] == list(range(60))
    # A read returns data from one segment at most, like Kafka.
    first = log.read(0, 1 << 20)
    assert first.segment_base_offset == 0
    assert batch_offsets(first.data)[-1] < log.segments[1].base_offset


# -- roll --------------------------------------------------------------------------------------


def test_roll_by_segment_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path, SMALL.replace(segment_bytes=1000))
    one = len(batch(1, size=100))
    for _ in range(20):
        log.append_as_leader(batch(1, size=100), 0)
    per_segment = 1000 // one
    assert [s.base_offset for s in log.segments] == list(range(0, 20, per_segment))
    assert all(s.size <= 1000 for s in log.segments)
    assert f"{per_segment:020d}.log" in seg_files(log)
    # Rolled segments are flushed off the append path; then the recovery point moves to the
    # active segment.
    assert log.recovery_point == 0 and log.needs_flush(0)
    log.flush_rolled_segments()
    assert log.recovery_point == log.segments[-1].base_offset and not log.needs_flush(0)


def test_roll_by_segment_ms_uses_record_time(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path, SMALL.replace(segment_ms=1000), clock_ms=clock)
    log.append_as_leader(batch(1, ts=10_000), 0)
    log.append_as_leader(batch(1, ts=10_999), 0)  # 999 ms after the first batch: same segment
    log.append_as_leader(batch(1, ts=11_000), 0)  # exactly segment.ms later: still no roll
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, ts=11_001), 0)
    assert [s.base_offset for s in log.segments] == [0, 3]


def test_roll_by_segment_ms_without_timestamps_uses_clock(tmp_path: Path) -> None:
    from protocol.record_batch import encode_batch_bytes

    no_ts = encode_batch_bytes(
        b"\x90", attributes=0, last_offset_delta=0, base_timestamp=-1, max_timestamp=-1,
        records_count=1,
    )  # fmt: skip
    clock = Clock(5_000)
    log = open_log(tmp_path, SMALL.replace(segment_ms=100), clock_ms=clock)
    log.append_as_leader(no_ts, 0)
    # The first batch has no timestamp: count from the segment's creation time instead.
    clock.now += 100
    log.append_as_leader(no_ts, 0)
    assert len(log.segments) == 1
    clock.now += 1
    log.append_as_leader(no_ts, 0)
    assert len(log.segments) == 2


def test_roll_when_offset_index_is_full(tmp_path: Path) -> None:
    cfg = SMALL.replace(segment_index_bytes=8 * 3, index_interval_bytes=0, segment_bytes=1 << 20)
    log = open_log(tmp_path, cfg)
    for _ in range(10):
        log.append_as_leader(batch(1), 0)
    # Entries are added from the second batch on; 3 entries fill the index (24 bytes).
    assert [s.base_offset for s in log.segments] == [0, 4, 8]


def test_explicit_roll_and_empty_roll_is_noop(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.roll() is log.segments[0]
    log.append_as_leader(batch(1), 0)
    assert log.roll().base_offset == 1
    assert log.roll().base_offset == 1


# -- truncation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "leo"),
    [(30, 30), (29, 27), (27, 27), (26, 24), (3, 3), (1, 0), (0, 0), (100, 30)],
)
def test_truncate_to(ten_batches: Log, target: int, leo: int) -> None:
    ten_batches.truncate_to(target)
    assert ten_batches.log_end_offset == leo
    assert [r.offset for r in read_all(ten_batches)] == list(range(leo))
    assert ten_batches.segments[-1].size == os.path.getsize(ten_batches.segments[-1].log_path)
    ten_batches.append_as_leader(batch(1), 1)
    assert ten_batches.log_end_offset == leo + 1


def test_truncate_across_segments_deletes_later_ones(tmp_path: Path) -> None:
    log = open_log(tmp_path, SMALL.replace(segment_bytes=400))
    for i in range(30):
        log.append_as_leader(batch(2, size=30), i // 10)
    bases = [s.base_offset for s in log.segments]
    target = bases[2] + 2
    log.truncate_to(target)
    assert [s.base_offset for s in log.segments] == bases[:3]
    assert log.log_end_offset == target
    assert not any(f"{b:020d}" in " ".join(seg_files(log)) for b in bases[3:])
    assert log.epoch_entries() == [(e, s) for e, s in [(0, 0), (1, 20), (2, 40)] if s < target]
    log.close()
    reopened = open_log(tmp_path, SMALL.replace(segment_bytes=400), clean_shutdown=True)
    assert reopened.log_end_offset == target
    assert [r.offset for r in read_all(reopened)] == list(range(target))


def test_truncate_fully_and_start_at(ten_batches: Log) -> None:
    ten_batches.truncate_fully_and_start_at(500)
    assert (ten_batches.log_start_offset, ten_batches.log_end_offset) == (500, 500)
    assert seg_files(ten_batches)[0] == f"{500:020d}.log"
    assert ten_batches.latest_epoch() is None
    ten_batches.append_as_leader(batch(2), 3)
    assert [r.offset for r in read_all(ten_batches)] == [500, 501]


# -- offset_for_timestamp ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ts", "expected"),
    [
        (0, (1000, 0)),
        (1000, (1000, 0)),
        (1001, (1001, 1)),
        (1003, (1010, 3)),  # between batches: the next batch's first record
        (1052, (1052, 17)),
        (1092, (1092, 29)),
        (1093, None),
        (-2, (-1, 0)),  # earliest
        (-1, (-1, 30)),  # latest
    ],
)
def test_offset_for_timestamp(ten_batches: Log, ts: int, expected: tuple[int, int] | None) -> None:
    found = ten_batches.offset_for_timestamp(ts)
    assert (tuple(found) if found else None) == expected


def test_offset_for_timestamp_matches_brute_force(tmp_path: Path) -> None:
    """Out-of-order timestamps across segments, before and after a restart: the answer is
    always the first record (lowest offset) whose timestamp is >= the target, as Kafka's."""
    import random

    rng = random.Random(7)
    cfg = SMALL.replace(segment_bytes=700, index_interval_bytes=100)
    log = open_log(tmp_path, cfg)
    for _ in range(60):
        ts = [rng.randrange(0, 5000) for _ in range(rng.randint(1, 4))]
        records = [Record(value=b"x" * 20, timestamp=t) for t in ts]
        log.append_as_leader(build_batch(records), 0)
    assert len(log.segments) > 4
    everything = read_all(log)

    def brute(target: int) -> tuple[int, int] | None:
        hit = next((r for r in everything if r.timestamp >= target), None)
        return None if hit is None else (hit.timestamp, hit.offset)

    targets = [0, 4999, 5000, *(rng.randrange(0, 5100) for _ in range(200))]
    for t in targets:
        found = log.offset_for_timestamp(t)
        assert (tuple(found) if found else None) == brute(t), t
    log.close()
    again = open_log(tmp_path, cfg, clean_shutdown=True)
    for t in targets:
        found = again.offset_for_timestamp(t)
        assert (tuple(found) if found else None) == brute(t), t


def test_offset_for_timestamp_respects_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path, SMALL.replace(segment_bytes=300, retention_bytes=0))
    for i in range(10):
        log.append_as_leader(batch(1, ts=100 + i, size=100), 0)
    log.delete_old_segments(now_ms=0)
    start = log.log_start_offset
    assert start > 0
    assert log.offset_for_timestamp(0) == (100 + start, start)


# -- leader epochs -----------------------------------------------------------------------------


def test_epoch_cache_follows_appends_and_truncation(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.latest_epoch() is None and log.end_offset_for_epoch(0) is None
    log.append_as_leader(batch(2), 1)
    log.append_as_leader(batch(2), 1)
    log.append_as_leader(batch(2), 3)
    log.append_as_leader(batch(2), 5)
    assert log.epoch_entries() == [(1, 0), (3, 4), (5, 6)]
    assert log.latest_epoch() == 5
    assert log.end_offset_for_epoch(5) == (8, 5)
    assert log.end_offset_for_epoch(4) == (6, 3)
    assert log.end_offset_for_epoch(1) == (4, 1)
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(6) is None
    log.truncate_to(6)
    assert log.epoch_entries() == [(1, 0), (3, 4)]
    assert log.end_offset_for_epoch(3) == (6, 3)
    log.close()
    assert open_log(tmp_path, clean_shutdown=True).epoch_entries() == [(1, 0), (3, 4)]
    text = (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text()
    assert text == "0\n2\n1 0\n3 4\n"


# -- flush, restart ----------------------------------------------------------------------------


def test_flush_messages_policy(tmp_path: Path) -> None:
    log = open_log(tmp_path, SMALL.replace(flush_messages=5))
    log.append_as_leader(batch(3), 0)
    assert log.recovery_point == 0
    log.append_as_leader(batch(3), 0)
    assert log.recovery_point == 6


def test_flush_ms_policy(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path, SMALL.replace(flush_ms=1000), clock_ms=clock)
    log.append_as_leader(batch(3), 0)
    assert not log.needs_flush(clock.now + 999)
    assert log.needs_flush(clock.now + 1000)
    log.flush()
    assert log.recovery_point == 3 and not log.needs_flush(clock.now + 10**6)


def test_clean_restart_keeps_everything(tmp_path: Path) -> None:
    cfg = SMALL.replace(segment_bytes=600, index_interval_bytes=50)
    log = open_log(tmp_path, cfg, topic_id="abc")
    for i in range(25):
        log.append_as_leader(batch(2, ts=100 * i), i // 10)
    before = read_all(log)
    segments = [(s.base_offset, s.size) for s in log.segments]
    log.close()
    files = seg_files(log)
    assert "partition.metadata" in files and "leader-epoch-checkpoint" in files
    again = open_log(tmp_path, cfg, clean_shutdown=True)
    assert [(s.base_offset, s.size) for s in again.segments] == segments
    assert again.log_end_offset == 50 and again.topic_id == "abc"
    assert read_all(again) == before
    again.append_as_leader(batch(1), 3)
    assert again.log_end_offset == 51


def test_corrupt_index_files_are_rebuilt_on_clean_start(tmp_path: Path) -> None:
    cfg = SMALL.replace(segment_bytes=1 << 20, index_interval_bytes=50)
    log = open_log(tmp_path, cfg)
    for i in range(20):
        log.append_as_leader(batch(2, ts=i), 0)
    log.close()
    seg = log.segments[0]
    Path(seg.index_path).write_bytes(b"\x00\x00\x00\x09\x7f\xff\xff\xff" * 3)  # beyond the file
    Path(seg.time_index_path).write_bytes(b"garbage")
    again = open_log(tmp_path, cfg, clean_shutdown=True)
    assert again.log_end_offset == 40
    assert [r.offset for r in read_all(again, start=17)] == list(range(17, 40))
    assert again.offset_for_timestamp(10) == (10, 19)


def test_topic_id_mismatch(tmp_path: Path) -> None:
    from storage import InconsistentTopicIdError

    open_log(tmp_path, topic_id="aaa").close()
    with pytest.raises(InconsistentTopicIdError) as exc:
        open_log(tmp_path, topic_id="bbb", clean_shutdown=True)
    assert "aaa" in str(exc.value) and "bbb" in str(exc.value)
    assert exc.value.code == ErrorCode.INCONSISTENT_TOPIC_ID


def test_closed_log_refuses_use(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.close()
    with pytest.raises(KafkaError, match="closed"):
        log.append_as_leader(batch(1), 0)


def test_shared_handle_cache_stays_bounded(tmp_path: Path) -> None:
    handles = FileHandleCache(4)
    logs = [
        Log.open(tmp_path / f"t-{i}", SMALL.replace(segment_bytes=300), handles=handles)
        for i in range(10)
    ]
    for _ in range(5):
        for log in logs:
            log.append_as_leader(batch(1, size=100), 0)
            assert len(handles) <= 4
    for log in logs:
        assert [r.offset for r in read_all(log)] == list(range(5))
    assert handles.opens > 10


def test_follower_append_refuses_offsets_going_back_inside_the_append(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "l")
    leader.append_as_leader(batch(2), 1)
    leader.append_as_leader(batch(2), 1)
    data = leader.read(0, 1 << 20).data
    first = read_header(data, 0).size
    follower = open_log(tmp_path / "f")
    with pytest.raises(CorruptRecordBatchError, match="offsets must go up"):
        follower.append_as_follower(data[:first] + data[:first])
    assert follower.log_end_offset == 0 and follower.size == 0


def test_unclean_open_drops_a_segment_that_does_not_continue_the_log(tmp_path: Path) -> None:
    cfg = SMALL.replace(segment_bytes=400)
    log = open_log(tmp_path, cfg)
    for _ in range(6):
        log.append_as_leader(batch(2, size=30), 0)
    log.close()
    bases = [s.base_offset for s in log.segments]
    stray = tmp_path / "t-0" / f"{bases[-1] + 1000:020d}.log"
    stray.write_bytes(batch(1))  # base offset 0 inside, and far past the end by its name
    again = open_log(tmp_path, cfg, recovery_point=0)
    assert again.log_end_offset == 12 and not stray.exists()
    assert [s.base_offset for s in again.segments] == bases


def test_a_segment_recovery_deleted_is_made_durable_by_the_next_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery no longer fsyncs; a segment it deleted must still not come back after a power
    loss: the next flush fsyncs the directory (review finding on the change to recovery)."""
    cfg = SMALL.replace(segment_bytes=400)
    log = open_log(tmp_path, cfg)
    for _ in range(6):
        log.append_as_leader(batch(2, size=30), 0)
    log.close()
    stray = tmp_path / "t-0" / f"{log.segments[-1].base_offset + 1000:020d}.log"
    stray.write_bytes(batch(1))
    synced: list[str] = []
    monkeypatch.setattr(storage_log, "fsync_dir", lambda d: synced.append(str(d)))
    again = open_log(tmp_path, cfg, recovery_point=0)
    assert not stray.exists() and synced == []  # recovery itself fsyncs nothing
    again.flush()
    assert str(tmp_path / "t-0") in synced


def test_missing_index_files_are_rebuilt(tmp_path: Path) -> None:
    cfg = SMALL.replace(segment_bytes=600, index_interval_bytes=40)
    log = open_log(tmp_path, cfg)
    for i in range(20):
        log.append_as_leader(batch(2, ts=100 * i), 0)
    log.close()
    for seg in log.segments:
        os.unlink(seg.index_path)
        os.unlink(seg.time_index_path)
    again = open_log(tmp_path, cfg, clean_shutdown=True)
    assert again.log_end_offset == 40
    assert again.offset_for_timestamp(1050) == (1100, 22)
    assert [r.offset for r in read_all(again, start=5)] == list(range(5, 40))


def test_an_unclean_open_fsyncs_nothing_and_keeps_the_recovery_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's LogLoader: recovery checks the segments past the recovery point but does not
    fsync them, and the recovery point moves only when a flush made them durable. Fsyncing
    every recovered segment, its indexes and its directory was 8 of the 15 s a broker with
    25,000 partitions took to start after a SIGKILL."""
    cfg = SMALL.replace(segment_bytes=400)
    log = open_log(tmp_path, cfg)
    for _ in range(6):
        log.append_as_leader(batch(2, size=30), 0)
    log.release_handles()  # killed: nothing flushed, no clean shutdown
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    again = open_log(tmp_path, cfg, recovery_point=0, clean_shutdown=False)
    assert fsyncs == []
    assert again.log_end_offset == 12 and again.recovery_point == 0
    # The log manager's flusher then makes the rolled segments durable, as after a roll.
    assert again.needs_flush(0)
    again.flush_rolled_segments()
    assert again.recovery_point == again.segments[-1].base_offset > 0
    assert fsyncs


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    fsyncs: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd))[1])
    return fsyncs


def test_closing_a_log_created_empty_and_never_written_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clean shutdown fsynced 5 files per fresh partition (segment, 2 indexes, the log's
    directory and the data dir): 20 s for a broker with 10,000 empty partitions. Kafka's
    flush of an empty log does nothing; a crash before the first data loses nothing."""
    fsyncs = _count_fsyncs(monkeypatch)
    log = open_log(tmp_path)
    log.close()
    assert fsyncs == []
    again = open_log(tmp_path)  # a clean open of the bare segment: empty, writable
    assert again.log_end_offset == 0
    again.append_as_leader(batch(2), 0)
    again.close()
    assert fsyncs  # its first data: segment, indexes and directory made durable
    assert {"00000000000000000000.index", "00000000000000000000.timeindex"} <= set(
        os.listdir(again.directory)
    )


def test_a_created_log_that_was_written_then_emptied_is_still_flushed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), 0)
    log.truncate_to(0)  # back to empty: the truncation must reach the disk
    fsyncs = _count_fsyncs(monkeypatch)
    log.close()
    assert fsyncs


def test_an_empty_log_recovered_after_a_crash_closes_without_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery marked every segment dirty, the empty ones too: the clean shutdown of a broker
    restarted after a SIGKILL with 25,000 partitions then fsynced 75,000 files (5 s)."""
    log = open_log(tmp_path)
    log.close()
    fsyncs = _count_fsyncs(monkeypatch)
    again = open_log(tmp_path, recovery_point=0, clean_shutdown=False)
    again.close()
    assert fsyncs == []
    written = open_log(tmp_path, recovery_point=0, clean_shutdown=False)
    written.append_as_leader(batch(2), 0)
    written.release_handles()  # killed with unflushed data: recovery keeps it, dirty
    recovered = open_log(tmp_path, recovery_point=0, clean_shutdown=False)
    assert recovered.log_end_offset == 2
    recovered.close()
    assert fsyncs
