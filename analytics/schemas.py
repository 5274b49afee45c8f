"""Explicit schemas of what analytics/ reads, and the parse functions raw -> typed (pure
DataFrame -> DataFrame; nothing is inferred).

- RAW_SCHEMA: Spark's Kafka source layout, produced by format("trioka") and analytics.spool.
- parse_metrics(raw) -> samples: one row per prometheus sample of each MetricsSnapshot
  (protocol.telemetry): ts, ts_ms, source, role, node_id, name, labels, value.
- parse_logs(raw) -> events: ts, ts_ms, source, role, node_id, level, event, one typed column
  per field of the protocol.telemetry.LOG_EVENTS catalogue (the union, built from it) and
  `record` (the whole JSON).
- parse_history(raw) -> ops: one row per chaos history op (deploy/chaos/check/history_files.py's
  JSON) with typed columns per op kind (OPS_SCHEMA; FAILOVER_OPS_SCHEMA: the columns the
  failover analysis reads, taken from it).

Rows whose value is not JSON of the expected kind are dropped (a torn spool line, another
topic's record); `source` is Source.key ("<role>-<node_id>", or the role alone).
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from protocol.telemetry import COMMON_LOG_FIELDS, LOG_EVENTS, EventSpec, FieldType

RAW_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)

_SPARK_TYPES: dict[FieldType, DataType] = {
    FieldType.STRING: StringType(),
    FieldType.INT: LongType(),
    FieldType.FLOAT: DoubleType(),
    FieldType.BOOL: BooleanType(),
    FieldType.INT_LIST: ArrayType(LongType()),
}


def spark_type(field_type: FieldType) -> DataType:
    return _SPARK_TYPES[field_type]


# -- metrics --------------------------------------------------------------------------------

SOURCE_SCHEMA = StructType(
    [
        StructField("role", StringType()),
        StructField("node_id", LongType()),
        StructField("host", StringType()),
        StructField("pid", LongType()),
    ]
)

SAMPLE_SCHEMA = StructType(
    [
        StructField("name", StringType()),
        StructField("labels", MapType(StringType(), StringType())),
        StructField("value", DoubleType()),
    ]
)

METRICS_SNAPSHOT_SCHEMA = StructType(
    [
        StructField("v", LongType()),
        StructField("kind", StringType()),
        StructField("ts_ms", LongType()),
        StructField("source", SOURCE_SCHEMA),
        StructField("samples", ArrayType(SAMPLE_SCHEMA)),
    ]
)

SAMPLES_SCHEMA = StructType(
    [
        StructField("ts", TimestampType()),
        StructField("ts_ms", LongType()),
        StructField("source", StringType()),
        StructField("role", StringType()),
        StructField("node_id", LongType()),
        StructField("name", StringType()),
        StructField("labels", MapType(StringType(), StringType())),
        StructField("value", DoubleType()),
    ]
)


def _json(raw: DataFrame, schema: StructType) -> Column:
    return F.from_json(F.col("value").cast("string"), schema)


def _source_key(role: Column, node_id: Column) -> Column:
    """protocol.telemetry.Source.key: "<role>-<node_id>", or the role when node_id is null."""
    return F.when(node_id.isNull(), role).otherwise(F.concat_ws("-", role, node_id))


def _ts(ts_ms: Column) -> Column:
    return F.timestamp_millis(ts_ms)


def parse_metrics(raw: DataFrame, *, dedupe: bool = False) -> DataFrame:
    """One row per sample of each MetricsSnapshot in `raw` (SAMPLES_SCHEMA). With `dedupe`, a
    snapshot delivered twice (at-least-once shipping; a spool read beside its topic) is
    exploded once: one snapshot per source and ts_ms, dropped before the explode, where it is
    a few thousand rows to shuffle and not a million samples (analytics.job)."""
    snap = raw.select(_json(raw, METRICS_SNAPSHOT_SCHEMA).alias("m")).where(
        (F.col("m.kind") == "metrics") & F.col("m.ts_ms").isNotNull()
    )
    snap = snap.select("m.ts_ms", "m.source", "m.samples")
    if dedupe:
        snap = snap.dropDuplicates(["ts_ms", "source"])
    sample = snap.select("ts_ms", "source", F.explode("samples").alias("s"))
    role, node_id = F.col("source.role"), F.col("source.node_id")
    return sample.select(
        _ts(F.col("ts_ms")).alias("ts"),
        F.col("ts_ms"),
        _source_key(role, node_id).alias("source"),
        role.alias("role"),
        node_id.alias("node_id"),
        F.col("s.name").alias("name"),
        F.coalesce(F.col("s.labels"), F.create_map().cast("map<string,string>")).alias("labels"),
        F.col("s.value").alias("value"),
    )


# -- logs -----------------------------------------------------------------------------------


def event_fields(specs: Iterable[EventSpec] = LOG_EVENTS) -> dict[str, FieldType]:
    """The union of the catalogued events' fields (minus the common ones), in catalogue order.
    A field name with two types in the catalogue is a contract bug: ValueError names it."""
    fields: dict[str, FieldType] = {}
    for spec in specs:
        for name, field_type in spec.fields.items():
            if name in COMMON_LOG_FIELDS:
                raise ValueError(f"event {spec.name!r}: field {name!r} is a common log field")
            seen = fields.setdefault(name, field_type)
            if seen is not field_type:
                raise ValueError(
                    f"field {name!r} is {seen.value} in one log event and {field_type.value} "
                    f"in {spec.name!r}: one name, one type across LOG_EVENTS"
                )
    return fields


_EVENT_FIELDS = event_fields()
_COMMON_COLUMNS = ("ts", "ts_ms", "source", "role", "node_id", "level", "event")

LOG_RECORD_SCHEMA = StructType(
    [StructField(n, spark_type(t)) for n, t in COMMON_LOG_FIELDS.items()]
    + [StructField(n, spark_type(t)) for n, t in _EVENT_FIELDS.items()]
)

EVENTS_SCHEMA = StructType(
    [
        StructField("ts", TimestampType()),
        StructField("ts_ms", LongType()),
        StructField("source", StringType()),
        StructField("role", StringType()),
        StructField("node_id", LongType()),
        StructField("level", StringType()),
        StructField("event", StringType()),
    ]
    + [StructField(n, spark_type(t)) for n, t in _EVENT_FIELDS.items()]
    + [StructField("record", StringType())]
)


def parse_logs(raw: DataFrame) -> DataFrame:
    """One row per log record in `raw` (EVENTS_SCHEMA). The common columns come from a parse
    of their own, so a record whose other fields have unexpected types (an event outside the
    catalogue reusing a name) keeps them; catalogued fields are typed only for catalogued
    events."""
    common_schema = StructType([StructField(n, spark_type(t)) for n, t in COMMON_LOG_FIELDS.items()])  # fmt: skip
    text = F.col("value").cast("string")
    parsed = raw.select(
        text.alias("record"),
        F.from_json(text, common_schema).alias("c"),
        F.from_json(text, LOG_RECORD_SCHEMA).alias("e"),
    ).where((F.col("c.kind") == "log") & F.col("c.ts_ms").isNotNull())
    catalogued = F.col("c.event").isin([spec.name for spec in LOG_EVENTS])
    role, node_id = F.col("c.role"), F.col("c.node_id")
    return parsed.select(
        _ts(F.col("c.ts_ms")).alias("ts"),
        F.col("c.ts_ms").alias("ts_ms"),
        _source_key(role, node_id).alias("source"),
        role.alias("role"),
        node_id.alias("node_id"),
        F.col("c.level").alias("level"),
        F.col("c.event").alias("event"),
        *[
            F.when(catalogued, F.col(f"e.{n}")).cast(spark_type(t)).alias(n)
            for n, t in _EVENT_FIELDS.items()
        ],
        F.col("record"),
    )


# -- chaos history --------------------------------------------------------------------------

_OFFSETS = ArrayType(ArrayType(StringType()))
"""[[topic, partition, offset], ...]: mixed JSON types, read as strings and cast."""

HISTORY_OP_SCHEMA = StructType(
    [
        StructField("index", LongType()),
        StructField("time_ns", LongType()),
        StructField("process", StringType()),
        StructField("type", StringType()),
        StructField("kind", StringType()),
        StructField("value", StringType()),  # its shape depends on kind: parsed below
        StructField("error", StringType()),
        StructField("invocation", LongType()),
        StructField("ts_ms", LongType()),
    ]
)

_SEND_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("value", StringType()),
        StructField("key", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
    ]
)
_COMMIT_SCHEMA = StructType([StructField("group", StringType()), StructField("offsets", _OFFSETS)])
_NEMESIS_SCHEMA = StructType(
    [
        StructField("fault", StringType()),
        StructField("targets", ArrayType(StringType())),
        StructField("detail", StringType()),  # free-form JSON object, kept as text
    ]
)

POLLED_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("value", StringType()),
        StructField("key", StringType()),
    ]
)
TP_OFFSET_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
    ]
)
_TP_SCHEMA = StructType(
    [StructField("topic", StringType()), StructField("partition", IntegerType())]
)

OPS_SCHEMA = StructType(
    [
        StructField("shipped_ts", TimestampType()),
        StructField("ts_ms", LongType()),
        StructField("index", LongType()),
        StructField("time_ns", LongType()),
        StructField("process", StringType()),
        StructField("type", StringType()),
        StructField("kind", StringType()),
        StructField("error", StringType()),
        StructField("invocation", LongType()),
        # send
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("key", StringType()),
        StructField("value", StringType()),
        # poll
        StructField("polled", ArrayType(POLLED_SCHEMA)),
        # commit
        StructField("group", StringType()),
        # commit and seek
        StructField("offsets", ArrayType(TP_OFFSET_SCHEMA)),
        # assign
        StructField("partitions", ArrayType(_TP_SCHEMA)),
        # nemesis
        StructField("fault", StringType()),
        StructField("targets", ArrayType(StringType())),
        StructField("action", StringType()),
        StructField("detail", StringType()),
        StructField("record", StringType()),
    ]
)

FAILOVER_OPS_SCHEMA = StructType(
    [
        OPS_SCHEMA[name]
        for name in ("ts_ms", "process", "type", "kind", "topic", "partition", "targets", "action")
    ]
)
"""The OPS_SCHEMA columns analytics.transforms.failovers reads (its docstring names them), as
OPS_SCHEMA types them: the schema of an empty history in the report, and of the tests'
hand-made ops (tests/support/telemetry_frames.py)."""


def _tuples(rows: Column, schema: StructType) -> Column:
    """An array<array<string>> of JSON [a, b, c] rows (mixed types, read as strings) ->
    array<struct> with `schema`'s names and types."""

    def one(item: Column) -> Column:
        return F.struct(
            *[item[i].cast(f.dataType).alias(f.name) for i, f in enumerate(schema.fields)]
        )

    return F.transform(rows, one)


def parse_history(raw: DataFrame) -> DataFrame:
    """One row per chaos history op in `raw` (OPS_SCHEMA). `ts_ms` is the op's wall clock
    (epoch ms; null in histories recorded before ops carried it), `time_ns` the recorder's
    monotonic clock (ordering and durations within a run), `shipped_ts` the record's timestamp
    (when it was shipped; null for spooled lines without one); `action` is the nemesis
    detail's "action" (kill, pause, restart...)."""
    text = F.col("value").cast("string")
    op = raw.select(
        F.col("timestamp").alias("shipped_ts"),
        text.alias("record"),
        F.from_json(text, HISTORY_OP_SCHEMA).alias("o"),
    ).where(
        F.col("o.index").isNotNull() & F.col("o.time_ns").isNotNull() & F.col("o.kind").isNotNull()
    )
    kind, value = F.col("o.kind"), F.col("o.value")
    send = F.from_json(value, _SEND_SCHEMA)
    commit = F.from_json(value, _COMMIT_SCHEMA)
    nemesis = F.from_json(value, _NEMESIS_SCHEMA)
    rows = F.from_json(value, _OFFSETS)

    def when(k: str, column: Column) -> Column:
        return F.when(kind == k, column)

    return op.select(
        "shipped_ts",
        F.col("o.ts_ms").alias("ts_ms"),
        *[F.col(f"o.{n}").alias(n) for n in
          ("index", "time_ns", "process", "type", "kind", "error", "invocation")],
        when("send", send["topic"]).alias("topic"),
        when("send", send["partition"]).alias("partition"),
        when("send", send["offset"]).alias("offset"),
        when("send", send["key"]).alias("key"),
        when("send", send["value"]).alias("value"),
        when("poll", _tuples(rows, POLLED_SCHEMA)).alias("polled"),
        when("commit", commit["group"]).alias("group"),
        F.when(kind == "commit", _tuples(commit["offsets"], TP_OFFSET_SCHEMA))
        .when(kind == "seek", _tuples(rows, TP_OFFSET_SCHEMA)).alias("offsets"),
        when("assign", _tuples(rows, _TP_SCHEMA)).alias("partitions"),
        when("nemesis", nemesis["fault"]).alias("fault"),
        when("nemesis", nemesis["targets"]).alias("targets"),
        when("nemesis", F.get_json_object(nemesis["detail"], "$.action")).alias("action"),
        when("nemesis", nemesis["detail"]).alias("detail"),
        "record",
    )  # fmt: skip


__all__ = [
    "EVENTS_SCHEMA",
    "FAILOVER_OPS_SCHEMA",
    "LOG_RECORD_SCHEMA",
    "METRICS_SNAPSHOT_SCHEMA",
    "OPS_SCHEMA",
    "RAW_SCHEMA",
    "SAMPLES_SCHEMA",
    "event_fields",
    "parse_history",
    "parse_logs",
    "parse_metrics",
    "spark_type",
]
