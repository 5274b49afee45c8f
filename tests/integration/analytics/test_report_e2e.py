"""The whole issue end to end: a 3-broker Raft cluster, known load, one forced election,
telemetry in the three topics, the job reading them through format("trioka"), and the report's
numbers checked against what the test did.

Until the processes emit the catalogued metrics and log events (the metrics and logging
slices), this test ships that telemetry itself, in the exact contract format (protocol.telemetry)
and under the shipper's keys: what the brokers and the controller would have sent for what
really happened here (per-leader MessagesInPerSec counters, the controller's "broker failure
detected" and "leader election" events) and the chaos history of the kill. The report is
analytics.report's (build_report), run by the job (analytics.job.run).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs pyspark: pip install 'trioka[analytics]'")

import trio

from analytics.job import JobArgs, run
from client.sync import SyncAdmin, SyncProducer
from deploy.chaos.history import History, NemesisValue
from deploy.chaos.history_files import history_records
from protocol.telemetry import (
    CHAOS_HISTORY_TOPIC,
    LOGS_TOPIC,
    METRICS_TOPIC,
    MetricsSnapshot,
    Sample,
    Source,
    log_record,
)
from tests.support.cluster import RaftCluster

TOPIC = "orders"
RECORDS = 600
MESSAGES_IN = "kafka_server_BrokerTopicMetrics_MessagesInPerSec_total"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[RaftCluster]:
    c = RaftCluster(tmp_path / "cluster", brokers=3)
    try:
        c.start()
        trio.run(c.wait_ready)
        yield c
    finally:
        c.cleanup()


def ship(bootstrap: str, topic: str, records: list[tuple[bytes, dict[str, Any] | bytes]]) -> None:
    with SyncProducer(bootstrap_servers=bootstrap) as producer:
        for key, value in records:
            data = value if isinstance(value, bytes) else json.dumps(value).encode()
            producer.send(topic, data, key).result(timeout=30)


def test_report_numbers_match_what_the_test_did(
    spark: Any, cluster: RaftCluster, tmp_path: Path
) -> None:
    started = datetime.now(UTC)
    with SyncAdmin(bootstrap_servers=cluster.bootstrap) as admin:
        admin.create_topic(TOPIC, 3, 3)
        for internal in (METRICS_TOPIC, LOGS_TOPIC, CHAOS_HISTORY_TOPIC):
            admin.create_topic(internal, 1, 3)

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
    per_broker = {b: sum(1 for i in range(RECORDS) if led[i % 3] == b) for b in cluster.brokers}

    # the forced election: SIGKILL the leader of orders-0 (recorded as a chaos nemesis would)
    old = led[0]
    history = History()

    async def fail_over() -> int:
        history.nemesis(NemesisValue("kill", (f"broker-{old}",), {"action": "kill"}))
        await cluster.brokers[old].akill()
        info = await cluster.wait_partition(TOPIC, 0, lambda i: i.leader not in (-1, old))
        return info.leader

    new = trio.run(fail_over)
    controller = trio.run(cluster.active_controller_id)

    # What the shipper would have shipped for all that (the contract's exact format).
    now = int(time.time() * 1000)
    t0 = int(started.timestamp() * 1000)
    snapshots = [
        MetricsSnapshot(ts, Source("broker", b), [Sample(MESSAGES_IN, {"topic": TOPIC}, value)])
        for b, n in per_broker.items()
        for ts, value in ((t0 + 1, 0.0), (now, float(n)))
    ]
    stale = MetricsSnapshot(t0 - 3_600_000, Source("broker", 9), [Sample(MESSAGES_IN, {"topic": TOPIC}, 1e6)])  # fmt: skip
    ship(cluster.live_bootstrap(), METRICS_TOPIC,
         [(s.source.key.encode(), s.to_json()) for s in [*snapshots, stale]])  # fmt: skip
    context = {"level": "info", "role": "controller", "node_id": controller}
    events = [
        log_record({**context, "event": "broker failure detected", "broker_id": old,
                    "reason": "heartbeat session expired"}, now - 2),
        log_record({**context, "event": "leader election", "topic": TOPIC, "partition": 0,
                    "leader": new, "previous_leader": old, "leader_epoch": 1, "isr": [new],
                    "cause": "offline", "unclean": False}, now - 1),
    ]  # fmt: skip
    ship(
        cluster.live_bootstrap(),
        LOGS_TOPIC,
        [(f"controller-{controller}".encode(), e) for e in events],
    )
    ship(cluster.live_bootstrap(), CHAOS_HISTORY_TOPIC, list(history_records(history)))

    out = tmp_path / "report"
    args = JobArgs(out=out, bootstrap_server=cluster.live_bootstrap(), start=started)
    summary = run(spark, args)

    assert summary.html == out / "report.html" and summary.html.is_file()
    assert (out / "tables").is_dir()
    assert summary.records_in == {TOPIC: RECORDS}  # the stale snapshot is before --from
    assert summary.elections == 1 and summary.elections_by_cause == {"offline": 1}
    assert summary.history_ops == 1
    [failover] = summary.failovers
    assert (failover.broker_id, failover.controller) == (old, f"controller-{controller}")
    assert failover.fault_from == "nemesis" and failover.elections == 1
