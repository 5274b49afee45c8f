"""Log compaction: storage.cleaner, storage.swap and Log.replace_segments (unit tables)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.names import TopicPartition
from protocol.record_batch import (
    Compression,
    Record,
    build_batch,
    decode_records,
    iter_batches,
)
from storage import Log, LogConfig
from storage.cleaner import (
    CleanerCheckpoints,
    CleanerCorruptionError,
    SegmentRef,
    clean,
    group_segments_by_size,
    max_compaction_lag_due,
    plan_cleaning,
    swap_in,
)
from storage.swap import FailpointCrash, Failpoints

NOW = 10_000_000
COMPACT = LogConfig(
    cleanup_policy=("compact",),
    segment_bytes=1024,
    index_interval_bytes=128,
    segment_ms=10**12,
    delete_retention_ms=1_000,
)
DEDUPE = 1 << 20


def kv(key: bytes | None, value: bytes | None, ts: int = NOW - 100_000) -> bytes:
    return build_batch([Record(value=value, key=key, timestamp=ts)])


def scan(log: Log, start: int | None = None) -> list[Record]:
    """Every record from the log start to the end, moving by batches as a consumer does (a
    compacted log has gaps, so `last record + 1` may land inside a batch)."""
    offset = log.log_start_offset if start is None else start
    out: list[Record] = []
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).data
        assert data, f"empty read at {offset} below the log end {log.log_end_offset}"
        for pos, h in iter_batches(data):
            out.extend(r for r in decode_records(data, pos) if r.offset >= offset)
            offset = max(offset, h.next_offset)
    return out


def latest(records: list[Record]) -> dict[bytes | None, bytes | None]:
    out: dict[bytes | None, bytes | None] = {}
    for r in records:
        out[r.key] = r.value
    return out


def fill(log: Log, n: int, keys: int, ts: int = NOW - 100_000) -> list[Record]:
    for i in range(n):
        log.append_as_leader(kv(b"k%d" % (i % keys), b"v%d" % i, ts), 1)
    log.roll()
    log.flush()
    return scan(log)


def run_cleaning(
    log: Log,
    first_dirty: int = 0,
    now: int = NOW,
    failpoints: Failpoints | None = None,
    **kw: object,
) -> object:
    plan = plan_cleaning(log, first_dirty=first_dirty, now_ms=now, **kw)  # type: ignore[arg-type]
    assert plan is not None
    result = clean(plan, DEDUPE, failpoints)
    assert swap_in(log, result, failpoints)
    return result


class _FiresAt:
    """The failpoint port, switched on at one name (`return`)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def eval(self, name: str) -> object | None:
        return True if name == self.name else None


def open_compact(path: Path, cfg: LogConfig = COMPACT) -> Log:
    return Log.open(path / "t-0", cfg, clock_ms=lambda: NOW)


def test_latest_value_per_key_offsets_kept_and_gaps_read(tmp_path: Path) -> None:
    log = open_compact(tmp_path)
    before = fill(log, 200, keys=7)
    size_before = log.size
    result = run_cleaning(log)
    after = scan(log)
    assert latest(after) == latest(before)
    assert len(after) == 7
    # Offsets kept: each survivor is the key's last write, at its original offset.
    last_offset = {r.key: r.offset for r in before}
    assert {r.key: r.offset for r in after} == last_offset
    assert log.size < size_before / 5
    assert log.log_start_offset == 0 and log.log_end_offset == 200
    assert result.next_dirty == 200  # type: ignore[attr-defined]
    # Reading from any offset inside a gap lands on the next survivor.
    assert [r.offset for r in scan(log, 1)] == sorted(last_offset.values())
    # Reopened (cleanly and after a crash) it is the same log.
    log.close()
    for clean_shutdown in (True, False):
        again = Log.open(tmp_path / "t-0", COMPACT, clean_shutdown=clean_shutdown)
        assert scan(again) == after and again.log_end_offset == 200
        again.close()


@pytest.mark.parametrize(
    ("tombstone_age_ms", "kept"),
    [(500, True), (5_000, False)],
    ids=["younger-than-delete.retention.ms", "older"],
)
def test_tombstones_removed_only_past_the_horizon(
    tmp_path: Path, tombstone_age_ms: int, kept: bool
) -> None:
    log = open_compact(tmp_path)
    ts = NOW - tombstone_age_ms
    for i in range(20):
        log.append_as_leader(kv(b"a", b"%d" % i, ts), 1)
        log.append_as_leader(kv(b"b", b"%d" % i, ts), 1)
    log.append_as_leader(kv(b"a", None, ts), 1)
    log.roll()
    log.flush()
    run_cleaning(log)
    got = latest(scan(log))
    assert got[b"b"] == b"19"
    if kept:
        assert b"a" in got and got[b"a"] is None
    else:
        assert b"a" not in got


def test_min_compaction_lag_keeps_young_segments(tmp_path: Path) -> None:
    cfg = COMPACT.replace(min_compaction_lag_ms=60_000)
    log = open_compact(tmp_path, cfg)
    for i in range(30):
        log.append_as_leader(kv(b"k", b"old%d" % i, NOW - 120_000), 1)
    log.roll()
    for i in range(30):
        log.append_as_leader(kv(b"k", b"new%d" % i, NOW - 1_000), 1)
    log.roll()
    log.flush()
    young = 30  # the first segment with a record younger than the lag
    plan = plan_cleaning(log, first_dirty=0, now_ms=NOW)
    assert plan is not None and plan.end == young
    assert swap_in(log, clean(plan, DEDUPE))
    values = [r.value for r in scan(log)]
    # Old segment: only its last value of k is kept (the young one is not read yet).
    assert values[0] == b"old29"
    assert values[1:] == [b"new%d" % i for i in range(30)]


def test_active_segment_and_above_high_watermark_never_cleaned(tmp_path: Path) -> None:
    log = open_compact(tmp_path)
    for i in range(40):
        log.append_as_leader(kv(b"k", b"%d" % i), 1)
    log.flush()
    assert len(log.segments) > 1
    active = log.segments[-1].base_offset
    plan = plan_cleaning(log, first_dirty=0, now_ms=NOW)
    assert plan is not None and plan.end == active
    assert plan_cleaning(log, first_dirty=0, now_ms=NOW, high_watermark=0) is None
    swap_in(log, clean(plan, DEDUPE))
    records = scan(log)
    assert [r.value for r in records if r.offset >= active] == [
        b"%d" % i for i in range(active, 40)
    ]


def test_producer_fields_and_batch_span_survive(tmp_path: Path) -> None:
    log = open_compact(tmp_path)
    recs = [Record(value=b"%d" % i, key=b"k%d" % (i % 2), timestamp=NOW - 99_000) for i in range(6)]
    log.append_as_leader(
        build_batch(
            recs,
            producer_id=77,
            producer_epoch=3,
            base_sequence=10,
            compression=Compression.ZSTD,
        ),
        1,
    )
    log.append_as_leader(kv(b"k0", b"later"), 1)
    log.roll()
    log.flush()
    run_cleaning(log)
    data = log.read(0, 1 << 20).data
    (pos, h), *_rest = list(iter_batches(data))
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 3, 10)
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (0, 5, 1)
    assert h.compression is Compression.ZSTD
    assert [(r.offset, r.key) for r in decode_records(data, pos)] == [(5, b"k1")]


def test_small_cleaned_segments_grouped_up_to_segment_bytes(tmp_path: Path) -> None:
    log = open_compact(tmp_path)
    fill(log, 300, keys=3)
    segments_before = len(log.segments)
    assert segments_before > 5
    run_cleaning(log)
    # Kafka groups by the sizes before cleaning: 1024-byte segments go one per group here...
    assert len(log.segments) <= segments_before
    # ... and after a second cleaning the tiny cleaned ones merge.
    log.append_as_leader(kv(b"k0", b"x"), 1)
    log.roll()
    log.flush()
    run_cleaning(log, first_dirty=300)
    assert len(log.segments) == 2  # one cleaned segment + the active one
    assert latest(scan(log))[b"k0"] == b"x"


def test_group_segments_by_size_table() -> None:
    def ref(base: int, size: int, end: int) -> SegmentRef:
        return SegmentRef(base, f"/x/{base}", size, end, 0)

    refs = (ref(0, 400, 10), ref(10, 400, 20), ref(20, 400, 30), ref(30, 100, 40))
    groups = group_segments_by_size(refs, 1000)
    assert [[r.base_offset for r in g] for g in groups] == [[0, 10], [20, 30]]
    far = (ref(0, 1, 10), ref(2**31, 1, 2**31 + 10))
    assert len(group_segments_by_size(far, 1000)) == 2


def test_checkpoint_round_trip_and_bad_file(tmp_path: Path) -> None:
    d = str(tmp_path)
    cps = CleanerCheckpoints([d])
    tp = TopicPartition("t", 0)
    cps.update(d, tp, 42)
    assert CleanerCheckpoints([d]).get(d, tp) == 42
    cps.remove({tp})
    assert CleanerCheckpoints([d]).get(d, tp) == 0
    (tmp_path / "cleaner-offset-checkpoint").write_text("garbage\n")
    broken = CleanerCheckpoints([d])
    assert broken.get(d, tp) == 0 and "cleaner-offset-checkpoint" in broken.problems[d]


@pytest.mark.parametrize(
    "point",
    [
        "log.cleaner.after_cleaned",
        "log.cleaner.after_swap_rename",
        "log.cleaner.before_swap_complete",
    ],
)
@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_crash_at_each_step_reopens_with_every_kept_record(
    tmp_path: Path, point: str, clean_shutdown: bool
) -> None:
    log = open_compact(tmp_path)
    before = fill(log, 300, keys=5)
    want = latest(before)
    with pytest.raises(FailpointCrash):
        run_cleaning(log, failpoints=_FiresAt(point))
    log.release_handles()  # the "killed" process's descriptors
    again = Log.open(tmp_path / "t-0", COMPACT, clean_shutdown=clean_shutdown)
    names = os.listdir(tmp_path / "t-0")
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
    got = scan(again)
    assert latest(got) == want
    assert again.log_end_offset == 300
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets))
    # A cleaning after the restart finishes the job, once the log manager's flusher made the
    # segments recovery checked durable (their recovery point).
    again.flush_rolled_segments()
    run_cleaning(again)
    assert len(scan(again)) == 5


@pytest.mark.parametrize("change", ["truncated", "segments deleted", "closed", "re-cleaned"])
def test_swap_aborted_when_the_log_changed(tmp_path: Path, change: str) -> None:
    log = open_compact(tmp_path, COMPACT.replace(cleanup_policy=("compact", "delete")))
    fill(log, 100, keys=3)
    plan = plan_cleaning(log, first_dirty=0, now_ms=NOW)
    assert plan is not None
    result = clean(plan, DEDUPE)
    files = sorted(n for n in os.listdir(tmp_path / "t-0") if not n.endswith(".cleaned"))
    if change == "truncated":
        log.truncate_to(50)
    elif change == "segments deleted":
        log.update_config(log.config.replace(retention_bytes=0))
        assert log.delete_old_segments(NOW) > 0
    elif change == "closed":
        log.close()
    else:
        run_cleaning(log)
    assert not swap_in(log, result)
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".cleaned")]
    if change == "closed":
        assert sorted(os.listdir(tmp_path / "t-0")) == files
    if change == "truncated":
        assert [r.offset for r in scan(log)] == list(range(50))


def test_corrupt_segment_stops_cleaning_and_changes_nothing(tmp_path: Path) -> None:
    log = open_compact(tmp_path)
    fill(log, 100, keys=3)
    victim = log.segments[1].log_path
    with open(victim, "r+b") as f:
        f.seek(70)
        f.write(b"\xff\xff\xff")
    files = sorted(os.listdir(tmp_path / "t-0"))
    plan = plan_cleaning(log, first_dirty=0, now_ms=NOW)
    assert plan is not None
    with pytest.raises(CleanerCorruptionError, match=os.path.basename(victim)):
        clean(plan, DEDUPE)
    assert sorted(os.listdir(tmp_path / "t-0")) == files


def test_follower_appends_across_gaps(tmp_path: Path) -> None:
    leader = open_compact(tmp_path)
    fill(leader, 100, keys=3)
    run_cleaning(leader)
    leader.append_as_leader(kv(b"k9", b"tail"), 2)
    follower = Log.open(tmp_path / "f-0", COMPACT)
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, 300).data
        info = follower.append_as_follower(data)
        offset = follower.log_end_offset
        assert info.last_offset + 1 == offset
    assert scan(follower) == scan(leader)
    # The follower's epoch cache starts at the first batch it got (as Kafka's): what
    # truncation by leader epoch asks of it gets the leader's answers.
    for epoch in (1, 2):
        assert follower.end_offset_for_epoch(epoch) == leader.end_offset_for_epoch(epoch)


def test_offset_for_timestamp_and_reads_inside_gaps(tmp_path: Path) -> None:
    log = open_compact(tmp_path)
    for i in range(60):
        log.append_as_leader(kv(b"k%d" % (i % 2), b"%d" % i, NOW - 200_000 + i), 1)
    log.roll()
    log.flush()
    run_cleaning(log)
    # The first record at or after a timestamp whose record was removed is the next survivor.
    found = log.offset_for_timestamp(NOW - 200_000)
    assert found is not None and found.offset == 58


def test_compact_only_logs_keep_old_segments_on_retention(tmp_path: Path) -> None:
    cfg = COMPACT.replace(retention_ms=1, retention_bytes=1)
    log = open_compact(tmp_path, cfg)
    fill(log, 100, keys=50)
    assert log.delete_old_segments(NOW + 10**9) == 0
    both = cfg.replace(cleanup_policy=("compact", "delete"))
    log.update_config(both)
    assert log.delete_old_segments(NOW + 10**9) > 0


@pytest.mark.parametrize(("age_ms", "due"), [(59_000, False), (61_000, True)])
def test_max_compaction_lag_makes_the_first_dirty_segment_due(
    tmp_path: Path, age_ms: int, due: bool
) -> None:
    log = open_compact(tmp_path, COMPACT.replace(max_compaction_lag_ms=60_000))
    for i in range(30):
        log.append_as_leader(kv(b"k%d" % i, b"v", NOW - age_ms), 1)
    log.roll()
    assert max_compaction_lag_due(log, 0, NOW) is due
    # Nothing dirty before the active segment: never due.
    assert not max_compaction_lag_due(log, log.log_end_offset, NOW)


DEFAULT_POLICY = LogConfig(segment_bytes=1024, index_interval_bytes=128, segment_ms=10**12)
"""What a broker opens its logs with before it knows their topics' configs (cleanup.policy
delete): recovery must still accept the gaps of a log that was compacted."""


def test_a_cleaned_log_recovers_with_the_default_policy(tmp_path: Path) -> None:
    log = open_compact(tmp_path)
    want = latest(fill(log, 200, keys=7))
    run_cleaning(log)
    cleaned = scan(log)
    log.release_handles()  # killed: no clean close
    again = Log.open(tmp_path / "t-0", DEFAULT_POLICY, clean_shutdown=False)
    assert scan(again) == cleaned and latest(cleaned) == want
    assert again.log_end_offset == 200


def test_a_follower_of_a_compacted_leader_recovers_with_the_default_policy(
    tmp_path: Path,
) -> None:
    leader = open_compact(tmp_path)
    fill(leader, 100, keys=3)
    run_cleaning(leader)
    # The follower's topic config is not known yet (default policy): the gaps come from its
    # leader, not from its own cleaner.
    follower = Log.open(tmp_path / "f-0", DEFAULT_POLICY)
    follower.append_as_follower(leader.read(0, 1 << 20).data)
    assert scan(follower) == scan(leader)
    follower.release_handles()
    again = Log.open(tmp_path / "f-0", DEFAULT_POLICY, clean_shutdown=False)
    assert scan(again) == scan(leader)


def test_a_log_without_gaps_keeps_the_strict_offset_check(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", DEFAULT_POLICY, clock_ms=lambda: NOW)
    fill(log, 50, keys=50)
    assert not (tmp_path / "t-0" / "offset-gaps").exists()
    assert not log.may_have_offset_gaps


def test_dedup_state_survives_cleaning_and_an_unclean_restart(tmp_path: Path) -> None:
    """The cleaner removes most of an idempotent producer's batches; after a crash the state
    comes from the .snapshot files, so a retry of one of its last five batches is still a
    duplicate answered with its original offset (not written twice)."""
    log = open_compact(tmp_path)

    def batch(seq: int) -> bytes:
        record = Record(value=b"v%d" % seq, key=b"k%d" % (seq % 3), timestamp=NOW - 100_000)
        return build_batch([record], producer_id=7, producer_epoch=0, base_sequence=seq)

    offsets = [log.append_as_leader(batch(seq), 1).first_offset for seq in range(60)]
    log.roll()
    log.flush()
    run_cleaning(log)
    assert len(scan(log)) == 3  # the batches of seq 0..56 are gone from the log
    recovery_point = log.recovery_point  # as the broker's recovery-point checkpoint has it
    assert recovery_point == 60
    log.release_handles()  # killed
    again = Log.open(
        tmp_path / "t-0", DEFAULT_POLICY, clean_shutdown=False, recovery_point=recovery_point
    )
    end = again.log_end_offset
    retry = again.append_as_leader(batch(56), 1)
    assert retry.duplicate and retry.first_offset == offsets[56]
    assert again.log_end_offset == end


def test_a_producers_last_batch_survives_cleaning_for_a_rebuild_from_the_log(
    tmp_path: Path,
) -> None:
    """Another writer overwrites every key of an idempotent producer, so cleaning would remove
    all its batches; its last batch stays, empty (as Kafka's cleaner keeps it). After a crash
    that rebuilds the producer state from the log (recovery point 0: no snapshot is trusted),
    a retry of that batch is still a duplicate, not written twice."""
    log = open_compact(tmp_path)
    ts = NOW - 100_000

    def batch(seq: int) -> bytes:
        record = Record(value=b"v%d" % seq, key=b"k", timestamp=ts)
        return build_batch([record], producer_id=7, producer_epoch=0, base_sequence=seq)

    offsets = [log.append_as_leader(batch(seq), 1).first_offset for seq in range(10)]
    log.append_as_leader(kv(b"k", b"overwritten", ts), 1)
    log.roll()
    log.flush()
    run_cleaning(log)
    assert [r.value for r in scan(log)] == [b"overwritten"]
    log.release_handles()  # killed
    again = Log.open(tmp_path / "t-0", DEFAULT_POLICY, clean_shutdown=False, recovery_point=0)
    end = again.log_end_offset
    retry = again.append_as_leader(batch(9), 1)
    assert retry.duplicate and retry.first_offset == offsets[9]
    assert again.log_end_offset == end
