"""deploy.telemetry: the buffer and the tee (never block, count drops), the policy, snapshots,
topic creation rules, settings, and the config keys on brokers and controllers."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import structlog
import trio
import trio.testing
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from broker.config import BrokerConfig
from deploy.node.controller_config import ControllerProcessConfig
from deploy.telemetry.buffer import Entry, TelemetryBuffer
from deploy.telemetry.policy import Route, ShipPolicy
from deploy.telemetry.settings import TelemetrySettings
from deploy.telemetry.snapshot import samples_of, snapshot
from deploy.telemetry.tee import MUTED, LogTee
from deploy.telemetry.topics import CREATE_GRACE_S, creation_replication_factor
from protocol import metric_names as names
from protocol.names import topic_name_problem
from protocol.telemetry import TELEMETRY_TOPICS, Source


def entry(i: int) -> Entry:
    return Entry("__trioka_logs", "broker-1", {"i": i})


def test_buffer_is_fifo_and_refuses_at_the_bound_counting_per_topic() -> None:
    buf = TelemetryBuffer(max_records=3)
    assert [buf.offer(entry(i)) for i in range(5)] == [True, True, True, False, False]
    assert not buf.offer(Entry("__trioka_metrics", "broker-1", {}))
    assert buf.dropped == {"__trioka_logs": 2, "__trioka_metrics": 1}
    assert [e.record["i"] for e in buf.take(2)] == [0, 1]
    assert buf.offer(entry(9))
    assert [e.record["i"] for e in buf.take(10)] == [2, 9]
    assert len(buf) == 0


def test_the_tee_never_blocks_and_counts_drops_from_many_threads() -> None:
    tee = LogTee()
    buf = TelemetryBuffer(max_records=1000)

    def sink(event: Any, ts_ms: int) -> None:
        buf.offer(Entry("__trioka_logs", "k", {**event, "ts_ms": ts_ms}))

    tee.attach(sink)
    event = {"event": "x", "level": "info"}

    def log_many() -> None:
        for _ in range(2000):
            assert tee(None, "info", event) is event  # the chain goes on with the same dict

    threads = [threading.Thread(target=log_many) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(buf) == 1000
    assert buf.dropped == {"__trioka_logs": 7000}


def test_the_tee_is_a_no_op_detached_or_muted() -> None:
    tee = LogTee()
    got: list[Any] = []

    def sink(event: Any, ts_ms: int) -> None:
        got.append(event)

    tee(None, "info", {"event": "before"})
    tee.attach(sink)
    token = MUTED.set(True)
    try:
        tee(None, "info", {"event": "muted"})
    finally:
        MUTED.reset(token)
    tee(None, "info", {"event": "shipped"})
    tee.detach(sink)
    tee(None, "info", {"event": "after"})
    assert [e["event"] for e in got] == ["shipped"]


class _StoppedClock:
    def wall_ms(self) -> int:
        return 1_790_000_000_000

    def monotonic_ms(self) -> int:
        return 5


async def test_the_shipper_stamps_log_events_and_snapshots_with_the_process_clock(
    tmp_path: Path,
) -> None:
    from deploy.telemetry.shipper import TelemetryShipper

    settings = TelemetrySettings(True, 10.0, tmp_path, 1 << 20, (), 1, {})
    tee = LogTee()
    shipper = TelemetryShipper(
        settings,
        Source("broker", 1, "h", 1),
        registry=CollectorRegistry(),
        tee=tee,
        clock=_StoppedClock(),
    )
    shipper.capture()
    tee(None, "info", {"event": "x", "level": "info"})
    shipper.release()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(shipper._metrics_loop)  # one snapshot, then it sleeps
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    logged, metrics = shipper.buffer.take(10)
    assert logged.record["ts_ms"] == metrics.record["ts_ms"] == 1_790_000_000_000


def test_the_process_logging_chain_feeds_the_tee() -> None:
    from deploy.telemetry.logs import configure_logging
    from deploy.telemetry.tee import LOG_TEE

    out = io.StringIO()  # not capsys: later tests log through this stream too
    configure_logging(cache_loggers=False, role="broker", node_id=7, stream=out, json=True)
    got: list[Any] = []

    def sink(event: Any, ts_ms: int) -> None:
        got.append((dict(event), ts_ms))

    LOG_TEE.attach(sink)
    try:
        structlog.get_logger("t").info("isr shrink", topic="t", partition=0)
    finally:
        LOG_TEE.detach(sink)
    ((event, ts_ms),) = got
    assert event["event"] == "isr shrink" and event["role"] == "broker" and event["node_id"] == 7
    assert event["level"] == "info" and event["timestamp"].endswith("Z") and ts_ms > 0
    assert json.loads(out.getvalue().splitlines()[-1])["event"] == "isr shrink"


def test_policy_routes_to_the_spool_while_failing_or_spooled_and_backs_off() -> None:
    p = ShipPolicy(retry_backoff_s=0.5, retry_backoff_max_s=2.0)
    assert p.route(0.0, spool_pending=False) is Route.PRODUCE
    assert p.route(0.0, spool_pending=True) is Route.SPOOL  # order: the spool goes first
    assert [p.failed(10.0) for _ in range(4)] == [0.5, 1.0, 2.0, 2.0]
    assert p.route(10.0, spool_pending=False) is Route.SPOOL
    assert not p.may_drain(11.9) and p.may_drain(12.0)
    p.succeeded()
    assert p.healthy and p.route(12.0, spool_pending=False) is Route.PRODUCE


def test_snapshot_flattens_the_registry_without_created_samples() -> None:
    reg = CollectorRegistry()
    c = Counter("kafka_server_x", "x", ["topic"], registry=reg)
    c.labels(topic="t").inc(3)
    Gauge("g", "g", registry=reg).set(float("nan"))
    h = Histogram("lat_ms", "l", ["request"], buckets=(1, 10), registry=reg)
    h.labels(request="Produce").observe(5)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples_of(reg)}
    assert samples[("kafka_server_x_total", (("topic", "t"),))] == 3.0
    assert samples[("g", ())] is None  # NaN ships as null
    assert samples[("lat_ms_bucket", (("le", "10.0"), ("request", "Produce")))] == 1.0
    assert samples[("lat_ms_count", (("request", "Produce"),))] == 1.0
    assert not [n for n, _ in samples if n.endswith("_created")]
    doc = snapshot(reg, Source("broker", 1, "h", 42), 1234).to_json()
    assert doc["kind"] == "metrics" and doc["ts_ms"] == 1234
    assert doc["source"] == {"role": "broker", "node_id": 1, "host": "h", "pid": 42}
    json.dumps(doc, allow_nan=False)


def test_snapshot_leaves_the_log_sizes_to_prometheus() -> None:
    reg = CollectorRegistry()
    sizes = Gauge(names.LOG_SIZE, "bytes", ["topic", "partition"], registry=reg)
    sizes.labels(topic="t", partition="0").set(4096)
    Gauge("g", "g", registry=reg).set(1)
    assert [s.name for s in samples_of(reg)] == ["g"]


def test_replication_factor_waits_for_enough_brokers_then_takes_what_there_is() -> None:
    assert creation_replication_factor(3, 0, 1000) is None
    assert creation_replication_factor(3, 1, 0) is None  # the other brokers are starting
    assert creation_replication_factor(3, 3, 0) == 3
    assert creation_replication_factor(3, 5, 0) == 3
    assert creation_replication_factor(3, 2, CREATE_GRACE_S) == 2
    assert creation_replication_factor(1, 1, 0) == 1


def test_topic_names_are_legal() -> None:
    assert [topic_name_problem(t) for t in TELEMETRY_TOPICS] == [None, None, None]


def test_settings_from_broker_and_controller_configs(tmp_path: Path) -> None:
    broker = BrokerConfig.from_values({"log.dirs": [str(tmp_path / "d")]})
    s = TelemetrySettings.from_values(broker.values, broker.log_dirs[0])
    assert s.enable and s.interval_s == 10.0 and s.replication_factor == 3
    assert s.spool_dir == tmp_path / "d" / "telemetry-spool"
    assert s.spool_max_bytes == 100 * 1024 * 1024 and s.bootstrap_servers == ()
    controller = ControllerProcessConfig.from_values(
        {
            "node.id": 1,
            "controller.quorum.voters": "1@127.0.0.1:9093",
            "metadata.log.dir": str(tmp_path / "m"),
            "metrics.interval.ms": "500",
            "trioka.telemetry.bootstrap.servers": "a:1,b:2",
            "trioka.telemetry.spool.dir": str(tmp_path / "sp"),
        }
    )
    c = TelemetrySettings.from_values(controller.values, controller.metadata_log_dir)
    assert c.interval_s == 0.5 and c.bootstrap_servers == ("a:1", "b:2")
    assert c.spool_dir == tmp_path / "sp"


def test_bad_telemetry_configs_name_the_key() -> None:
    import pytest

    from protocol.config_defs import ConfigError

    for key, value in [
        ("metrics.interval.ms", "0"),
        ("trioka.telemetry.spool.max.bytes", "-1"),
        ("trioka.telemetry.enable", "maybe"),
        ("trioka.telemetry.replication.factor", "0"),
    ]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            BrokerConfig.from_values({key: value})
