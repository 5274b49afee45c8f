"""Request latency percentiles per API and broker, from Kafka's RequestMetrics histograms.

TotalTimeMs is the whole request; RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs (waiting in a
purgatory) and ResponseSendTimeMs split it as Kafka does. Histograms carry a `request` label
(the API name); quantiles are per broker (source), API and metric, per time window and over the
whole period.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics.transforms.histograms import (
    DEFAULT_QUANTILES,
    bucket_increases,
    bucket_totals,
    quantiles,
)
from protocol.metric_names import REQUEST_TIME_NAMES

TIMES = ("TotalTimeMs", "RequestQueueTimeMs", "LocalTimeMs", "RemoteTimeMs", "ResponseSendTimeMs")
"""The `metric` column (Kafka's MBean names); REQUEST_TIME_NAMES gives their histograms."""
GROUP = ("source", "request", "metric")


def request_buckets(samples: DataFrame, *, first_from_zero: bool = True) -> DataFrame:
    """Bucket increases of every request-time histogram: ts_ms, source, request, metric, le,
    increase."""
    frames = [
        bucket_increases(
            samples, REQUEST_TIME_NAMES[metric], first_from_zero=first_from_zero
        ).select(
            "ts_ms",
            "source",
            F.col("labels").getItem("request").alias("request"),
            F.lit(metric).alias("metric"),
            "le",
            "increase",
        )
        for metric in TIMES
    ]
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def request_latency(
    buckets: DataFrame,
    *,
    window_ms: int | None = None,
    qs: Iterable[float] = DEFAULT_QUANTILES,
) -> DataFrame:
    """Per broker (source), API (request) and metric, per window of `window_ms` (column
    window_start_ms) or over the whole period (window_ms None): observations, p50, p95, p99 in ms."""
    totals = bucket_totals(buckets, GROUP, window_ms)
    cols = [*GROUP, "window_start_ms"] if window_ms is not None else list(GROUP)
    return quantiles(totals, GROUP, qs).orderBy(*cols)
