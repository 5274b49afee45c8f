"""Prometheus histograms: bucket increases per snapshot and quantiles from them.

A histogram ships as cumulative `<family>_bucket{le=...}` counters (plus `_count` and `_sum`).
The increase of every bucket over a window, summed over the window's snapshots, is again a
cumulative histogram of the observations made in that window; its quantiles are estimated as
Prometheus' histogram_quantile() does: find the bucket holding the rank q * total, and
interpolate linearly between the bucket's lower and upper bound (the lowest bucket starts at 0;
a rank in the +Inf bucket answers the highest finite bound).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType

from analytics.transforms.series import counter_increases

DEFAULT_QUANTILES = (0.5, 0.95, 0.99)


def quantile_column(q: float) -> str:
    """p50, p95, p99, p99_9: the column holding quantile q."""
    return "p" + f"{q * 100:g}".replace(".", "_")


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """Quantile q of a cumulative histogram given as (upper bound, cumulative count) pairs;
    None when it has no observations or no +Inf bucket (as Prometheus' NaN)."""
    ordered = sorted(buckets)
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]):
        return None
    # Counts summed over snapshots can be non-monotonic by float error: force monotonic.
    counts: list[float] = []
    for _, count in ordered:
        counts.append(max(count, counts[-1]) if counts else count)
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    index = next(i for i, c in enumerate(counts) if c >= rank)
    if index == len(ordered) - 1:
        return ordered[-2][0]
    upper = ordered[index][0]
    lower, below = (0.0, 0.0) if index == 0 else (ordered[index - 1][0], counts[index - 1])
    if index == 0 and upper <= 0:
        return upper
    in_bucket = counts[index] - below
    return lower + (upper - lower) * ((rank - below) / in_bucket)


def bucket_increases(samples: DataFrame, family: str, *, first_from_zero: bool = True) -> DataFrame:
    """The `<family>_bucket` samples with `le` (double; +Inf as infinity), `labels` without
    `le`, `group_key` (those labels as a string) and `increase` since the previous snapshot."""
    rows = counter_increases(samples, [family + "_bucket"], first_from_zero=first_from_zero)
    raw_le = F.col("labels").getItem("le")
    le = F.when(
        F.lower(F.regexp_replace(raw_le, r"^\+", "")).isin("inf", "infinity"), F.lit(math.inf)
    )
    rows = rows.withColumn("le", le.otherwise(raw_le.cast("double")))
    rows = rows.withColumn("labels", F.map_filter("labels", lambda k, _v: k != "le"))
    return rows.where(F.col("le").isNotNull() & F.col("increase").isNotNull())


def window_start(window_ms: int) -> F.Column:
    return (F.floor(F.col("ts_ms") / window_ms) * window_ms).cast("long")


def bucket_totals(
    increases: DataFrame, group_cols: Sequence[str], window_ms: int | None = None
) -> DataFrame:
    """Cumulative bucket counts per group (and per `window_start_ms` when windowed): group
    columns, [window_start_ms,] le, count."""
    cols = list(group_cols)
    if window_ms is not None:
        increases = increases.withColumn("window_start_ms", window_start(window_ms))
        cols.append("window_start_ms")
    return increases.groupBy(*cols, "le").agg(F.sum("increase").alias("count"))


def quantiles(
    totals: DataFrame,
    group_cols: Sequence[str],
    qs: Iterable[float] = DEFAULT_QUANTILES,
) -> DataFrame:
    """From bucket_totals: group columns, `observations` and one column per quantile
    (p50, p95, p99 by default); groups without observations are left out."""
    qs = tuple(qs)

    def estimate(buckets: list[tuple[float, float]]) -> list[float | None]:
        pairs = [(float(b[0]), float(b[1])) for b in buckets]
        return [histogram_quantile(q, pairs) for q in qs]

    # A lambda: Spark reads a function's type hints as a pandas UDF's, and warns on these.
    estimate_udf = F.udf(lambda buckets: estimate(buckets), ArrayType(DoubleType()))
    cols = [c for c in group_cols if c in totals.columns]
    if "window_start_ms" in totals.columns and "window_start_ms" not in cols:
        cols.append("window_start_ms")
    grouped = totals.groupBy(*cols).agg(
        F.collect_list(F.struct("le", "count")).alias("buckets"),
        F.max("count").alias("observations"),
    )
    grouped = grouped.where(F.col("observations") > 0).withColumn("_q", estimate_udf("buckets"))
    picked = [F.col("_q").getItem(i).alias(quantile_column(q)) for i, q in enumerate(qs)]
    return grouped.select(*cols, "observations", *picked)


def bucket_counts(totals: DataFrame, group_cols: Sequence[str]) -> DataFrame:
    """The distribution: observations per bucket (not cumulative): group columns, le,
    lower (the previous bound, 0 for the first), observations."""
    order = Window.partitionBy(*group_cols).orderBy("le")
    prev_count = F.coalesce(F.lag("count").over(order), F.lit(0.0))
    lower = F.coalesce(F.lag("le").over(order), F.lit(0.0))
    return totals.select(
        *group_cols, "le", lower.alias("lower"), (F.col("count") - prev_count).alias("observations")
    )
