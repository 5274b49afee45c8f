"""Throughput per broker and topic over time, from Kafka's BrokerTopicMetrics counters.

BytesInPerSec and MessagesInPerSec count what a leader appended from producers (not
replication), BytesOutPerSec what it served to fetchers, so summing over brokers gives the
cluster's traffic per topic.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics.transforms.series import counter_increases, label
from protocol.metric_names import BYTES_IN, BYTES_OUT, MESSAGES_IN

COUNTERS = {MESSAGES_IN: "MessagesInPerSec", BYTES_IN: "BytesInPerSec", BYTES_OUT: "BytesOutPerSec"}
"""Prometheus sample name -> the `metric` column (Kafka's MBean name)."""
METRICS = tuple(COUNTERS.values())


def throughput(samples: DataFrame, *, first_from_zero: bool = True) -> DataFrame:
    """One row per broker snapshot, topic and metric: ts, ts_ms, source, node_id, topic, metric
    (MessagesInPerSec, BytesInPerSec, BytesOutPerSec), increase (null for a
    baseline sample), interval_s (null on a series' first sample), rate_per_s."""
    rows = counter_increases(samples, COUNTERS, first_from_zero=first_from_zero)
    metric = F.element_at(
        F.create_map(*[F.lit(x) for kv in COUNTERS.items() for x in kv]), F.col("name")
    )
    return rows.select(
        "ts",
        "ts_ms",
        "source",
        "node_id",
        label("topic").alias("topic"),
        metric.alias("metric"),
        "increase",
        ((F.col("ts_ms") - F.col("prev_ts_ms")) / 1000.0).alias("interval_s"),
        "rate_per_s",
    )


def topic_totals(throughput_rows: DataFrame) -> DataFrame:
    """Per topic over the whole period: messages_in, bytes_in, bytes_out (summed over brokers)."""
    names = {
        "MessagesInPerSec": "messages_in",
        "BytesInPerSec": "bytes_in",
        "BytesOutPerSec": "bytes_out",
    }
    sums = [
        F.sum(F.when(F.col("metric") == metric, F.coalesce("increase", F.lit(0.0))).otherwise(0.0))
        .cast("long")
        .alias(column)
        for metric, column in names.items()
    ]
    return throughput_rows.groupBy("topic").agg(*sums).orderBy("topic")


def broker_topic_rates(throughput_rows: DataFrame) -> DataFrame:
    """Per broker, topic and metric: the mean rate (time-weighted: increase over time) and the
    peak rate of one interval."""
    timed = throughput_rows.where(F.col("rate_per_s").isNotNull())
    return (
        timed.groupBy("source", "topic", "metric")
        .agg(
            (F.sum("increase") / F.sum("interval_s")).alias("mean_per_s"),
            F.max("rate_per_s").alias("peak_per_s"),
        )
        .orderBy("source", "topic", "metric")
    )
