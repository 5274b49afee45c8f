"""deploy.telemetry.spool: append, drain in order, the byte bound, torn lines, restarts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy.telemetry.spool import POSITION_FILE, Spool, SpoolRecord


def rec(i: int, topic: str = "__trioka_logs") -> SpoolRecord:
    return SpoolRecord(topic, "broker-1", json.dumps({"seq": i, "event": f"e{i}"}))


def seqs(records: list[SpoolRecord]) -> list[int]:
    return [json.loads(r.value)["seq"] for r in records]


def drain_all(spool: Spool, step: int = 3) -> list[int]:
    out: list[int] = []
    while spool.pending:
        batch = spool.read(step)
        out += seqs(batch.records)
        spool.commit(batch.end)
    return out


def test_append_then_drain_in_order_across_segments(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s", max_bytes=10**6, segment_bytes=200)
    spool.open()
    assert not spool.pending
    result = spool.append([rec(i) for i in range(20)])
    assert result.spooled == {"__trioka_logs": 20} and result.dropped == {}
    assert len(list((tmp_path / "s").glob("*.jsonl"))) > 1  # rolled
    assert drain_all(spool) == list(range(20))
    # Drained segments are gone: an empty spool holds no segment.
    assert list((tmp_path / "s").glob("*.jsonl")) == []
    assert spool.size_bytes == 0


def test_read_without_commit_consumes_nothing(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10**6)
    spool.open()
    spool.append([rec(i) for i in range(5)])
    assert seqs(spool.read(3).records) == [0, 1, 2]
    assert seqs(spool.read(3).records) == [0, 1, 2]  # at-least-once: a failed produce retries


def test_appends_while_draining_keep_the_order(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10**6, segment_bytes=150)
    spool.open()
    spool.append([rec(i) for i in range(4)])
    batch = spool.read(2)
    spool.commit(batch.end)
    spool.append([rec(i) for i in range(4, 8)])
    assert seqs(batch.records) + drain_all(spool) == list(range(8))
    spool.append([rec(8)])  # after a complete drain the next segment number is higher
    assert drain_all(spool) == [8]


def test_the_byte_bound_drops_the_newest_and_counts_them(tmp_path: Path) -> None:
    room = 2 * len(rec(0).line()) + len(rec(1, "__trioka_metrics").line()) + 1
    spool = Spool(tmp_path, max_bytes=room)  # records 0, 1 and 2 fit
    spool.open()
    first = spool.append([rec(0), rec(1, "__trioka_metrics")])
    second = spool.append([rec(2), rec(3), rec(4, "__trioka_metrics")])
    assert first.spooled == {"__trioka_logs": 1, "__trioka_metrics": 1}
    assert second.spooled == {"__trioka_logs": 1}
    assert second.dropped == {"__trioka_logs": 1, "__trioka_metrics": 1}
    assert spool.size_bytes <= spool.max_bytes
    assert drain_all(spool) == [0, 1, 2]
    # Draining frees the room again.
    assert spool.append([rec(5)]).spooled == {"__trioka_logs": 1}


def test_a_torn_last_line_is_skipped_with_a_reason(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10**6)
    spool.open()
    spool.append([rec(0), rec(1)])
    segment = next(tmp_path.glob("*.jsonl"))
    with segment.open("ab") as f:  # a crash in the middle of a write
        f.write(rec(2).line()[:17])
    restarted = Spool(tmp_path, max_bytes=10**6)
    restarted.open()
    batch = restarted.read(10)
    assert seqs(batch.records) == [0, 1]
    assert len(batch.skipped) == 1 and "torn line" in batch.skipped[0]
    restarted.commit(batch.end)
    # A restarted process appends to a new segment, never after the torn line.
    restarted.append([rec(3)])
    assert drain_all(restarted) == [3]


def test_a_line_that_is_not_a_record_is_skipped(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10**6)
    spool.open()
    spool.append([rec(0)])
    segment = next(tmp_path.glob("*.jsonl"))
    with segment.open("ab") as f:
        f.write(b'{"topic": 1}\n{not json\n')
    restarted = Spool(tmp_path, max_bytes=10**6)
    restarted.open()
    restarted.append([rec(1)])
    batch = restarted.read(10)
    assert seqs(batch.records) == [0, 1]
    assert [p.split(": ", 1)[1][:8] for p in batch.skipped] == ["needs a ", "not JSON"]


def test_the_drain_position_survives_a_restart(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10**6, segment_bytes=10**6)
    spool.open()
    spool.append([rec(i) for i in range(6)])
    batch = spool.read(4)
    spool.commit(batch.end)
    assert (tmp_path / POSITION_FILE).exists()
    restarted = Spool(tmp_path, max_bytes=10**6)
    restarted.open()
    assert drain_all(restarted) == [4, 5]
    assert not (tmp_path / POSITION_FILE).exists()


def test_a_position_naming_a_missing_segment_starts_at_the_oldest(tmp_path: Path) -> None:
    spool = Spool(tmp_path, max_bytes=10**6)
    spool.open()
    spool.append([rec(0)])
    (tmp_path / POSITION_FILE).write_text('{"segment": 99, "offset": 5}')
    restarted = Spool(tmp_path, max_bytes=10**6)
    restarted.open()
    assert drain_all(restarted) == [0]


def test_spool_record_line_round_trip_and_refusals() -> None:
    r = SpoolRecord("__trioka_metrics", "controller-3001", '{"a":[1,2],"b":"x\\ny"}')
    assert r.line().endswith(b"\n") and r.line().count(b"\n") == 1
    assert SpoolRecord.parse(r.line()) == r
    with pytest.raises(ValueError, match="not JSON"):
        SpoolRecord.parse(b"{")
    with pytest.raises(ValueError, match="object value"):
        SpoolRecord.parse(b'{"topic": "t", "key": "k", "value": 3}\n')


def test_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        Spool("/nonexistent", max_bytes=0)
