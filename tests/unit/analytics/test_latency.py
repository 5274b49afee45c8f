"""Request latency quantiles per broker, API and metric from histogram bucket increases."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from analytics.transforms.latency import request_buckets, request_latency
from protocol import metric_names as names
from tests.support.telemetry_frames import histogram, samples_df

TOTAL = names.REQUEST_TIME_NAMES["TotalTimeMs"]
QUEUE = names.REQUEST_TIME_NAMES["RequestQueueTimeMs"]


def _rows() -> list[tuple]:
    rows = []
    # broker-1 Produce TotalTimeMs: starts empty; 20 observations (5 <= 1 ms, 10 in (1, 5],
    # 5 above 5 ms) in the first minute; 10 more, all <= 1 ms, in the second.
    for ts, cumulative in [
        (0, {"1.0": 0, "5.0": 0, "+Inf": 0}),
        (30_000, {"1.0": 5, "5.0": 15, "+Inf": 20}),
        (70_000, {"1.0": 15, "5.0": 25, "+Inf": 30}),
    ]:
        rows += histogram(ts, "broker-1", TOTAL, cumulative, request="Produce")
    # broker-1 Fetch queue time: one snapshot, every observation <= 1 ms
    rows += histogram(30_000, "broker-1", QUEUE, {"1.0": 4, "5.0": 4, "+Inf": 4}, request="Fetch")
    return rows


def test_whole_period_quantiles(spark: SparkSession) -> None:
    buckets = request_buckets(samples_df(spark, _rows()))
    got = {(r.request, r.metric): r for r in request_latency(buckets).collect()}
    produce = got[("Produce", "TotalTimeMs")]
    # 30 observations: 15 <= 1, 10 in (1, 5], 5 above. p50 rank 15 -> 1.0; p95 rank 28.5 and
    # p99 rank 29.7 fall in +Inf -> 5.0
    assert (produce.source, produce.observations) == ("broker-1", 30.0)
    assert (produce.p50, produce.p95, produce.p99) == (pytest.approx(1.0), 5.0, 5.0)
    fetch = got[("Fetch", "RequestQueueTimeMs")]
    # 4 observations <= 1 ms (counted from zero: its first snapshot): p50 rank 2 -> 0.5
    assert (fetch.observations, fetch.p50, fetch.p99) == (
        4.0,
        pytest.approx(0.5),
        pytest.approx(0.99),
    )


def test_windowed_quantiles(spark: SparkSession) -> None:
    buckets = request_buckets(samples_df(spark, _rows()))
    rows = request_latency(buckets, window_ms=60_000).where("request = 'Produce'").collect()
    by_window = {r.window_start_ms: r for r in rows}
    assert sorted(by_window) == [0, 60_000]
    # first minute: 20 observations, 5 <= 1, 10 in (1, 5]: p50 rank 10 -> 1 + 4 * 5/10 = 3.0
    assert by_window[0].observations == 20.0
    assert by_window[0].p50 == pytest.approx(3.0)
    # second minute: 10 observations <= 1 ms: p50 rank 5 -> 0.5, p95 rank 9.5 -> 0.95
    assert by_window[60_000].observations == 10.0
    assert by_window[60_000].p50 == pytest.approx(0.5)
    assert by_window[60_000].p95 == pytest.approx(0.95)
