"""Leader elections (count, cause, duration distribution) and the controller's event queue.

Elections are the controller's "leader election" log events (one per partition whose leader it
chose, with the cause); their duration is Kafka's LeaderElectionRateAndTimeMs timer (the time
the controller spent on a broker change, which elects every partition the broker led). The
event queue is EventQueueSize (a gauge) and EventQueueTimeMs (the wait, a histogram), and per
event type the "controller event processed" log events (queue_ms, process_ms).
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics.transforms.histograms import (
    DEFAULT_QUANTILES,
    bucket_counts,
    bucket_increases,
    bucket_totals,
    quantiles,
)
from analytics.transforms.series import gauge_series
from protocol.metric_names import EVENT_QUEUE_SIZE, EVENT_QUEUE_TIME, LEADER_ELECTION_RATE_AND_TIME

ELECTION_TIME = LEADER_ELECTION_RATE_AND_TIME
QUEUE_SIZE = EVENT_QUEUE_SIZE
QUEUE_TIME = EVENT_QUEUE_TIME


def leader_elections(events: DataFrame) -> DataFrame:
    """One row per partition election: ts, ts_ms, controller (the source that logged it), topic,
    partition, leader, previous_leader, leader_epoch, isr, cause, unclean."""
    return (
        events.where(F.col("event") == "leader election")
        .select(
            "ts",
            "ts_ms",
            F.col("source").alias("controller"),
            "topic",
            "partition",
            "leader",
            "previous_leader",
            "leader_epoch",
            "isr",
            F.coalesce(F.col("cause"), F.lit("unknown")).alias("cause"),
            F.coalesce(F.col("unclean"), F.lit(False)).alias("unclean"),
        )
        .orderBy("ts_ms", "topic", "partition")
    )


def elections_by_cause(elections: DataFrame) -> DataFrame:
    """cause, elections (partitions elected), unclean (of them unclean)."""
    return (
        elections.groupBy("cause")
        .agg(
            F.count(F.lit(1)).alias("elections"),
            F.sum(F.col("unclean").cast("long")).alias("unclean"),
        )
        .orderBy(F.desc("elections"), "cause")
    )


def election_time_buckets(samples: DataFrame, *, first_from_zero: bool = True) -> DataFrame:
    """LeaderElectionRateAndTimeMs bucket increases: ts_ms, source, le, increase."""
    rows = bucket_increases(samples, ELECTION_TIME, first_from_zero=first_from_zero)
    return rows.select("ts_ms", "source", "le", "increase")


def election_time_distribution(buckets: DataFrame) -> DataFrame:
    """Per controller (source) and bucket: le (upper bound, ms), lower, observations (timed broker
    changes whose duration fell in (lower, le])."""
    return bucket_counts(bucket_totals(buckets, ["source"]), ["source"]).orderBy("source", "le")


def election_time_quantiles(
    buckets: DataFrame, qs: Iterable[float] = DEFAULT_QUANTILES
) -> DataFrame:
    """Per controller (source): observations, p50, p95, p99 of LeaderElectionRateAndTimeMs (ms)."""
    return quantiles(bucket_totals(buckets, ["source"]), ["source"], qs).orderBy("source")


def queue_size(samples: DataFrame) -> DataFrame:
    """EventQueueSize over time: ts, ts_ms, source, value."""
    return gauge_series(samples, [QUEUE_SIZE]).select("ts", "ts_ms", "source", "value")


def queue_wait_buckets(samples: DataFrame, *, first_from_zero: bool = True) -> DataFrame:
    """EventQueueTimeMs bucket increases: ts_ms, source, le, increase."""
    rows = bucket_increases(samples, QUEUE_TIME, first_from_zero=first_from_zero)
    return rows.select("ts_ms", "source", "le", "increase")


def queue_wait(
    buckets: DataFrame,
    *,
    window_ms: int | None = None,
    qs: Iterable[float] = DEFAULT_QUANTILES,
) -> DataFrame:
    """EventQueueTimeMs per controller (source), per window (window_start_ms) or over the
    period: observations, p50, p95, p99 (ms)."""
    cols = ["source", "window_start_ms"] if window_ms is not None else ["source"]
    return quantiles(bucket_totals(buckets, ["source"], window_ms), ["source"], qs).orderBy(*cols)


def controller_event_types(events: DataFrame) -> DataFrame:
    """Per event type of the controller loop: events, mean and max queue_ms and process_ms."""
    processed = events.where(F.col("event") == "controller event processed")
    return (
        processed.groupBy("event_type")
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.avg("queue_ms").alias("mean_queue_ms"),
            F.max("queue_ms").alias("max_queue_ms"),
            F.avg("process_ms").alias("mean_process_ms"),
            F.max("process_ms").alias("max_process_ms"),
        )
        .orderBy(F.desc("events"), "event_type")
    )
