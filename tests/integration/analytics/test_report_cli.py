"""`trioka report` as a user runs it: a broker whose real shipper fills the telemetry topics
with its real metrics, known load, then the command in a process of its own (its own Spark):
the report's per-topic records in are the records the test produced; a topic produced to right
before the broker was SIGKILLed is counted exactly from the log end offsets, whatever its metrics
shipped; progress lines on stderr, not Spark's banner. And its errors."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="needs pyspark: pip install 'trioka[analytics]'")

from client.sync import SyncAdmin, SyncConsumer, SyncProducer
from protocol.metric_names import MESSAGES_IN
from protocol.names import TopicPartition
from protocol.telemetry import LOGS_TOPIC, METRICS_TOPIC
from tests.conftest import BrokerFactory

ROOT = Path(__file__).resolve().parents[3]
TELEMETRY = {"trioka.telemetry.enable": "true", "metrics.interval.ms": "500"}
TOPIC = "orders"
RECORDS = 500
KILLED_TOPIC = "perf"
KILLED_RECORDS = 3_000


def trioka(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "deploy.cli", *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
    )  # fmt: skip


def wait_shipped_count(bootstrap: str, records: int, within: float = 60) -> None:
    """Until a shipped metrics snapshot says the broker took `records` records into TOPIC
    (MessagesInPerSec), and some log events were shipped."""
    deadline = time.monotonic() + within
    metrics, logs = TopicPartition(METRICS_TOPIC, 0), TopicPartition(LOGS_TOPIC, 0)
    with SyncConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                      allow_auto_create_topics=False) as consumer:  # fmt: skip
        consumer.assign([metrics])
        while True:
            for r in consumer.poll(200):
                samples = json.loads(r.value or b"{}").get("samples", [])
                counted = [s["value"] for s in samples
                           if s["name"] == MESSAGES_IN and s["labels"].get("topic") == TOPIC]  # fmt: skip
                if counted and counted[0] >= records and consumer.end_offsets([logs])[logs]:
                    return
            assert time.monotonic() < deadline, f"no snapshot counting {records} records shipped"


def test_report_from_a_broker_shipping_its_telemetry(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    broker = broker_factory(TELEMETRY)
    with SyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic(TOPIC, 2, 1)
    with SyncProducer(bootstrap_servers=broker.bootstrap) as producer:
        for f in [producer.send(TOPIC, b"x" * 100, partition=i % 2) for i in range(RECORDS)]:
            f.result(timeout=30)
    wait_shipped_count(broker.bootstrap, RECORDS)
    # Acknowledged, then SIGKILLed at once: no metrics snapshot of this incarnation need have
    # counted them (issue 17: a 120,000-record topic missing from the totals).
    with SyncAdmin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic(KILLED_TOPIC, 3, 1)
    with SyncProducer(bootstrap_servers=broker.bootstrap, linger_ms=5) as producer:
        futures = [producer.send(KILLED_TOPIC, b"y" * 10, partition=i % 3)
                   for i in range(KILLED_RECORDS)]  # fmt: skip
        for f in futures:
            f.result(timeout=30)
    broker.kill()
    broker.start()
    out = tmp_path / "report"
    done = trioka("report", "--bootstrap-server", broker.bootstrap, "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"report: {out / 'report.html'}" in done.stdout
    assert (out / "report.html").is_file()
    with (out / "tables" / "topic_totals.csv").open() as f:
        totals = {row["topic"]: row for row in csv.DictReader(f)}
    assert int(totals[TOPIC]["messages_in"]) == RECORDS
    assert int(totals[TOPIC]["bytes_in"]) > RECORDS * 100
    with (out / "tables" / "topic_records.csv").open() as f:
        records = {row["topic"]: row for row in csv.DictReader(f)}
    assert int(records[TOPIC]["records"]) == RECORDS
    assert int(records[KILLED_TOPIC]["records"]) == KILLED_RECORDS  # exact, whatever was killed
    assert records[KILLED_TOPIC]["internal"] == "False"
    assert records[METRICS_TOPIC]["internal"] == "True"
    metric_count = records[KILLED_TOPIC]["messages_in_metrics"]
    assert not metric_count or int(metric_count) <= KILLED_RECORDS
    assert f"{KILLED_TOPIC}: {KILLED_RECORDS:,}" in done.stdout  # the headline's exact count
    # Progress (stage, what, elapsed) on stderr, and no Spark start-up banner.
    stages = [line for line in done.stderr.splitlines() if line.startswith("[")]
    assert any("] table: throughput (1/" in line for line in stages), done.stderr[-3000:]
    assert stages[-1].endswith(f"done: {out / 'report.html'}")
    assert "Setting default log level" not in done.stderr


def test_report_errors_are_one_line_and_quick(tmp_path: Path) -> None:
    done = trioka("report", "--out", str(tmp_path), timeout=60)
    assert done.returncode == 2
    assert "give --bootstrap-server, --spool DIR, or both" in done.stderr
    done = trioka("report", "--out", str(tmp_path), "-b", "127.0.0.1:1", timeout=60)
    assert done.returncode == 1
    assert (
        done.stderr.strip().splitlines()[-1].startswith("error: cannot list topics at 127.0.0.1:1")
    )
    done = trioka("report", "--out", str(tmp_path), "--spool", str(tmp_path / "nope"), timeout=60)
    assert done.returncode == 2 and "does not exist or is not a directory" in done.stderr
