"""bench/run_failover.py's pure helpers: the longest gap of a controlled shutdown and what
the benchmark records for its telemetry export."""

from __future__ import annotations

import pytest

from bench.run_failover import RunRecord, longest_gap

KEY = ("t", 0)


def _acks(*times: float, key: tuple[str, int] = KEY) -> list[dict[str, object]]:
    return [{"topic": key[0], "partition": key[1], "done": t, "ok": True} for t in times]


def test_the_longest_gap_spans_the_last_ack_before_the_signal_to_the_first_after_the_move() -> None:
    lines = [*_acks(9.0, 9.9, 10.3, 11.5, 11.6, 13.0), *_acks(10.5, 12.0, key=("t", 1))]
    lines.append({"topic": "t", "partition": 0, "done": 10.8, "ok": False})  # not an ack
    # Signal at 10.0, the move seen at 11.55: the window is 9.9 .. 11.6.
    assert longest_gap(lines, KEY, 10.0, 11.55) == pytest.approx(1.2)


def test_without_an_ack_before_the_signal_the_gap_counts_from_the_signal() -> None:
    assert longest_gap(_acks(12.5, 12.6), KEY, 10.0, 12.0) == pytest.approx(2.5)


def test_the_run_record_keeps_each_fault_for_the_export() -> None:
    record = RunRecord()
    record.did(5.0, "kill", "broker-3")
    record.did(7.0, "restart", "broker-3")
    assert record.faults == [
        {"time": 5.0, "action": "kill", "node": "broker-3"},
        {"time": 7.0, "action": "restart", "node": "broker-3"},
    ]
