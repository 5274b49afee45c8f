"""Checkpoint formats, atomic writes, meta.properties, the handle LRU, LogConfig, indexes,
and the leader epoch cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from protocol.config_defs import TOPIC_CONFIGS
from protocol.names import TopicPartition
from storage import LeaderEpochFileCache, LogConfig, MetaPropertiesError
from storage.checkpoints import (
    EpochEntry,
    read_epochs,
    read_offsets,
    read_partition_metadata,
    write_epochs,
    write_offsets,
    write_partition_metadata,
)
from storage.errors import CheckpointError
from storage.files import FileHandleCache, atomic_write
from storage.index import OffsetIndex, TimeIndex
from storage.meta_properties import ensure_meta_properties, read_meta_properties

# -- checkpoint files --------------------------------------------------------------------------


def test_offset_checkpoint_is_kafkas_text_format(tmp_path: Path) -> None:
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    write_offsets(path, {TopicPartition("b", 1): 7, TopicPartition("a", 0): 42})
    assert Path(path).read_text() == "0\n2\na 0 42\nb 1 7\n"
    assert read_offsets(path) == {TopicPartition("a", 0): 42, TopicPartition("b", 1): 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()


def test_empty_and_missing_checkpoints(tmp_path: Path) -> None:
    path = str(tmp_path / "cp")
    assert read_offsets(path) == {}
    write_offsets(path, {})
    assert Path(path).read_text() == "0\n0\n"
    assert read_offsets(path) == {}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "truncated"),
        ("0\n", "truncated"),
        ("1\n0\n", "version '1'"),
        ("0\nx\n", "bad entry count"),
        ("0\n2\na 0 1\n", "says 2 entries but holds 1"),
        ("0\n1\na 0\n", "line 3: malformed entry"),
        ("0\n1\na b 1\n", "bad partition or offset"),
    ],
)
def test_malformed_checkpoints_name_the_problem(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointError, match=words) as exc:
        read_offsets(str(path))
    assert str(path) in str(exc.value)


def test_epoch_checkpoint_and_partition_metadata(tmp_path: Path) -> None:
    path = str(tmp_path / "leader-epoch-checkpoint")
    assert read_epochs(path) is None
    write_epochs(path, [EpochEntry(0, 0), EpochEntry(3, 120)])
    assert Path(path).read_text() == "0\n2\n0 0\n3 120\n"
    assert read_epochs(path) == [(0, 0), (3, 120)]
    meta = str(tmp_path / "partition.metadata")
    assert read_partition_metadata(meta) is None
    write_partition_metadata(meta, "AAAAAAAAAAAAAAAAAAAAAA")
    assert Path(meta).read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"
    assert read_partition_metadata(meta) == "AAAAAAAAAAAAAAAAAAAAAA"
    Path(meta).write_text("nonsense")
    with pytest.raises(CheckpointError, match=r"partition\.metadata"):
        read_partition_metadata(meta)


def test_atomic_write_keeps_old_file_when_write_fails(tmp_path: Path) -> None:
    path = tmp_path / "f"
    atomic_write(str(path), b"old")
    os.mkdir(str(path) + ".tmp")  # the tmp file cannot be created
    with pytest.raises(OSError):
        atomic_write(str(path), b"new")
    assert path.read_bytes() == b"old"


# -- meta.properties ---------------------------------------------------------------------------


def test_meta_properties_created_then_verified(tmp_path: Path) -> None:
    props = ensure_meta_properties(str(tmp_path), 3, "clusterA")
    assert (props.node_id, props.cluster_id, props.version) == (3, "clusterA", 1)
    text = (tmp_path / "meta.properties").read_text()
    assert "cluster.id=clusterA\n" in text and "node.id=3\n" in text and "version=1\n" in text
    assert ensure_meta_properties(str(tmp_path), 3, "clusterA") == props
    # Unknown cluster id: adopt the stored one.
    assert ensure_meta_properties(str(tmp_path), 3, None).cluster_id == "clusterA"


@pytest.mark.parametrize(
    ("node_id", "cluster_id", "words"),
    [
        (4, "clusterA", ["node.id 3", "node.id 4"]),
        (3, "clusterB", ["'clusterA'", "'clusterB'"]),
    ],
)
def test_meta_properties_mismatch_names_both_values(
    tmp_path: Path, node_id: int, cluster_id: str, words: list[str]
) -> None:
    ensure_meta_properties(str(tmp_path), 3, "clusterA")
    with pytest.raises(MetaPropertiesError) as exc:
        ensure_meta_properties(str(tmp_path), node_id, cluster_id)
    for word in words:
        assert word in str(exc.value)
    assert str(tmp_path / "meta.properties") in str(exc.value)


def test_meta_properties_version_0_is_read_and_upgraded(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("#x\nbroker.id=5\nversion=0\ncluster.id=c\n")
    assert read_meta_properties(str(tmp_path)).node_id == 5  # type: ignore[union-attr]
    ensure_meta_properties(str(tmp_path), 5, "c")
    assert read_meta_properties(str(tmp_path)).version == 1  # type: ignore[union-attr]


def test_meta_properties_without_node_id(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text("version=1\n")
    with pytest.raises(MetaPropertiesError, match=r"no node\.id"):
        read_meta_properties(str(tmp_path))


# -- handle cache ------------------------------------------------------------------------------


def test_handle_cache_is_lru(tmp_path: Path) -> None:
    cache = FileHandleCache(2)
    a, b, c = (str(tmp_path / n) for n in "abc")
    cache.fd(a)
    cache.fd(b)
    cache.fd(a)  # a is now the most recent
    cache.fd(c)  # evicts b
    assert cache.is_open(a) and cache.is_open(c) and not cache.is_open(b)
    assert cache.opens == 3
    os.pwrite(cache.fd(b), b"x", 0)
    assert cache.opens == 4 and len(cache) == 2
    cache.close_under(str(tmp_path))
    assert len(cache) == 0


def test_handle_cache_rejects_tiny_limit() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        FileHandleCache(1)


# -- LogConfig ---------------------------------------------------------------------------------


def test_log_config_from_topic_configs() -> None:
    typed = TOPIC_CONFIGS.resolve({"retention.ms": "1000", "segment.bytes": "2048"})
    cfg = LogConfig.from_topic_configs({**typed, "some.future.config": 1})
    assert cfg.retention_ms == 1000 and cfg.segment_bytes == 2048
    assert cfg.max_message_bytes == 1048588 and cfg.retention_bytes == -1
    assert LogConfig() == LogConfig.from_topic_configs(TOPIC_CONFIGS.defaults())
    assert LogConfig.from_topic_configs(cfg.to_topic_configs()) == cfg


# -- indexes -----------------------------------------------------------------------------------


def test_offset_index_lookup_and_truncate() -> None:
    idx = OffsetIndex(100, max_entries=4)
    for off, pos in [(105, 50), (110, 120), (120, 300)]:
        idx.append(off, pos)
    table = {99: (100, 0), 100: (100, 0), 104: (100, 0), 105: (105, 50), 119: (110, 120),
             120: (120, 300), 10**9: (120, 300)}  # fmt: skip
    for target, expected in table.items():
        assert idx.lookup(target) == expected, target
    assert not idx.is_full
    idx.append(130, 400)
    assert idx.is_full
    raw = idx.to_bytes()
    assert len(raw) == 32 and raw[:8] == bytes.fromhex("0000000500000032")
    again = OffsetIndex.from_bytes(raw + b"\x01\x02", 100, 4)
    assert again.lookup(125) == (120, 300) and again.trim_needed
    idx.truncate_to_offset(111)
    assert idx.last_entry() == (110, 120)
    assert idx.is_sane(200) and not idx.is_sane(100)


def test_time_index_lookup_only_moves_forward() -> None:
    idx = TimeIndex(0, max_entries=10)
    idx.maybe_append(1000, 3)
    idx.maybe_append(900, 5)  # not larger: ignored
    idx.maybe_append(2000, 8)
    assert len(idx) == 2
    assert idx.lookup(999) == (-1, 0)
    assert idx.lookup(1000) == (1000, 3)
    assert idx.lookup(1999) == (1000, 3)
    assert idx.lookup(5000) == (2000, 8)
    assert TimeIndex.from_bytes(idx.to_bytes(), 0, 10).last_entry() == (2000, 8)
    idx.truncate_to_offset(8)
    assert idx.last_entry() == (1000, 3)


# -- leader epoch cache ------------------------------------------------------------------------


def test_epoch_cache_assign_rules(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(str(tmp_path))
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5)  # same epoch, later offset: no-op
    assert cache.assign(3, 10)
    assert cache.assign(5, 20)
    assert cache.entries() == [(1, 0), (3, 10), (5, 20)]
    # A lower epoch, or an earlier start, removes what would no longer be monotonic (as Kafka).
    assert cache.assign(4, 15)
    assert cache.entries() == [(1, 0), (3, 10), (4, 15)]
    assert cache.assign(4, 12)
    assert cache.entries() == [(1, 0), (3, 10), (4, 12)]
    assert not cache.assign(-1, 30)
    assert LeaderEpochFileCache(str(tmp_path)).entries() == cache.entries()


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (-1, (-1, -1)),
        (0, (0, 0)),  # below the first epoch: (requested, first start)
        (1, (10, 1)),
        (2, (10, 1)),  # between epochs: the largest epoch below and the next start
        (3, (20, 3)),
        (4, (20, 3)),
        (5, (42, 5)),  # the latest epoch ends at the log end offset
        (6, (-1, -1)),
    ],
)
def test_end_offset_for_epoch(tmp_path: Path, requested: int, expected: tuple[int, int]) -> None:
    cache = LeaderEpochFileCache(str(tmp_path))
    cache.assign(1, 5)
    cache.assign(3, 10)
    cache.assign(5, 20)
    # Shift the table so the answers are distinct.
    cache.restore([EpochEntry(1, 0), EpochEntry(3, 10), EpochEntry(5, 20)])
    assert tuple(cache.end_offset_for(requested, 42)) == expected


def test_epoch_cache_truncation(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache(str(tmp_path))
    for epoch, start in [(1, 0), (2, 10), (3, 20), (4, 30)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries() == [(1, 0), (2, 10)]
    cache.truncate_from_start(15)
    assert cache.entries() == [(2, 15)]
    cache.truncate_from_start(15)
    assert cache.entries() == [(2, 15)]
    assert LeaderEpochFileCache(str(tmp_path)).entries() == [(2, 15)]
    cache.clear()
    assert cache.latest_epoch() is None


def test_epoch_cache_with_bad_file_starts_empty(tmp_path: Path) -> None:
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n2\n5 10\n3 20\n")
    cache = LeaderEpochFileCache(str(tmp_path))
    assert cache.entries() == [] and cache.load_problem
