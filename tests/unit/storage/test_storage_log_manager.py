"""LogManager: start-up, create/delete, checkpoints, clean shutdown, retention, flush."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.errors import ErrorCode, KafkaError
from protocol.names import METADATA_PARTITION, TopicPartition
from storage import CLEAN_SHUTDOWN_FILE, LogConfig, LogManager, MetaPropertiesError
from storage.checkpoints import read_offsets
from tests.unit.storage.storage_helpers import SMALL, batch, read_all

TP = TopicPartition("orders", 0)


def manager(tmp_path: Path, dirs: int = 1, **kw: object) -> LogManager:
    m = LogManager(
        [tmp_path / f"d{i}" for i in range(dirs)],
        node_id=kw.pop("node_id", 1),  # type: ignore[arg-type]
        cluster_id=kw.pop("cluster_id", "c1"),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )
    m.startup()
    return m


def test_layout_and_clean_shutdown(tmp_path: Path) -> None:
    m = manager(tmp_path)
    log = m.get_or_create_log(TP, SMALL, topic_id="T1")
    log.append_as_leader(batch(3), 0)
    m.checkpoint_high_watermarks({TP: 3, TopicPartition("unknown", 0): 9})
    m.shutdown()
    d = tmp_path / "d0"
    assert sorted(os.listdir(d)) == sorted(
        [
            CLEAN_SHUTDOWN_FILE, "meta.properties", "orders-0", "recovery-point-offset-checkpoint",
            "replication-offset-checkpoint", "log-start-offset-checkpoint",
        ]
    )  # fmt: skip
    assert sorted(os.listdir(d / "orders-0")) == [
        "00000000000000000000.index", "00000000000000000000.log",
        "00000000000000000000.timeindex", "leader-epoch-checkpoint", "partition.metadata",
    ]  # fmt: skip
    assert read_offsets(str(d / "recovery-point-offset-checkpoint")) == {TP: 3}
    assert read_offsets(str(d / "replication-offset-checkpoint")) == {TP: 3}
    assert read_offsets(str(d / "log-start-offset-checkpoint")) == {TP: 0}

    m2 = manager(tmp_path)
    assert m2.had_clean_shutdown == {str(d): True}
    assert not (d / CLEAN_SHUTDOWN_FILE).exists()  # removed at start: a crash must be noticed
    assert m2.read_high_watermarks() == {TP: 3}
    log2 = m2.get_log(TP)
    assert log2 is not None and log2.topic_id == "T1" and log2.log_end_offset == 3
    assert [r.offset for r in read_all(log2)] == [0, 1, 2]
    assert m2.logs() == [log2]
    m2.shutdown()


def test_unclean_start_recovers_torn_tail(tmp_path: Path) -> None:
    m = manager(tmp_path)
    log = m.get_or_create_log(TP, SMALL)
    log.append_as_leader(batch(2), 0)
    log.append_as_leader(batch(2), 0)
    log.flush()
    m.checkpoint_recovery_points()
    log.append_as_leader(batch(2), 0)
    path = log.segments[-1].log_path
    m.handles.close_all()  # "crash": no shutdown, no marker
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 5)
    m2 = manager(tmp_path, default_config=SMALL)
    assert m2.had_clean_shutdown == {str(tmp_path / "d0"): False}
    log2 = m2.get_log(TP)
    assert log2 is not None and log2.log_end_offset == 4
    assert log2.recovered_bytes_truncated == len(batch(2)) - 5
    assert read_offsets(str(tmp_path / "d0" / "recovery-point-offset-checkpoint")) == {TP: 4}
    m2.shutdown()


def test_meta_properties_mismatch_stops_startup(tmp_path: Path) -> None:
    manager(tmp_path).shutdown()
    with pytest.raises(MetaPropertiesError, match=r"node.id 1 .* node.id 2"):
        manager(tmp_path, node_id=2)
    with pytest.raises(MetaPropertiesError, match=r"'c1'.*'c2'"):
        manager(tmp_path, cluster_id="c2")
    m = manager(tmp_path, cluster_id=None)
    assert m.cluster_id == "c1"
    m.shutdown()


def test_logs_spread_over_dirs_and_delete(tmp_path: Path) -> None:
    m = manager(tmp_path, dirs=2)
    tps = [TopicPartition("t", p) for p in range(4)]
    for tp in tps:
        m.get_or_create_log(tp, SMALL).append_as_leader(batch(1), 0)
    dirs = [m.log_dir_of(tp) for tp in tps]
    assert dirs.count(str(tmp_path / "d0")) == 2 and dirs.count(str(tmp_path / "d1")) == 2
    assert m.delete_log(tps[0]) and not m.delete_log(tps[0])
    assert m.get_log(tps[0]) is None
    assert not (Path(dirs[0]) / "t-0").exists()
    assert not [n for n in os.listdir(dirs[0]) if n.endswith("-delete")]
    assert tps[0] not in read_offsets(str(Path(dirs[0]) / "log-start-offset-checkpoint"))
    # A new log of the same partition starts from scratch.
    assert m.get_or_create_log(tps[0], SMALL).log_end_offset == 0
    m.shutdown()
    m2 = manager(tmp_path, dirs=2)
    assert {log.topic_partition for log in m2.logs()} == set(tps)
    m2.shutdown()


def test_interrupted_delete_is_finished_at_start(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.get_or_create_log(TP, SMALL).append_as_leader(batch(1), 0)
    m.shutdown()
    d = tmp_path / "d0"
    os.rename(d / "orders-0", d / "orders-0.0123abc-delete")
    m2 = manager(tmp_path)
    assert m2.logs() == [] and os.listdir(d).count("orders-0.0123abc-delete") == 0
    m2.shutdown()


def test_a_topic_with_the_longest_legal_name_can_be_deleted(tmp_path: Path) -> None:
    """Its `-delete` directory name is cut to fit NAME_MAX (KAFKA-4893). Before, the rename
    failed with ENAMETOOLONG and the topic could never be deleted."""
    m = manager(tmp_path)
    tps = [TopicPartition("x" * 249, p) for p in (0, 99_999)]
    for tp in tps:
        m.get_or_create_log(tp, SMALL).append_as_leader(batch(1), 0)
    assert m.delete_logs(tps) == 2
    assert os.listdir(tmp_path / "d0") == [
        n for n in os.listdir(tmp_path / "d0") if not n.startswith("x")
    ]
    m.shutdown()
    assert manager(tmp_path).logs() == []


def test_no_partition_log_takes_the_metadata_log_directory(tmp_path: Path) -> None:
    """A topic named __cluster_metadata would have its partition 0 in the metadata log's own
    directory (metadata.log.dir defaults to the log dir): after a restart the broker read the
    metadata log as a partition, truncated it and deleted every topic."""
    m = manager(tmp_path)
    with pytest.raises(KafkaError, match="metadata log's name") as info:
        m.get_or_create_log(METADATA_PARTITION)
    assert info.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert not (tmp_path / "d0" / METADATA_PARTITION.dir_name).exists()
    m.shutdown()


def test_get_or_create_updates_config_and_checks_topic_id(tmp_path: Path) -> None:
    m = manager(tmp_path)
    log = m.get_or_create_log(TP, SMALL, topic_id="A")
    other = SMALL.replace(retention_ms=5)
    assert m.get_or_create_log(TP, other) is log and log.config == other
    with pytest.raises(KafkaError, match="topic id A, not B"):
        m.get_or_create_log(TP, topic_id="B")
    with pytest.raises(KafkaError, match="illegal characters"):
        m.get_or_create_log(TopicPartition("bad/name", 0))
    m.shutdown()


def test_startup_uses_topic_configs(tmp_path: Path) -> None:
    m = manager(tmp_path)
    m.get_or_create_log(TP, SMALL)
    m.shutdown()
    m2 = LogManager([tmp_path / "d0"], node_id=1, cluster_id="c1")
    m2.startup({"orders": SMALL.replace(retention_bytes=77)})
    assert m2.get_log(TP).config.retention_bytes == 77  # type: ignore[union-attr]
    m2.shutdown()


def test_retention_by_size_never_deletes_active_segment(tmp_path: Path) -> None:
    m = manager(tmp_path)
    cfg = SMALL.replace(segment_bytes=500, retention_bytes=1200, retention_ms=-1)
    log = m.get_or_create_log(TP, cfg)
    for _ in range(40):
        log.append_as_leader(batch(1, size=100), 0)
    sizes = [s.size for s in log.segments]
    deleted = m.run_retention()
    assert deleted > 0
    assert log.size <= 1200 + sizes[-1] and sum(sizes[deleted:]) == log.size
    assert sum(sizes[deleted - 1 :]) > 1200  # deleting one more would go below the limit
    assert log.log_start_offset == log.segments[0].base_offset > 0
    assert read_offsets(str(tmp_path / "d0" / "log-start-offset-checkpoint")) == {
        TP: log.log_start_offset
    }
    assert [r.offset for r in read_all(log)] == list(range(log.log_start_offset, 40))
    with pytest.raises(KafkaError, match="out of range"):
        log.read(0, 100)
    log.update_config(cfg.replace(retention_bytes=0))
    m.run_retention()
    assert len(log.segments) == 1 and log.log_end_offset == 40
    m.shutdown()


def test_retention_by_time_with_injected_clock(tmp_path: Path) -> None:
    m = manager(tmp_path, clock_ms=lambda: 0)
    cfg = SMALL.replace(segment_bytes=300, retention_ms=1000)
    log = m.get_or_create_log(TP, cfg)
    for i in range(12):
        log.append_as_leader(batch(1, ts=10_000 + 100 * i, size=100), 0)
    maxima = [s.max_timestamp()[0] for s in log.segments]
    assert len(maxima) >= 4
    # At now = the second segment's max + retention.ms, only the first has expired.
    assert m.run_retention(now_ms=maxima[1] + 1000) == 1
    assert m.run_retention(now_ms=maxima[1] + 1001) == 1
    # Everything expired: all but the active segment go.
    assert m.run_retention(now_ms=10**12) == len(maxima) - 3
    assert len(log.segments) == 1
    # A high watermark bound keeps segments above it.
    for i in range(12):
        log.append_as_leader(batch(1, ts=20_000 + 100 * i, size=100), 0)
    assert m.run_retention(now_ms=10**12, high_watermarks={TP: 12}) == 1  # [11, 12) is below
    assert m.run_retention(now_ms=10**12, high_watermarks={TP: 12}) == 0
    assert m.run_retention(now_ms=10**12, high_watermarks={TP: 24}) > 0
    m.shutdown()


def test_retention_minus_one_keeps_everything(tmp_path: Path) -> None:
    m = manager(tmp_path)
    log = m.get_or_create_log(TP, SMALL.replace(segment_bytes=300, retention_ms=-1))
    for _ in range(10):
        log.append_as_leader(batch(1, ts=0, size=100), 0)
    assert m.run_retention(now_ms=10**15) == 0
    m.shutdown()


def test_flush_dirty_follows_flush_ms(tmp_path: Path) -> None:
    m = manager(tmp_path, clock_ms=lambda: 1000)
    a = m.get_or_create_log(TopicPartition("a", 0), SMALL.replace(flush_ms=500))
    b = m.get_or_create_log(TopicPartition("b", 0), LogConfig())
    a.append_as_leader(batch(1), 0)
    b.append_as_leader(batch(1), 0)
    assert m.flush_dirty(now_ms=1499) == 0
    assert m.flush_dirty(now_ms=1500) == 1
    assert a.recovery_point == 1 and b.recovery_point == 0
    m.shutdown()


def test_api_needs_startup(tmp_path: Path) -> None:
    m = LogManager(tmp_path, node_id=1)
    with pytest.raises(RuntimeError, match="startup"):
        m.get_or_create_log(TP)


def test_metadata_log_dir_is_not_a_partition(tmp_path: Path) -> None:
    # metadata.log.dir defaults to the first log dir, so the metadata log lives beside the
    # partitions; the LogManager must leave it to its owner.
    d = tmp_path / "d0"
    (d / METADATA_PARTITION.dir_name).mkdir(parents=True)
    m = manager(tmp_path)
    assert m.logs() == []
    assert m.get_log(METADATA_PARTITION) is None
    m.shutdown()
    assert (d / METADATA_PARTITION.dir_name).is_dir()


def test_flush_dirty_visits_only_logs_that_may_need_a_flush(tmp_path: Path) -> None:
    m = manager(tmp_path, clock_ms=lambda: 1000)
    idle = [m.get_or_create_log(TopicPartition("idle", p), LogConfig()) for p in range(5)]
    timed = m.get_or_create_log(TopicPartition("timed", 0), SMALL.replace(flush_ms=500))
    rolled = m.get_or_create_log(TopicPartition("rolled", 0), LogConfig())
    assert m.dirty_logs == 7  # new logs start tracked ...
    assert m.flush_dirty(now_ms=1000) == 0
    assert m.dirty_logs == 0  # ... and are dropped once found with nothing to flush
    # Appends without a finite flush.ms never come due by time: not tracked (Kafka's default).
    idle[0].append_as_leader(batch(1), 0)
    assert m.flush_dirty(now_ms=10**12) == 0 and m.dirty_logs == 0
    # Unflushed data under a finite flush.ms stays tracked until flushed.
    timed.append_as_leader(batch(1), 0)
    assert m.flush_dirty(now_ms=1499) == 0 and m.dirty_logs == 1
    assert m.flush_dirty(now_ms=1500) == 1 and m.dirty_logs == 0
    assert timed.recovery_point == 1
    # A roll is tracked until its segments are fsynced (the recovery point moves).
    rolled.append_as_leader(batch(1), 0)
    rolled.roll()
    assert m.dirty_logs == 1
    assert m.flush_dirty(now_ms=1000) == 1 and m.dirty_logs == 0
    assert rolled.recovery_point == 1
    # A config change to a finite flush.ms brings a log with unflushed data back.
    idle[0].update_config(SMALL.replace(flush_ms=100))
    assert m.flush_dirty(now_ms=2000) == 1 and idle[0].recovery_point == 1
    # A deleted log is forgotten.
    timed.append_as_leader(batch(1), 0)
    m.delete_log(TopicPartition("timed", 0))
    assert m.dirty_logs == 0 and m.flush_dirty(now_ms=10**12) == 0
    m.shutdown()


def test_a_failed_log_dir_goes_offline_and_the_others_go_on(tmp_path: Path) -> None:
    """Kafka's LogDirFailureChannel: the failed dir's logs answer KAFKA_STORAGE_ERROR at once,
    new logs go to the dirs left, and nothing is written to the failed dir again."""
    m = manager(tmp_path, dirs=2)
    failed: list[str] = []
    m.on_dir_failed = lambda d, reason: failed.append(d)
    a = m.get_or_create_log(TopicPartition("t", 0), SMALL)
    b = m.get_or_create_log(TopicPartition("t", 1), SMALL)
    bad = m.log_dir_of(a.topic_partition)
    assert bad is not None and m.log_dir_of(b.topic_partition) != bad
    m.fail_dir(bad, "EIO on a test disk")
    m.fail_dir(bad, "again")  # told once
    assert failed == [bad] and m.online_dirs == [m.log_dir_of(b.topic_partition)]
    with pytest.raises(KafkaError, match="offline log dir") as info:
        a.append_as_leader(batch(1), 0)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    b.append_as_leader(batch(1), 0)
    assert m.log_dir_of(m.get_or_create_log(TopicPartition("t", 2), SMALL).topic_partition) != bad
    before = {p.name: p.stat().st_mtime_ns for p in Path(bad).iterdir()}
    m.shutdown()
    assert not (Path(bad) / CLEAN_SHUTDOWN_FILE).exists()
    assert {p.name: p.stat().st_mtime_ns for p in Path(bad).iterdir()} == before
