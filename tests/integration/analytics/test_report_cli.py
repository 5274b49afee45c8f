"""`trioka report` as a user runs it: a broker whose real shipper fills the telemetry topics,
then the command in a process of its own (its own Spark), and its errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="needs pyspark: pip install 'trioka[analytics]'")

from client.sync import SyncConsumer
from protocol.names import TopicPartition
from protocol.telemetry import LOGS_TOPIC, METRICS_TOPIC
from tests.conftest import BrokerFactory

ROOT = Path(__file__).resolve().parents[3]
TELEMETRY = {"trioka.telemetry.enable": "true", "metrics.interval.ms": "500"}


def trioka(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "deploy.cli", *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT,
    )  # fmt: skip


def wait_shipped(bootstrap: str, snapshots: int, within: float = 60) -> None:
    """Until __trioka_metrics holds `snapshots` records and __trioka_logs some."""
    deadline = time.monotonic() + within
    with SyncConsumer(bootstrap_servers=bootstrap, allow_auto_create_topics=False) as consumer:
        while True:
            try:
                ends = consumer.end_offsets([TopicPartition(METRICS_TOPIC, 0),
                                             TopicPartition(LOGS_TOPIC, 0)])  # fmt: skip
                if (
                    ends[TopicPartition(METRICS_TOPIC, 0)] >= snapshots
                    and ends[TopicPartition(LOGS_TOPIC, 0)]
                ):
                    return
            except Exception:  # the shipper has not created the topics yet
                pass
            assert time.monotonic() < deadline, f"the shipper did not ship {snapshots} snapshots"
            time.sleep(0.2)


def test_report_from_a_broker_shipping_its_telemetry(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    broker = broker_factory(TELEMETRY)
    wait_shipped(broker.bootstrap, snapshots=3)
    out = tmp_path / "report"
    done = trioka("report", "--bootstrap-server", broker.bootstrap, "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"report: {out / 'report.html'}" in done.stdout
    assert (out / "report.html").is_file()
    assert list((out / "tables").glob("*.csv")), "no table written"


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
