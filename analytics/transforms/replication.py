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
    expand), topic, partition, leader_epoch, old_isr, new_isr, origin (who changed it)."""
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
            *(["origin"] if "origin" in events.columns else []),
        )
        .orderBy("ts_ms", "source")
    )


def isr_change_increases(samples: DataFrame, *, first_from_zero: bool = True) -> DataFrame:
    """IsrShrinksPerSec/IsrExpandsPerSec increases per snapshot: ts_ms, source, change, increase."""
    rows = counter_increases(samples, COUNTERS, first_from_zero=first_from_zero)
    return rows.select("ts_ms", "source", _short(COUNTERS).alias("change"), "increase")


def isr_change_counts(increases: DataFrame, changes: DataFrame | None = None) -> DataFrame:
    """Per source and change (shrink, expand) over the period: `changes`, what the broker's
    IsrShrinksPerSec/IsrExpandsPerSec counted, and, given the ISR change events (isr_changes),
    `events`, the changes it logged as leader (any origin: the controller fencing a dead broker
    removes it from every ISR, which Kafka's counters do not count), and `events_proposed`,
    those from its own AlterPartition (origin alter_partition): what the counters count. So the
    events column adds up to the events table, and events_proposed = changes where every
    snapshot shipped (issue 17: "0 shrinks beside an events table listing 143")."""
    counted = increases.groupBy("source", "change").agg(
        F.coalesce(F.sum("increase"), F.lit(0.0)).cast("long").alias("changes")
    )
    if changes is None:
        return counted.orderBy("source", "change")
    proposed = F.col("origin") == "alter_partition" if "origin" in changes.columns else F.lit(False)
    logged = changes.groupBy("source", "change").agg(
        F.count(F.lit(1)).alias("events"),
        F.sum(F.when(proposed, 1).otherwise(0)).alias("events_proposed"),
    )
    return (
        counted.join(logged, ["source", "change"], "full")
        .select(
            "source",
            "change",
            F.coalesce("changes", F.lit(0)).cast("long").alias("changes"),
            F.coalesce("events", F.lit(0)).cast("long").alias("events"),
            F.coalesce("events_proposed", F.lit(0)).cast("long").alias("events_proposed"),
        )
        .orderBy("source", "change")
    )
