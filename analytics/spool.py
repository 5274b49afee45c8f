"""Local telemetry spools (JSON Lines) as the raw schema, so the parse functions read them
like the topics.

A spool directory holds `*.jsonl` files (at any depth), one JSON object per line: the value
the shipper would have produced. Each line's topic is the telemetry topic named in its file's
path (e.g. `__trioka_logs-000003.jsonl` or `__trioka_logs/000003.jsonl`) or, when the path
names none, the topic its content belongs to: `"kind": "metrics"` -> `__trioka_metrics`,
`"kind": "log"` -> `__trioka_logs`, a chaos history op (`index`, `time_ns`) ->
`__trioka_chaos_history`. Rows: key = the source (Source.key from the JSON, else null),
value = the line's bytes, partition -1, offset -1, timestamp from `ts_ms` (null without one),
timestampType 0. A torn last line (a crash mid-write) is not JSON: the parse functions drop it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from analytics.schemas import RAW_SCHEMA
from protocol.telemetry import CHAOS_HISTORY_TOPIC, LOGS_TOPIC, METRICS_TOPIC, TELEMETRY_TOPICS

SPOOL_GLOB = "*.jsonl"


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
    lines = (
        spark.read.text([str(f) for f in files])
        .select(F.col("value").alias("line"), F.col("_metadata.file_path").alias("path"))
        .where(F.length(F.trim("line")) > 0)
    )
    line = F.col("line")
    ts_ms = F.get_json_object(line, "$.ts_ms").cast("long")
    return lines.select(
        _source_key(line).cast("binary").alias("key"),
        line.cast("binary").alias("value"),
        _topic(F.col("path"), line).alias("topic"),
        F.lit(-1).cast("int").alias("partition"),
        F.lit(-1).cast("long").alias("offset"),
        F.timestamp_millis(ts_ms).alias("timestamp"),
        F.lit(0).cast("int").alias("timestampType"),
    )


def _topic(path: Column, line: Column) -> Column:
    kind = F.get_json_object(line, "$.kind")
    by_path = F.lit(None).cast("string")
    # longest first: no telemetry topic name is a prefix of another today, but stay exact
    for topic in sorted(TELEMETRY_TOPICS, key=len):
        by_path = F.when(path.contains(topic), F.lit(topic)).otherwise(by_path)
    by_content = (
        F.when(kind == "metrics", F.lit(METRICS_TOPIC))
        .when(kind == "log", F.lit(LOGS_TOPIC))
        .when(
            F.get_json_object(line, "$.index").isNotNull()
            & F.get_json_object(line, "$.time_ns").isNotNull(),
            F.lit(CHAOS_HISTORY_TOPIC),
        )
    )
    return F.coalesce(by_path, by_content)


def _source_key(line: Column) -> Column:
    """Source.key of a metrics snapshot ($.source) or a log record (top-level role/node_id)."""
    role = F.coalesce(F.get_json_object(line, "$.source.role"), F.get_json_object(line, "$.role"))
    node = F.coalesce(
        F.get_json_object(line, "$.source.node_id"), F.get_json_object(line, "$.node_id")
    )
    return F.when(node.isNull(), role).otherwise(F.concat_ws("-", role, node))
