"""Replication health: under-replicated and offline partitions over time (gauges), ISR shrink
and expand events (the leaders' log events) and counts (IsrShrinksPerSec/IsrExpandsPerSec)."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analytics.transforms.series import counter_increases, gauge_series
from protocol.metric_names import (
    ISR_EXPANDS,
    ISR_SHRINKS,
    OFFLINE_PARTITIONS_COUNT,
    UNDER_MIN_ISR_PARTITION_COUNT,
    UNDER_REPLICATED_PARTITIONS,
)

GAUGES = {
    UNDER_REPLICATED_PARTITIONS: "UnderReplicatedPartitions",
    UNDER_MIN_ISR_PARTITION_COUNT: "UnderMinIsrPartitionCount",
    OFFLINE_PARTITIONS_COUNT: "OfflinePartitionsCount",
}
COUNTERS = {ISR_SHRINKS: "shrink", ISR_EXPANDS: "expand"}
EVENTS = {"isr shrink": "shrink", "isr expand": "expand"}


def _short(names: dict[str, str]) -> F.Column:
    return F.element_at(
        F.create_map(*[F.lit(x) for kv in names.items() for x in kv]), F.col("name")
    )


def partition_health(samples: DataFrame) -> DataFrame:
    """ts, ts_ms, source, metric (UnderReplicatedPartitions, UnderMinIsrPartitionCount,
    OfflinePartitionsCount), value: one row per snapshot of a process that has the gauge
    (OfflinePartitionsCount is non-zero on the active controller only, as Kafka's)."""
    return gauge_series(samples, GAUGES).select(
        "ts", "ts_ms", "source", _short(GAUGES).alias("metric"), "value"
    )


def health_peaks(health: DataFrame) -> DataFrame:
    """Per metric: the largest value any process reported, and when it was first seen."""
    peaked = health.withColumn("_max", F.max("value").over(Window.partitionBy("metric")))
    at_peak = F.when(F.col("value") == F.col("_max"), F.col("ts_ms"))
    return (
        peaked.groupBy("metric")
        .agg(F.max("value").alias("max"), F.min(at_peak).alias("max_ts_ms"))
        .orderBy("metric")
    )


def isr_changes(events: DataFrame) -> DataFrame:
    """One row per ISR change logged by a partition leader: ts, ts_ms, source, change (shrink or
    expand), topic, partition, leader_epoch, old_isr, new_isr."""
    change = F.element_at(
        F.create_map(*[F.lit(x) for kv in EVENTS.items() for x in kv]), F.col("event")
    )
    return (
        events.where(F.col("event").isin(list(EVENTS)))
        .select(
            "ts",
            "ts_ms",
            "source",
            change.alias("change"),
            "topic",
            "partition",
            "leader_epoch",
            "old_isr",
            "new_isr",
        )
        .orderBy("ts_ms", "source")
    )


def isr_change_increases(samples: DataFrame, *, first_from_zero: bool = True) -> DataFrame:
    """IsrShrinksPerSec/IsrExpandsPerSec increases per snapshot: ts_ms, source, change, increase."""
    rows = counter_increases(samples, COUNTERS, first_from_zero=first_from_zero)
    return rows.select("ts_ms", "source", _short(COUNTERS).alias("change"), "increase")


def isr_change_counts(increases: DataFrame) -> DataFrame:
    """Per source and change (shrink, expand): changes counted over the period."""
    return (
        increases.groupBy("source", "change")
        .agg(F.coalesce(F.sum("increase"), F.lit(0.0)).cast("long").alias("changes"))
        .orderBy("source", "change")
    )
