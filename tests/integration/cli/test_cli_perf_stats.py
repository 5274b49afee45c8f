"""The perf tools' statistics (pure functions, no broker)."""

from __future__ import annotations

from deploy.cli.perf import make_result, percentile


def test_percentiles_follow_kafkas_perf_test() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 51
    assert percentile(values, 0.99) == 100
    assert percentile(values, 0.999) == 100
    assert percentile([], 0.5) == 0.0


def test_make_result_rates_and_summary() -> None:
    result = make_result("produce", 1000, 1000 * 1024, 2.0, [1.0, 2.0, 3.0, 10.0])
    assert result.records_per_sec == 500
    assert abs(result.mb_per_sec - 1000 * 1024 / 1024 / 1024 / 2) < 1e-9
    assert result.latency_max_ms == 10 and result.latency_avg_ms == 4
    text = result.summary()
    assert text.startswith("1000 records sent, 500.0 records/sec (0.49 MB/sec)")
    assert "99th" in text and "FAILED" not in text
    assert "FAILED" in make_result("produce", 10, 10, 1.0, [], failed=3).summary()
