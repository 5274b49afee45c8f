"""Local telemetry spools (JSON Lines) as the raw schema, so the parse functions read them
like the topics.

The shipper's spool (deploy/telemetry/spool.py, protocol.telemetry's SPOOL_* contract): a
directory per process of segments `<20-digit number>.jsonl`, one record per line:
`{"topic": "__trioka_logs", "key": "broker-1", "value": {...}}`. `--spool DIR` may name one
such directory or any directory above them (a cluster's): every `*.jsonl` below is read.

A line without that envelope is taken as a bare record value (a hand-written file, a chaos
history.jsonl): its topic is the telemetry topic named in its file's path, else the one its
content belongs to (`"kind": "metrics"` -> `__trioka_metrics`, `"kind": "log"` ->
`__trioka_logs`, a chaos history op (`index`, `time_ns`) -> `__trioka_chaos_history`), and its
key the Source.key in it. Rows: key, value (the record's JSON bytes), topic, partition -1,
offset = the line's number in its file (from 0), timestamp from the value's `ts_ms` (null
without one), timestampType 0. A torn line (a crash mid-write) is not JSON: its row has no
topic and the parse functions drop it. Lines the cluster already took (before the spool's
drain position) are read too: the report drops duplicate records.

The files are read by a Python data source (`format("trioka-spool")`, one input partition
per file): Spark's own file readers skip names starting with `_` or `.` as hidden, and the
telemetry topics' names start with `__`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from analytics.raw_source import ItemReader, RawDataSource
from analytics.schemas import RAW_SCHEMA
from analytics.source_client import CREATE_TIME, to_timestamp
from protocol.telemetry import CHAOS_HISTORY_TOPIC, LOGS_TOPIC, METRICS_TOPIC, TELEMETRY_TOPICS

SPOOL_GLOB = "*.jsonl"
FORMAT = "trioka-spool"


class SpoolError(ValueError):
    """A spool path that is not a readable directory."""


def spool_files(dirs: Iterable[str | Path]) -> list[Path]:
    """Every `*.jsonl` file under `dirs` (sorted); SpoolError for a missing directory."""
    files: list[Path] = []
    for d in dirs:
        path = Path(d)
        if not path.is_dir():
            raise SpoolError(f"spool directory {str(path)!r} does not exist or is not a directory")
        files.extend(sorted(p for p in path.rglob(SPOOL_GLOB) if p.is_file()))
    return files


def read_spool(spark: SparkSession, dirs: Iterable[str | Path]) -> DataFrame:
    """The lines of every spool file under `dirs` as RAW_SCHEMA rows (empty without files)."""
    files = spool_files(dirs)
    if not files:
        return spark.createDataFrame([], RAW_SCHEMA)
    spark.dataSource.register(SpoolDataSource)
    return spark.read.format(FORMAT).option("files", json.dumps([str(f) for f in files])).load()


def topic_of(path: str, value: Any) -> str | None:
    """The telemetry topic of one parsed line (None: not a telemetry record)."""
    for topic in TELEMETRY_TOPICS:
        if topic in path:
            return topic
    if not isinstance(value, dict):
        return None
    kind = value.get("kind")
    if kind == "metrics":
        return METRICS_TOPIC
    if kind == "log":
        return LOGS_TOPIC
    if "index" in value and "time_ns" in value:
        return CHAOS_HISTORY_TOPIC
    return None


def source_key(value: Any) -> str | None:
    """protocol.telemetry.Source.key of a metrics snapshot or a log record."""
    if not isinstance(value, dict):
        return None
    source = value.get("source") if isinstance(value.get("source"), dict) else value
    role, node_id = source.get("role"), source.get("node_id")
    if role is None:
        return None
    return str(role) if node_id is None else f"{role}-{node_id}"


def spool_rows(path: str, lines: Iterable[bytes]) -> Iterator[tuple[Any, ...]]:
    """RAW_SCHEMA rows of one spool file's lines (blank lines skipped)."""
    for number, line in enumerate(lines):
        data = line.rstrip(b"\r\n")
        if not data.strip():
            continue
        try:
            obj = json.loads(data)
        except ValueError:  # a torn line: kept, without a topic (the parse drops it)
            yield (None, data, None, -1, number, None, CREATE_TIME)
            continue
        topic, key, value = _unwrap(path, obj)
        if value is not obj:
            data = json.dumps(value, separators=(",", ":")).encode()
        ts_ms = value.get("ts_ms") if isinstance(value, dict) else None
        yield (
            None if key is None else key.encode(),
            data,
            topic,
            -1,
            number,
            to_timestamp(ts_ms) if type(ts_ms) is int else None,
            CREATE_TIME,
        )


def _unwrap(path: str, obj: Any) -> tuple[str | None, str | None, Any]:
    """(topic, key, value) of a spooled line: the shipper's envelope, or a bare value."""
    if (
        isinstance(obj, dict)
        and isinstance(obj.get("topic"), str)
        and isinstance(obj.get("value"), dict)
        and set(obj) <= {"topic", "key", "value"}
    ):
        key = obj.get("key")
        return obj["topic"], key if isinstance(key, str) else None, obj["value"]
    return topic_of(path, obj), source_key(obj), obj


class SpoolDataSource(RawDataSource):
    """`format("trioka-spool")` with option `files`: a JSON list of spool file paths."""

    format_name = FORMAT

    def reader(self, schema: StructType) -> DataSourceReader:
        try:
            files = json.loads(self.options.get("files", ""))
        except ValueError:
            files = None
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise SpoolError('option files: expected a JSON list of paths, e.g. ["a.jsonl"]')
        return SpoolReader(files)


class SpoolReader(ItemReader[str], DataSourceReader):
    """One Spark task per spool file."""

    def __init__(self, files: Sequence[str]) -> None:
        self.files = list(files)

    def partitions(self) -> Sequence[InputPartition]:
        return self.item_partitions(self.files)

    def read_item(self, item: str) -> Iterator[tuple[Any, ...]]:
        with open(item, "rb") as lines:
            yield from spool_rows(item, lines)
