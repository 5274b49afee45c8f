"""The telemetry shipper on real clusters (deploy/telemetry): every process, brokers and Raft
controllers alike, ships metrics snapshots and log events to __trioka_metrics / __trioka_logs;
with no broker to take them a controller spools them and drains the spool once brokers are back,
nothing lost (each source's `seq` has no gap)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import trio

from client import Consumer
from protocol.names import TopicPartition
from protocol.telemetry import LOGS_TOPIC, METRICS_TOPIC
from tests.integration.cluster.conftest import ClusterFactory, RaftClusterFactory
from tests.support.cluster import Cluster, RaftCluster
from tests.support.waiting import wait_until

TELEMETRY = {"trioka.telemetry.enable": "true", "metrics.interval.ms": "500"}
TOPICS = (METRICS_TOPIC, LOGS_TOPIC)


class TelemetryReader:
    """Everything in both topics, read from the beginning with the Consumer."""

    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer(
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            allow_auto_create_topics=False,  # the shipper creates them with their shape
            enable_auto_commit=False,
        )
        # (topic, key) -> records (value dicts with offset order kept per partition)
        self.records: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)

    async def __aenter__(self) -> TelemetryReader:
        await self.consumer.start()
        parts = [TopicPartition(t, p) for t in TOPICS for p in await self.partitions(t)]
        self.consumer.assign(parts)
        return self

    async def partitions(self, topic: str) -> list[int]:
        return await self.consumer.partitions_for(topic)

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.close()

    async def poll(self) -> bool:
        for r in await self.consumer.poll(timeout_ms=200):
            assert r.key is not None and r.value is not None
            self.records[(r.topic, r.key.decode())].append(json.loads(r.value))
        return True

    def keys(self, topic: str) -> set[str]:
        return {k for t, k in self.records if t == topic}

    def seqs(self, topic: str, key: str) -> list[int]:
        return [v["seq"] for v in self.records[(topic, key)]]


def sources(cluster: Cluster) -> set[str]:
    out = {f"broker-{i}" for i in cluster.brokers}
    if isinstance(cluster, RaftCluster):
        out |= {f"controller-{i}" for i in cluster.controllers}
    return out


async def wait_topics(cluster: Cluster, within: float = 60) -> None:
    async def exist() -> bool:
        async with cluster.admin() as admin:
            return set(TOPICS) <= set(await admin.list_topics(include_internal=True))

    await wait_until(exist, within=within, every=0.2)


async def test_every_process_ships_metrics_and_logs(cluster_factory: ClusterFactory) -> None:
    cluster = cluster_factory(3, overrides=TELEMETRY)
    await cluster.wait_ready()
    await wait_topics(cluster)
    expected = sources(cluster)
    async with TelemetryReader(cluster.bootstrap) as reader:
        assert len(await reader.partitions(METRICS_TOPIC)) == 3

        def everyone_twice() -> bool:
            return all(
                len(reader.records[(METRICS_TOPIC, k)]) >= 2
                and len(reader.records[(LOGS_TOPIC, k)]) >= 1
                for k in expected
            )

        async def poll_until() -> bool:
            await reader.poll()
            return everyone_twice()

        await wait_until(poll_until, within=60, every=0)
    for key in expected:
        role, node_id = key.rsplit("-", 1)
        metrics = reader.records[(METRICS_TOPIC, key)]
        for snap in metrics:
            assert snap["v"] == 1 and snap["kind"] == "metrics"
            assert snap["source"]["role"] == role and snap["source"]["node_id"] == int(node_id)
            assert snap["source"]["pid"] > 0
        names = {s["name"] for s in metrics[-1]["samples"]}
        assert "process_cpu_seconds_total" in names
        logs = reader.records[(LOGS_TOPIC, key)]
        for rec in logs:
            assert rec["v"] == 1 and rec["kind"] == "log" and rec["level"]
            assert rec["node_id"] == int(node_id)
            assert rec["role"] == role
        # One partition per key: each source's records in the order it made them.
        for records in (metrics, logs):
            assert [r["seq"] for r in records] == list(range(len(records)))
            stamps = [r["ts_ms"] for r in records]
            assert stamps == sorted(stamps)
    # The shipper's own client never ships its log events (no feedback loop).
    shipped = [r["event"] for k in expected for r in reader.records[(LOGS_TOPIC, k)]]
    assert "producer id assigned" not in shipped
    starts = [e for e in shipped if e == "broker starting" or e == "controller started"]
    assert len(starts) == len(expected)  # start-up events are captured too


def spooled_seqs(spool_dir: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {t: [] for t in TOPICS}
    for segment in sorted(spool_dir.glob("*.jsonl")):
        for line in segment.read_bytes().splitlines():
            rec = json.loads(line)
            out[rec["topic"]].append(rec["value"]["seq"])
    return out


async def test_a_controller_spools_while_no_broker_is_up_and_drains_later(
    raft_cluster_factory: RaftClusterFactory,
) -> None:
    cluster = raft_cluster_factory(3, overrides=TELEMETRY)
    await cluster.wait_ready()
    await wait_topics(cluster)
    ctl_id = min(cluster.controllers)
    key = f"controller-{ctl_id}"
    spool_dir = cluster.controllers[ctl_id].metadata_dir / "telemetry-spool"
    async with TelemetryReader(cluster.bootstrap) as reader:

        async def shipped_some() -> bool:
            await reader.poll()
            return len(reader.records[(LOGS_TOPIC, key)]) > 0

        await wait_until(shipped_some, within=60, every=0)

    async with trio.open_nursery() as nursery:
        for proc in cluster.brokers.values():
            nursery.start_soon(proc.astop)
    # Every broker is gone: the controllers' snapshots and events go to their spools.
    await wait_until(lambda: len(spooled_seqs(spool_dir)[METRICS_TOPIC]) >= 5, within=60, every=0.2)
    spooled = spooled_seqs(spool_dir)
    assert all(seqs == sorted(seqs) for seqs in spooled.values())

    async with trio.open_nursery() as nursery:
        for proc in cluster.brokers.values():
            nursery.start_soon(proc.astart)
    await cluster.wait_ready()
    await wait_until(lambda: not list(spool_dir.glob("*.jsonl")), within=60, every=0.2)

    async with TelemetryReader(cluster.bootstrap) as reader:

        async def nothing_lost() -> bool:
            await reader.poll()
            for topic, spooled_here in spooled.items():
                seqs = set(reader.seqs(topic, key))
                if not seqs or seqs != set(range(max(seqs) + 1)):
                    return False
                if spooled_here and max(spooled_here) not in seqs:
                    return False
            return True

        # Everything logged before, during and after the outage is in the topic, in order.
        await wait_until(nothing_lost, within=60, every=0)
