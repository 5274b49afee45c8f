"""Hand-made telemetry DataFrames for analytics tests, in the shapes analytics.schemas' parse
functions produce: samples, events (the LOG_EVENTS union) and chaos history ops (the columns of
them the failover analysis reads, FAILOVER_OPS_SCHEMA)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession

# The frames take analytics' own output schemas, so a column added there reaches the tests.
from analytics.schemas import EVENTS_SCHEMA, FAILOVER_OPS_SCHEMA, SAMPLES_SCHEMA


def _ts(ts_ms: int) -> datetime:
    return datetime.fromtimestamp(ts_ms / 1000, tz=UTC)


def _source(source: str) -> tuple[str, int | None]:
    role, _, node = source.rpartition("-")
    return (role, int(node)) if node.isdigit() else (source, None)


def sample(ts_ms: int, source: str, name: str, value: float | None, **labels: str) -> tuple:
    role, node_id = _source(source)
    number = None if value is None else float(value)
    return (_ts(ts_ms), ts_ms, source, role, node_id, name, labels, number)


def samples_df(spark: SparkSession, rows: Iterable[tuple]) -> DataFrame:
    return spark.createDataFrame(list(rows), SAMPLES_SCHEMA)


def counter(ts_ms: int, source: str, name: str, value: float, **labels: str) -> tuple:
    return sample(ts_ms, source, name + "_total", value, **labels)


def histogram(
    ts_ms: int, source: str, name: str, cumulative: Mapping[str, float], **labels: str
) -> list[tuple]:
    """The `_bucket` samples of one histogram snapshot (cumulative counts by `le`)."""
    return [
        sample(ts_ms, source, name + "_bucket", c, le=le, **labels) for le, c in cumulative.items()
    ]


def event(ts_ms: int, source: str, name: str, **fields: Any) -> dict[str, Any]:
    role, node_id = _source(source)
    record = {
        "event": name,
        "level": "info",
        "role": role,
        "node_id": node_id,
        "ts_ms": ts_ms,
        **fields,
    }
    return {
        "ts": _ts(ts_ms),
        "ts_ms": ts_ms,
        "source": source,
        "role": role,
        "node_id": node_id,
        "level": "info",
        "event": name,
        **fields,
        "record": json.dumps(record, sort_keys=True),
    }


def events_df(spark: SparkSession, rows: Iterable[Mapping[str, Any]]) -> DataFrame:
    names = EVENTS_SCHEMA.fieldNames()
    return spark.createDataFrame([tuple(r.get(n) for n in names) for r in rows], EVENTS_SCHEMA)


def send_ok(ts_ms: int, topic: str, partition: int, process: str = "producer-0") -> tuple:
    return (ts_ms, process, "ok", "send", topic, partition, None, None)


def nemesis(ts_ms: int, action: str, *targets: str) -> tuple:
    return (ts_ms, "nemesis", "info", "nemesis", None, None, list(targets), action)


def ops_df(spark: SparkSession, rows: Iterable[tuple]) -> DataFrame:
    return spark.createDataFrame(list(rows), FAILOVER_OPS_SCHEMA)


__all__ = [
    "EVENTS_SCHEMA",
    "SAMPLES_SCHEMA",
    "counter",
    "event",
    "events_df",
    "histogram",
    "nemesis",
    "ops_df",
    "sample",
    "samples_df",
    "send_ok",
]
