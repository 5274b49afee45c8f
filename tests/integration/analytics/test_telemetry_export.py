"""bench/telemetry_export.py against a real broker with its shipper on: every record of the
telemetry topics, from the log start to the end offset when the export began, written as spool
lines that analytics.spool reads back with their topics and keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="needs pyspark: pip install 'trioka[analytics]'")

import trio

from analytics.spool import spool_files, spool_rows
from bench.telemetry_export import SPOOL_DIR, export_run
from client import Admin, Consumer
from protocol.names import TopicPartition
from protocol.telemetry import CHAOS_HISTORY_TOPIC, LOGS_TOPIC, METRICS_TOPIC
from tests.conftest import BrokerFactory
from tests.support.waiting import wait_until

TELEMETRY = {"trioka.telemetry.enable": "true", "metrics.interval.ms": "500"}


async def _end_offsets(bootstrap: str) -> dict[str, int]:
    """Records per telemetry topic that exists (summed end offsets; log start is 0 here)."""
    async with Admin(bootstrap_servers=bootstrap) as admin:
        present = set(await admin.list_topics(include_internal=True))
        topics = [t for t in (METRICS_TOPIC, LOGS_TOPIC) if t in present]
        described = await admin.describe_topics(topics) if topics else []
    tps = [TopicPartition(t.name, p.partition) for t in described for p in t.partitions]
    if not tps:
        return {}
    async with Consumer(bootstrap_servers=bootstrap) as consumer:
        ends = await consumer.end_offsets(tps)
    out: dict[str, int] = {}
    for tp, end in ends.items():
        out[tp.topic] = out.get(tp.topic, 0) + end
    return out


def test_export_reads_the_topics_to_their_end(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    broker = broker_factory(TELEMETRY)

    async def shipped() -> bool:
        ends = await _end_offsets(broker.bootstrap)
        return ends.get(METRICS_TOPIC, 0) >= 2 and ends.get(LOGS_TOPIC, 0) >= 1

    trio.run(lambda: wait_until(shipped, within=60, every=0.2))
    before = trio.run(_end_offsets, broker.bootstrap)
    kill = {"time": 1_790_000_000.0, "action": "kill", "node": "broker-2"}
    counts = export_run(broker.bootstrap, tmp_path, sampler_lines=[], faults=[kill], deadline_s=60)

    assert counts["complete"] is True and counts["skipped"] == 0
    # at least what was there before the export began (the shippers go on meanwhile)
    assert counts[METRICS_TOPIC] >= before[METRICS_TOPIC]
    assert counts[LOGS_TOPIC] >= before[LOGS_TOPIC]
    assert (counts["fault_ops"], counts["sampler_ops"]) == (1, 0)
    spool = tmp_path / SPOOL_DIR
    assert counts["spool"] == str(spool)
    rows = [
        row for f in spool_files([spool]) for row in spool_rows(str(f), f.read_bytes().splitlines())
    ]
    by_topic: dict[str, int] = {}
    for key, value, topic, *_ in rows:
        assert topic is not None and key is not None, value  # no torn line, every record keyed
        json.loads(value)
        by_topic[topic] = by_topic.get(topic, 0) + 1
    assert by_topic == {
        METRICS_TOPIC: counts[METRICS_TOPIC],
        LOGS_TOPIC: counts[LOGS_TOPIC],
        CHAOS_HISTORY_TOPIC: counts[CHAOS_HISTORY_TOPIC] + 1,
    }
