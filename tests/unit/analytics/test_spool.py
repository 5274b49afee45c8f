"""The spool reader on hand-written JSONL files: topics by path or content, the raw schema, a
torn last line dropped by the parse functions."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs pyspark: pip install 'trioka[analytics]'")

from analytics.schemas import RAW_SCHEMA, parse_history, parse_logs, parse_metrics
from analytics.spool import SpoolError, read_spool, spool_files
from deploy.telemetry.spool import Spool, SpoolRecord
from protocol.telemetry import (
    CHAOS_HISTORY_TOPIC,
    LOGS_TOPIC,
    METRICS_TOPIC,
    SPOOL_DIR_NAME,
    MetricsSnapshot,
    Sample,
    Source,
    log_record,
)

SNAPSHOT = MetricsSnapshot(
    1_000, Source("broker", 1), [Sample("a_total", {}, 1.0), Sample("b", {"x": "y"}, 2.0)]
).to_json()
LOG = log_record({"event": "isr shrink", "level": "info", "role": "broker", "node_id": 2,
                  "topic": "t", "partition": 0, "old_isr": [1, 2], "new_isr": [1]}, 2_000)  # fmt: skip
OP = {"index": 0, "time_ns": 5, "process": "nemesis", "type": "info", "kind": "nemesis",
      "value": {"fault": "kill", "targets": ["broker-1"], "detail": {}}, "error": None,
      "invocation": None}  # fmt: skip


def epoch_ms(ts: datetime) -> int:
    return round(ts.timestamp() * 1000)


def write(path: Path, *lines: Any, torn: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(line) + "\n" for line in lines)
    path.write_text(text + torn)


def test_spool_lines_become_raw_rows_of_their_topic(spark: Any, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a / "broker-1" / "000001.jsonl", SNAPSHOT, LOG, OP, torn='{"v": 1, "kind": "lo')
    write(b / f"{LOGS_TOPIC}-000002.jsonl", {**LOG, "kind": "log", "node_id": 3})
    (b / "notes.txt").write_text("not a spool file\n")
    (b / "empty.jsonl").write_text("\n\n")
    raw = read_spool(spark, [a, b])
    assert raw.schema.simpleString() == RAW_SCHEMA.simpleString()
    rows = sorted((r.topic or "", r.key and bytes(r.key).decode(), r.partition, r.offset,
                   r.timestamp) for r in raw.collect())  # fmt: skip
    assert [r[:4] for r in rows] == sorted([
        (CHAOS_HISTORY_TOPIC, None, -1, 2),  # an op has no role: no key
        (LOGS_TOPIC, "broker-2", -1, 1),
        (LOGS_TOPIC, "broker-3", -1, 0),  # its topic from the file name
        (METRICS_TOPIC, "broker-1", -1, 0),
        ("", None, -1, 3),  # the torn line: no topic; the parse functions drop it
    ])  # fmt: skip
    assert sorted(epoch_ms(r[4]) for r in rows if r[4] is not None) == [1_000, 2_000, 2_000]
    assert parse_metrics(raw).count() == 2
    assert sorted(r.node_id for r in parse_logs(raw).collect()) == [2, 3]
    assert [r.fault for r in parse_history(raw).collect()] == ["kill"]


def test_no_spool_files_is_an_empty_frame_and_a_missing_dir_an_error(
    spark: Any, tmp_path: Path
) -> None:
    assert read_spool(spark, [tmp_path]).count() == 0
    assert spool_files([tmp_path]) == []
    with pytest.raises(SpoolError, match="does not exist or is not a directory"):
        read_spool(spark, [tmp_path / "nope"])


def test_the_shippers_own_spool_segments(spark: Any, tmp_path: Path) -> None:
    """Segments written by deploy.telemetry.spool (the shipper's): envelope lines."""
    spool = Spool(tmp_path / "broker-1" / SPOOL_DIR_NAME, max_bytes=1 << 20)
    spool.open()
    spool.append(
        [
            SpoolRecord(METRICS_TOPIC, "broker-1", json.dumps(SNAPSHOT)),
            SpoolRecord(LOGS_TOPIC, "broker-2", json.dumps(LOG)),
        ]
    )
    raw = read_spool(spark, [tmp_path])  # a directory above the process's spool
    rows = sorted((r.topic, bytes(r.key).decode(), r.offset) for r in raw.collect())
    assert rows == [(LOGS_TOPIC, "broker-2", 1), (METRICS_TOPIC, "broker-1", 0)]
    assert [r.value for r in parse_metrics(raw).orderBy("name").collect()] == [1.0, 2.0]
    [event] = parse_logs(raw).collect()
    assert (event.event, event.old_isr, event.new_isr) == ("isr shrink", [1, 2], [1])
