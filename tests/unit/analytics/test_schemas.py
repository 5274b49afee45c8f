"""parse_metrics / parse_logs / parse_history on hand-made JSON with known answers (Spark
local mode: the session-scoped `spark` fixture), and the schema built from the catalogue."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs pyspark: pip install 'trioka[analytics]'")

from analytics.schemas import (
    EVENTS_SCHEMA,
    FAILOVER_OPS_SCHEMA,
    OPS_SCHEMA,
    RAW_SCHEMA,
    SAMPLES_SCHEMA,
    event_fields,
    parse_history,
    parse_logs,
    parse_metrics,
)
from deploy.chaos.check.history import (
    History,
    NemesisValue,
    OpKind,
    OpType,
    PolledRecord,
    SendValue,
)
from deploy.chaos.check.history_files import op_to_json
from protocol.names import TopicPartition
from protocol.telemetry import (
    LOG_EVENTS,
    EventSpec,
    FieldType,
    MetricsSnapshot,
    Sample,
    Source,
    log_record,
)
from tests.support.telemetry_frames import nemesis, ops_df, send_ok


def raw(spark: Any, values: list[Any], topic: str = "t") -> Any:
    rows = [
        (None, (v if isinstance(v, bytes) else json.dumps(v).encode()), topic, 0, i,
         datetime(2026, 11, 26, tzinfo=UTC), 0)
        for i, v in enumerate(values)
    ]  # fmt: skip
    return spark.createDataFrame(rows, RAW_SCHEMA)


def epoch_ms(ts: datetime) -> int:
    """A collected timestamp (naive, local time; or aware) as epoch milliseconds."""
    return round(ts.timestamp() * 1000)


def test_failover_ops_schema_is_columns_of_ops_schema() -> None:
    # The failover analysis' ops (an empty history, the tests' hand-made ops) are parse_history's
    # columns as it types them, in its order.
    names = OPS_SCHEMA.fieldNames()
    assert FAILOVER_OPS_SCHEMA.fields == [OPS_SCHEMA[f.name] for f in FAILOVER_OPS_SCHEMA.fields]
    positions = [names.index(f.name) for f in FAILOVER_OPS_SCHEMA.fields]
    assert positions == sorted(positions)


def test_hand_made_ops_have_the_failover_ops_schema(spark: Any) -> None:
    frame = ops_df(spark, [nemesis(1, "kill", "broker-1"), send_ok(2, "t", 0)])
    assert frame.schema == FAILOVER_OPS_SCHEMA


def test_event_fields_are_the_union_of_the_catalogue() -> None:
    fields = event_fields()
    for spec in LOG_EVENTS:
        for name, field_type in spec.fields.items():
            assert fields[name] is field_type
    assert set(fields) == {n for spec in LOG_EVENTS for n in spec.fields}
    assert [f.name for f in EVENTS_SCHEMA.fields][7:-1] == list(fields)


def test_a_field_with_two_types_in_the_catalogue_is_refused() -> None:
    specs = [
        EventSpec("x", "broker", "", {"partition": FieldType.INT}),
        EventSpec("y", "broker", "", {"partition": FieldType.STRING}),
    ]
    with pytest.raises(
        ValueError, match="field 'partition' is long in one log event and string in 'y'"
    ):
        event_fields(specs)
    with pytest.raises(ValueError, match="field 'level' is a common log field"):
        event_fields([EventSpec("z", "broker", "", {"level": FieldType.INT})])


def test_parse_metrics_one_row_per_sample(spark: Any) -> None:
    snap = MetricsSnapshot(
        1_790_000_000_123,
        Source("broker", 2, "h", 7),
        [
            Sample("kafka_server_brokertopicmetrics_messagesin_total", {"topic": "t"}, 42.0),
            Sample("kafka_network_requestmetrics_totaltimems_bucket",
                   {"request": "Produce", "le": "+Inf"}, 3.0),
            Sample("nan_gauge", {}, None),
        ],
    )  # fmt: skip
    chaos = MetricsSnapshot(5, Source("chaos", None), [Sample("x", {}, 1.0)])
    df = parse_metrics(
        raw(spark, [snap.to_json(), chaos.to_json(), {"kind": "log", "ts_ms": 1}, b"{torn"])
    )
    assert df.schema.simpleString() == SAMPLES_SCHEMA.simpleString()
    # ts is ts_ms as a timestamp (collect() gives naive local datetimes: compare epoch ms)
    got = sorted((r.source, r.role, r.node_id, r.name, dict(r.labels), r.value, r.ts_ms,
                  epoch_ms(r.ts)) for r in df.collect())  # fmt: skip
    ts = 1_790_000_000_123
    assert got == sorted([
        ("broker-2", "broker", 2, "kafka_server_brokertopicmetrics_messagesin_total",
         {"topic": "t"}, 42.0, 1_790_000_000_123, ts),
        ("broker-2", "broker", 2, "kafka_network_requestmetrics_totaltimems_bucket",
         {"request": "Produce", "le": "+Inf"}, 3.0, 1_790_000_000_123, ts),
        ("broker-2", "broker", 2, "nan_gauge", {}, None, 1_790_000_000_123, ts),
        ("chaos", "chaos", None, "x", {}, 1.0, 5, 5),
    ])  # fmt: skip


def test_parse_logs_types_catalogued_fields_and_keeps_the_rest(spark: Any) -> None:
    election = log_record(
        {"event": "leader election", "level": "info", "timestamp": "2026-11-26T00:00:00Z",
         "role": "controller", "node_id": 3001, "topic": "orders", "partition": 4, "leader": 2,
         "previous_leader": 1, "leader_epoch": 7, "isr": [2, 3], "cause": "offline",
         "unclean": False},
        1000,
    )  # fmt: skip
    queue = log_record({"event": "controller event processed", "level": "info",
                        "role": "controller", "node_id": 3001, "event_type": "BrokerChange",
                        "queue_ms": 1.5, "process_ms": 12}, 2000)  # fmt: skip
    other = log_record({"event": "something else", "level": "warning", "role": "broker",
                        "node_id": 1, "partition": "not-an-int", "correlation_id": 9}, 3000)  # fmt: skip
    metrics = MetricsSnapshot(1, Source("broker", 1), []).to_json()
    df = parse_logs(raw(spark, [election, queue, other, metrics, b"not json"]))
    assert df.schema.simpleString() == EVENTS_SCHEMA.simpleString()
    by_event = {r.event: r for r in df.collect()}
    assert set(by_event) == {"leader election", "controller event processed", "something else"}
    e = by_event["leader election"]
    assert (e.source, e.role, e.node_id, e.level, e.ts_ms) == (
        "controller-3001",
        "controller",
        3001,
        "info",
        1000,
    )
    assert (e.topic, e.partition, e.leader, e.previous_leader, e.leader_epoch, e.isr, e.cause,
            e.unclean) == ("orders", 4, 2, 1, 7, [2, 3], "offline", False)  # fmt: skip
    assert epoch_ms(e.ts) == 1000
    q = by_event["controller event processed"]
    assert (q.event_type, q.queue_ms, q.process_ms, q.topic) == ("BrokerChange", 1.5, 12.0, None)
    o = by_event["something else"]
    assert (o.source, o.level, o.partition) == ("broker-1", "warning", None)  # not catalogued
    assert json.loads(o.record)["correlation_id"] == 9


def test_parse_history_typed_columns_per_op_kind(spark: Any) -> None:
    h = History(clock_ns=iter(range(100, 10_000, 100)).__next__,
                wall_ms=iter(range(1_000, 100_000, 1_000)).__next__)  # fmt: skip
    send = h.invoke("p0", OpKind.SEND, SendValue("orders", b"v1", b"k1"))
    h.complete(send, OpType.OK, SendValue("orders", b"v1", b"k1", 2, 17))
    poll = h.invoke("p1", OpKind.POLL, ())
    h.complete(poll, OpType.OK, (PolledRecord("orders", 2, 17, b"v1", None),))
    h.nemesis(NemesisValue("kill", ("broker-2",), {"action": "kill", "signal": "KILL"}))
    commit = h.invoke("p1", OpKind.COMMIT, {TopicPartition("orders", 2): 18})
    h.complete(commit, OpType.FAIL, error="REBALANCE_IN_PROGRESS")
    assign = h.invoke("p1", OpKind.ASSIGN, (TopicPartition("orders", 0),))
    seek = h.invoke("p1", OpKind.SEEK, {TopicPartition("orders", 0): 5})
    lines = [op_to_json(op) for op in h.ops] + [{"kind": "log", "ts_ms": 1}]
    df = parse_history(raw(spark, lines))
    assert df.schema.simpleString() == OPS_SCHEMA.simpleString()
    ops = {r["index"]: r for r in df.collect()}  # r.index is tuple.index
    assert sorted(ops) == list(range(len(h.ops)))
    ok_send = ops[1]
    assert (ok_send.process, ok_send.type, ok_send.kind, ok_send.invocation, ok_send.time_ns) == (
        "p0",
        "ok",
        "send",
        0,
        200,
    )
    assert (ok_send.topic, ok_send.partition, ok_send.offset, ok_send.key, ok_send.value) == (
        "orders",
        2,
        17,
        "k1",
        "v1",
    )
    assert ops[0].offset is None and ops[0].polled is None
    polled = ops[3].polled
    assert [tuple(p) for p in polled] == [("orders", 2, 17, "v1", None)]
    nemesis = ops[4]
    assert (nemesis.action, nemesis.ts_ms) == ("kill", 5_000)
    assert (nemesis.fault, nemesis.targets, json.loads(nemesis.detail)) == (
        "kill",
        ["broker-2"],
        {"action": "kill", "signal": "KILL"},
    )
    failed = ops[6]
    assert (failed.type, failed.error, failed.group) == ("fail", "REBALANCE_IN_PROGRESS", "")
    assert [tuple(o) for o in failed.offsets] == [("orders", 2, 18)]
    assert [tuple(p) for p in ops[assign.index].partitions] == [("orders", 0)]
    assert [tuple(o) for o in ops[seek.index].offsets] == [("orders", 0, 5)]
    assert epoch_ms(ok_send.shipped_ts) == epoch_ms(datetime(2026, 11, 26, tzinfo=UTC))
