"""Counter increases and rates (resets as Prometheus' rate()), throughput per topic."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from analytics.transforms.series import counter_increases, dedupe_samples
from analytics.transforms.throughput import broker_topic_rates, throughput, topic_totals
from protocol import metric_names as names
from tests.support.telemetry_frames import counter, sample, samples_df

MSGS = names.MESSAGES_IN.removesuffix("_total")  # counter() appends it
BYTES = names.BYTES_IN.removesuffix("_total")


def test_increases_and_rates_handle_a_restart(spark: SparkSession) -> None:
    rows = [
        counter(0, "broker-1", MSGS, 10, topic="a"),
        counter(10_000, "broker-1", MSGS, 30, topic="a"),
        counter(20_000, "broker-1", MSGS, 5, topic="a"),  # restarted: counts from zero
        counter(30_000, "broker-1", MSGS, 15, topic="a"),
        counter(10_000, "broker-1", MSGS, 7, topic="b"),  # another series
        sample(10_000, "broker-1", "other_total", 99.0),
    ]
    out = counter_increases(samples_df(spark, rows), [MSGS + "_total"]).orderBy("series", "ts_ms")
    got = [(r.series, r.ts_ms, r.increase, r.rate_per_s) for r in out.collect()]
    assert got == [
        ("topic=a", 0, 10.0, None),
        ("topic=a", 10_000, 20.0, 2.0),
        ("topic=a", 20_000, 5.0, 0.5),
        ("topic=a", 30_000, 10.0, 1.0),
        ("topic=b", 10_000, 7.0, None),
    ]


def test_first_sample_is_a_baseline_without_first_from_zero(spark: SparkSession) -> None:
    rows = [
        counter(0, "broker-1", MSGS, 10, topic="a"),
        counter(5_000, "broker-1", MSGS, 12, topic="a"),
    ]
    out = counter_increases(samples_df(spark, rows), [MSGS + "_total"], first_from_zero=False)
    assert [r.increase for r in out.orderBy("ts_ms").collect()] == [None, 2.0]


def test_a_series_born_after_its_sources_first_snapshot_counts_from_zero(
    spark: SparkSession,
) -> None:
    # broker-1 shipped at 0 without topic b's counter: b's first value is all increase, even
    # in a window (first_from_zero=False), while a's first sample stays a baseline
    rows = [
        counter(0, "broker-1", MSGS, 10, topic="a"),
        counter(5_000, "broker-1", MSGS, 12, topic="a"),
        counter(5_000, "broker-1", MSGS, 7, topic="b"),
    ]
    out = counter_increases(samples_df(spark, rows), [MSGS + "_total"], first_from_zero=False)
    got = [(r.series, r.ts_ms, r.increase) for r in out.orderBy("series", "ts_ms").collect()]
    assert got == [("topic=a", 0, None), ("topic=a", 5_000, 2.0), ("topic=b", 5_000, 7.0)]


def test_duplicate_snapshots_are_dropped(spark: SparkSession) -> None:
    rows = [counter(0, "broker-1", MSGS, 10, topic="a")] * 2 + [
        counter(0, "broker-2", MSGS, 10, topic="a")
    ]
    assert dedupe_samples(samples_df(spark, rows)).count() == 2


def test_topic_totals_sum_over_brokers(spark: SparkSession) -> None:
    rows = [
        counter(0, "broker-1", MSGS, 100, topic="a"),
        counter(10_000, "broker-1", MSGS, 250, topic="a"),
        counter(10_000, "broker-2", MSGS, 50, topic="a"),  # the series appears later
        counter(20_000, "broker-2", MSGS, 60, topic="a"),
        counter(0, "broker-1", BYTES, 1000, topic="a"),
        counter(10_000, "broker-1", BYTES, 4000, topic="a"),
        counter(0, "broker-2", MSGS, 3, topic="b"),
    ]
    samples = samples_df(spark, rows)
    totals = {r.topic: r.asDict() for r in topic_totals(throughput(samples)).collect()}
    assert totals["a"] == {"topic": "a", "messages_in": 310, "bytes_in": 4000, "bytes_out": 0}
    assert totals["b"]["messages_in"] == 3
    windowed = topic_totals(throughput(samples, first_from_zero=False)).collect()
    # windowed, first samples are baselines, except broker-2's topic a: broker-2 shipped at 0
    # without it, so it was born since (a labelled counter shows once it moved): 150 + 50 + 10
    assert {r.topic: r.messages_in for r in windowed} == {"a": 210, "b": 0}


def test_broker_topic_rates_are_time_weighted(spark: SparkSession) -> None:
    rows = [
        counter(0, "broker-1", MSGS, 0, topic="a"),
        counter(10_000, "broker-1", MSGS, 100, topic="a"),  # 10/s over 10 s
        counter(40_000, "broker-1", MSGS, 400, topic="a"),  # 10/s over 30 s
        counter(41_000, "broker-1", MSGS, 450, topic="a"),  # 50/s over 1 s
    ]
    (row,) = broker_topic_rates(throughput(samples_df(spark, rows))).collect()
    assert row.mean_per_s == pytest.approx(450 / 41)
    assert row.peak_per_s == pytest.approx(50.0)
