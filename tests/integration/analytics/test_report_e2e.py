"""The whole issue end to end: a 3-broker Raft cluster with its telemetry shippers on, known
load, one forced election, the job reading the three topics through format("trioka"), and the
report's numbers checked against what the test did.

Every metric and log event here is the processes' own (broker MessagesInPerSec counters, the
controller's "broker failure detected" and "leader election" events), shipped by their
shippers; the test only plays the chaos runner's part, recording and shipping the history of
the kill it does.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs pyspark: pip install 'trioka[analytics]'")

import trio

from analytics.job import JobArgs, run
from analytics.source_client import log_offsets
from client import Consumer
from client.sync import SyncAdmin, SyncProducer
from deploy.chaos.check.history import History, NemesisValue
from deploy.chaos.check.history_files import history_records
from protocol.metric_names import MESSAGES_IN
from protocol.names import TopicPartition
from protocol.telemetry import CHAOS_HISTORY_TOPIC, LOGS_TOPIC, METRICS_TOPIC
from tests.support.cluster import RaftCluster
from tests.support.waiting import wait_until

TOPIC = "orders"
RECORDS = 600
TELEMETRY = {"trioka.telemetry.enable": "true", "metrics.interval.ms": "1000"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RaftCluster]:
    c = RaftCluster(tmp_path / "cluster", brokers=3, overrides=TELEMETRY)
    try:
        c.start()
        trio.run(c.wait_ready)
        yield c
    finally:
        c.cleanup()


class Shipped:
    """What the shippers have delivered so far: metric snapshots and log events by source."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer(
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            allow_auto_create_topics=False,
            enable_auto_commit=False,
        )
        self.by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)

    async def poll(self) -> None:
        for r in await self.consumer.poll(timeout_ms=200):
            assert r.value is not None
            self.by_topic[r.topic].append(json.loads(r.value))

    def messages_in(self) -> dict[str, float]:
        """source -> the latest shipped MessagesInPerSec of TOPIC."""
        latest: dict[str, tuple[int, float]] = {}
        for snap in self.by_topic[METRICS_TOPIC]:
            for s in snap["samples"]:
                if s["name"] == MESSAGES_IN and s["labels"].get("topic") == TOPIC:
                    key = f"{snap['source']['role']}-{snap['source']['node_id']}"
                    if snap["ts_ms"] >= latest.get(key, (-1, 0.0))[0]:
                        latest[key] = (snap["ts_ms"], s["value"])
        return {k: v for k, (_, v) in latest.items()}

    def offline_elections(self, old: int) -> set[tuple[str, int]]:
        return {
            (e["topic"], e["partition"])
            for e in self.by_topic[LOGS_TOPIC]
            if e.get("event") == "leader election"
            and e.get("cause") == "offline"
            and e.get("previous_leader") == old
        }


async def partitions_led_by(cluster: RaftCluster, broker: int) -> set[tuple[str, int]]:
    async with cluster.admin() as admin:
        topics = await admin.list_topics(include_internal=True)
        described = await admin.describe_topics(topics)
    return {(t.name, p.partition) for t in described for p in t.partitions if p.leader == broker}


def test_report_numbers_match_what_the_test_did(
    spark: Any, cluster: RaftCluster, tmp_path: Path
) -> None:
    started = datetime.now(UTC)

    async def telemetry_topics() -> bool:
        async with cluster.admin() as admin:
            names = set(await admin.list_topics(include_internal=True))
        return {METRICS_TOPIC, LOGS_TOPIC} <= names

    trio.run(lambda: wait_until(telemetry_topics, within=60, every=0.2))
    with SyncAdmin(bootstrap_servers=cluster.bootstrap) as admin:
        admin.create_topic(TOPIC, 3, 3)
        admin.create_topic(CHAOS_HISTORY_TOPIC, 1, 3)

    async def leaders() -> dict[int, int]:
        return {
            p: (await cluster.wait_partition(TOPIC, p, lambda i: i.leader > 0 and len(i.isr) == 3)).leader
            for p in range(3)
        }  # fmt: skip

    led = trio.run(leaders)
    with SyncProducer(bootstrap_servers=cluster.bootstrap, acks="all") as producer:
        futures = [producer.send(TOPIC, f"v{i}".encode(), partition=i % 3) for i in range(RECORDS)]
        for f in futures:
            f.result(timeout=60)
    per_broker = {
        f"broker-{b}": float(sum(1 for i in range(RECORDS) if led[i % 3] == b))
        for b in set(led.values())
    }
    old = led[0]
    history = History()

    async def fail_over() -> set[tuple[str, int]]:
        shipped = Shipped(cluster.bootstrap)
        await shipped.consumer.start()
        try:
            parts = [
                TopicPartition(t, p)
                for t in (METRICS_TOPIC, LOGS_TOPIC)
                for p in await shipped.consumer.partitions_for(t)
            ]
            shipped.consumer.assign(parts)

            async def counted() -> bool:
                await shipped.poll()
                return shipped.messages_in() == per_broker

            # every leader shipped its count before one of them dies
            await wait_until(counted, within=60, every=0)
            led_by_old = await partitions_led_by(cluster, old)
            history.nemesis(NemesisValue("kill", (f"broker-{old}",), {"action": "kill"}))
            await cluster.brokers[old].akill()
            await cluster.wait_partition(TOPIC, 0, lambda i: i.leader not in (-1, old))

            async def elected() -> bool:
                await shipped.poll()
                return shipped.offline_elections(old) >= led_by_old

            await wait_until(elected, within=60, every=0)
            assert shipped.offline_elections(old) == led_by_old
            return led_by_old
        finally:
            await shipped.consumer.close()

    led_by_old = trio.run(fail_over)
    assert (TOPIC, 0) in led_by_old
    with SyncProducer(bootstrap_servers=cluster.live_bootstrap()) as producer:
        for key, value in history_records(history):
            producer.send(CHAOS_HISTORY_TOPIC, value, key).result(timeout=30)

    out = tmp_path / "report"
    args = JobArgs(out=out, bootstrap_server=cluster.live_bootstrap(), start=started)
    summary = run(spark, args, offsets=log_offsets(cluster.live_bootstrap()))

    assert summary.html == out / "report.html" and summary.html.is_file()
    assert (out / "tables" / "topic_totals.csv").is_file()
    assert summary.records_in[TOPIC] == RECORDS
    # the exact count (log end offsets, asked with a broker dead) agrees with the metrics' count
    assert summary.log_records is not None and summary.log_records[TOPIC] == RECORDS
    assert summary.elections_by_cause["offline"] == len(led_by_old)
    assert summary.history_ops == 1
    [failover] = [f for f in summary.failovers if f.broker_id == old]
    assert failover.fault_from == "nemesis" and failover.elections == len(led_by_old)
    assert failover.detect_ms is not None and failover.detect_ms > 0
    # The new leaders' change sets split propagation from their own apply, and the size is the
    # controller's GlobalPartitionCount: orders' 3 partitions and the telemetry topics'.
    assert failover.propagation_ms is not None and failover.apply_ms is not None
    assert failover.apply_ms >= 0
    assert failover.partitions is not None and failover.partitions >= 4
