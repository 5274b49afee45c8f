"""Metric series: counters turned into increases and rates, gauges, duplicate deliveries.

A counter series is one (source, name, labels): a process's counter since it started. Its
increase between two consecutive snapshots is the difference, or, when the value went down (the
process restarted and counts from zero again), the new value itself: Prometheus' rate() and
increase() treat resets this way. A series' first sample has no predecessor: with
`first_from_zero` it counts from zero (the data starts with the process: the whole run is in the
data), without it the sample is only a baseline (the data is a window cut out of a longer run;
Prometheus' increase() over a range does the same).
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F


def labels_key(labels: Column) -> Column:
    """A stable string for a labels map ("k=v,k=v", keys sorted): maps cannot be grouped on."""
    pairs = F.transform(F.map_entries(labels), lambda e: F.concat(e["key"], F.lit("="), e["value"]))
    return F.concat_ws(",", F.array_sort(pairs))


def label(name: str) -> Column:
    return F.col("labels").getItem(name)


def dedupe_samples(samples: DataFrame) -> DataFrame:
    """At-least-once shipping may deliver a snapshot twice: keep one sample per series and time."""
    keyed = samples.withColumn("_series", labels_key(F.col("labels")))
    return keyed.dropDuplicates(["source", "ts_ms", "name", "_series"]).drop("_series")


def dedupe_events(events: DataFrame) -> DataFrame:
    """A log record delivered twice is the same JSON text from the same source."""
    if "record" in events.columns:
        return events.dropDuplicates(["source", "ts_ms", "event", "record"])
    return events.dropDuplicates()


def counter_increases(
    samples: DataFrame, names: Iterable[str], *, first_from_zero: bool = True
) -> DataFrame:
    """The samples of the named counters with `series` (labels key), `prev_ts_ms`, `increase`
    (since the series' previous sample; reset-aware) and `rate_per_s` (null when the interval is
    unknown, i.e. on a series' first sample). Null values (NaN shipped as null) are left out."""
    rows = samples.where(F.col("name").isin(list(names)) & F.col("value").isNotNull())
    rows = rows.withColumn("series", labels_key(F.col("labels")))
    by_series = Window.partitionBy("source", "name", "series").orderBy("ts_ms")
    prev = F.lag("value").over(by_series)
    rows = rows.withColumn("_prev", prev).withColumn("prev_ts_ms", F.lag("ts_ms").over(by_series))
    first = F.col("value") if first_from_zero else F.lit(None).cast("double")
    increase = (
        F.when(F.col("_prev").isNull(), first)
        .when(F.col("value") < F.col("_prev"), F.col("value"))  # a reset: counting from zero
        .otherwise(F.col("value") - F.col("_prev"))
    )
    seconds = (F.col("ts_ms") - F.col("prev_ts_ms")) / 1000.0
    rows = rows.withColumn("increase", increase).drop("_prev")
    rate = F.when(seconds > 0, F.col("increase") / seconds)
    return rows.withColumn("rate_per_s", rate)


def gauge_series(samples: DataFrame, names: Iterable[str]) -> DataFrame:
    """The samples of the named gauges: ts, ts_ms, source, role, node_id, name, labels, value."""
    return samples.where(F.col("name").isin(list(names)) & F.col("value").isNotNull())


def between(frame: DataFrame, start_ms: int | None, end_ms: int | None) -> DataFrame:
    """Rows with start_ms <= ts_ms < end_ms (either bound may be open)."""
    if start_ms is not None:
        frame = frame.where(F.col("ts_ms") >= start_ms)
    if end_ms is not None:
        frame = frame.where(F.col("ts_ms") < end_ms)
    return frame
