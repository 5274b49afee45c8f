"""histogram_quantile: Prometheus' estimate, on hand-made cumulative buckets."""

from __future__ import annotations

import math

import pytest

from analytics.transforms.histograms import histogram_quantile, quantile_column

INF = math.inf


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        (0.5, 1.0),  # rank 10: the top of the first bucket (0, 1]
        (0.25, 0.5),  # rank 5: half-way into (0, 1]
        (0.75, 1.5),  # rank 15: half-way into (1, 2]
        (0.99, 1.98),  # rank 19.8: 98% into (1, 2]
    ],
)
def test_interpolates_within_the_bucket(q: float, expected: float) -> None:
    buckets = [(1.0, 10.0), (2.0, 20.0), (INF, 20.0)]
    assert histogram_quantile(q, buckets) == pytest.approx(expected)


def test_a_rank_in_the_inf_bucket_answers_the_highest_finite_bound() -> None:
    assert histogram_quantile(0.99, [(1.0, 10.0), (2.0, 20.0), (INF, 30.0)]) == 2.0


def test_bucket_order_does_not_matter() -> None:
    assert histogram_quantile(0.75, [(INF, 20.0), (2.0, 20.0), (1.0, 10.0)]) == 1.5


def test_no_observations_no_inf_bucket_or_one_bucket_is_unknown() -> None:
    assert histogram_quantile(0.5, [(1.0, 0.0), (INF, 0.0)]) is None
    assert histogram_quantile(0.5, [(1.0, 3.0), (2.0, 4.0)]) is None
    assert histogram_quantile(0.5, [(INF, 4.0)]) is None


def test_non_monotonic_counts_are_made_monotonic() -> None:
    # 10 observations <= 1, then a bucket that (by float error) reads lower
    assert histogram_quantile(0.5, [(1.0, 10.0), (2.0, 9.999), (INF, 20.0)]) == pytest.approx(1.0)


def test_quantile_column_names() -> None:
    assert [quantile_column(q) for q in (0.5, 0.95, 0.99, 0.999)] == ["p50", "p95", "p99", "p99_9"]
