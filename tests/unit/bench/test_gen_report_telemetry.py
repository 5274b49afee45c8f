"""bench/gen_report_telemetry.py: the synthetic hour `trioka report` is timed on (docs/
benchmarks.md) is a spool analytics.spool reads: one directory per process, envelopes of the
telemetry topics, 10 s snapshots, and broker 2 silent for five minutes (a gap to chart)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.gen_report_telemetry import generate
from protocol.metric_names import MESSAGES_IN
from protocol.telemetry import LOGS_TOPIC, METRICS_TOPIC


def test_a_short_spool_has_every_process_and_broker_twos_gap(tmp_path: Path) -> None:
    written = generate(tmp_path, minutes=20, brokers=3)
    dirs = sorted(p.name for p in tmp_path.iterdir())
    assert dirs == ["broker-1", "broker-2", "broker-3",
                    "controller-3001", "controller-3002", "controller-3003"]  # fmt: skip
    records = [json.loads(line) for p in tmp_path.rglob("*.jsonl") for line in p.open()]
    assert len(records) == written
    assert {r["topic"] for r in records} == {METRICS_TOPIC, LOGS_TOPIC}
    per_source = {}
    for r in records:
        if r["topic"] == METRICS_TOPIC:
            per_source.setdefault(r["key"], []).append(r["value"]["ts_ms"])
    assert len(per_source["broker-1"]) == 120  # 20 minutes of 10 s snapshots
    assert len(per_source["broker-2"]) == 120 - 30  # five minutes down
    names = {s["name"] for r in records if r["key"] == "broker-1" and r["topic"] == METRICS_TOPIC
             for s in r["value"]["samples"]}  # fmt: skip
    assert MESSAGES_IN in names
