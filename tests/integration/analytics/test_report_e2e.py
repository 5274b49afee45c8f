"""The whole issue end to end: a 3-broker Raft cluster, known load, one forced election,
telemetry in the three topics, the job reading them through format("trioka"), and the report's
numbers checked against what the test did.

Until the shipper (another slice) runs in every process, this test ships the telemetry itself
in the exact contract format (protocol.telemetry): what the shipper would have sent for what
really happened here (per-leader MessagesInPerSec counters, the controller's "leader election"
and "broker failure detected" events, a chaos history). analytics.report (the report slice)
is replaced by a stand-in through monkeypatch when it is not on this branch yet.
"""

from __future__ import annotations

import json
import sys
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs pyspark: pip install 'trioka[analytics]'")

import trio
from pyspark.sql import functions as F

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


@dataclass(frozen=True)
class StandInSummary:
    records_in: dict[str, float]
    elections: int
    nemesis_ops: int


def stand_in_build_report(spark: Any, samples: Any, events: Any, ops: Any, out_dir: Path,
                          start: datetime | None = None, end: datetime | None = None) -> StandInSummary:  # fmt: skip
    """The report slice's contract, minimally: records in per topic = the sum over sources of
    each source's last MessagesInPerSec counter; elections = "leader election" events."""
    last = (
        samples.where(F.col("name") == MESSAGES_IN)
        .groupBy("source", F.col("labels")["topic"].alias("topic"))
        .agg(F.max_by("value", "ts_ms").alias("value"))
        .groupBy("topic").agg(F.sum("value").alias("value"))
    )  # fmt: skip
    (out_dir / "report.html").write_text("<html>stand-in</html>")
    return StandInSummary(
        {r.topic: r.value for r in last.collect()},
        events.where(F.col("event") == "leader election").count(),
        ops.where(F.col("kind") == "nemesis").count(),
    )


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
    spark: Any, cluster: RaftCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        import analytics.report  # noqa: F401
    except ImportError:
        module = types.ModuleType("analytics.report")
        module.build_report = stand_in_build_report  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "analytics.report", module)

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

    # the forced election: SIGKILL the leader of orders-0
    old = led[0]

    async def fail_over() -> int:
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
    history = History()
    history.nemesis(NemesisValue("kill", (f"broker-{old}",), {"signal": "KILL"}))
    ship(cluster.live_bootstrap(), CHAOS_HISTORY_TOPIC, list(history_records(history)))

    out = tmp_path / "report"
    args = JobArgs(out=out, bootstrap_server=cluster.live_bootstrap(), start=started)
    summary = run(spark, args)

    assert (out / "report.html").is_file()
    assert summary.records_in == {TOPIC: float(RECORDS)}  # the stale snapshot is before --from
    assert summary.elections == 1
    assert summary.nemesis_ops == 1
