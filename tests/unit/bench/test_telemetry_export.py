"""bench/telemetry_export.py's writers on given records: the benchmark's sampler outcomes and
kills as chaos history ops, the cluster's telemetry records as spool lines, and a spool that
the report reads back into a failover with the kill as its fault, the sampler's gap and the
cluster's size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.telemetry_export import (
    Segments,
    history_ops,
    record_line,
    write_history,
)
from client import ConsumerRecord
from deploy.chaos.check.history import OpKind, OpType
from deploy.chaos.check.history_files import op_from_json
from protocol.metric_names import GLOBAL_PARTITION_COUNT
from protocol.telemetry import (
    CHAOS_HISTORY_TOPIC,
    LOGS_TOPIC,
    METRICS_TOPIC,
    MetricsSnapshot,
    Sample,
    Source,
    log_record,
)

T0 = 1_790_000_000_000  # epoch ms
KILL_MS = T0 + 1_000


def _line(topic: str, partition: int, sent_ms: int, done_ms: int, ok: bool = True) -> dict:
    return {"topic": topic, "partition": partition, "sent": sent_ms / 1000,
            "done": done_ms / 1000, "ok": ok, "error": None if ok else "RequestTimedOut"}  # fmt: skip


SAMPLER = [
    _line("fo0", 0, T0 + 800, T0 + 900),  # the last ack before the kill
    _line("fo0", 0, T0 + 1_000, T0 + 3_000, ok=False),
    _line("fo0", 0, T0 + 3_100, T0 + 6_200),  # the first after: a 5,300 ms gap
    _line("fo0", 1, T0 + 850, T0 + 950),
    _line("fo0", 1, T0 + 1_050, T0 + 1_400),  # led by a live broker: 450 ms
]
FAULTS = [
    {"time": KILL_MS / 1000, "action": "kill", "node": "broker-3"},
    {"time": (T0 + 30_000) / 1000, "action": "restart", "node": "broker-3"},
]


def _spool_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(path.rglob("*.jsonl")) for line in f.open()]


def test_sampler_lines_and_kills_are_history_ops(tmp_path: Path) -> None:
    ops = history_ops(SAMPLER, FAULTS)
    assert write_history(ops, tmp_path) == len(ops) == 2 * len(SAMPLER) + len(FAULTS)
    lines = _spool_lines(tmp_path)
    assert {(line["topic"], line["key"]) for line in lines} >= {
        (CHAOS_HISTORY_TOPIC, "nemesis"),
        (CHAOS_HISTORY_TOPIC, "sampler-fo0-0"),
    }
    read = [op_from_json(line["value"]) for line in lines]  # the chaos history's own reader
    assert [op.index for op in read] == list(range(len(read)))
    assert [op.ts_ms for op in read] == sorted(op.ts_ms for op in read)
    (kill, restart) = [op for op in read if op.kind is OpKind.NEMESIS]
    assert (kill.value.fault, kill.value.targets, kill.value.detail) == (
        "kill",
        ("broker-3",),
        {"action": "kill"},
    )
    assert (kill.ts_ms, kill.time_ns) == (KILL_MS, KILL_MS * 1_000_000)
    assert restart.value.detail["action"] == "restart"
    for op in read:
        if op.kind is OpKind.SEND and op.type is not OpType.INVOKE:
            invoke = read[op.invocation]
            assert (invoke.type, invoke.process, invoke.value) == (
                OpType.INVOKE,
                op.process,
                op.value,
            )
    failed = [op for op in read if op.kind is OpKind.SEND and op.type is OpType.INFO]
    assert [(op.value.partition, op.error, op.ts_ms) for op in failed] == [
        (0, "RequestTimedOut", T0 + 3_000)
    ]


def test_a_fault_needs_a_node() -> None:
    with pytest.raises(ValueError, match="a time, an action and a node"):
        history_ops([], [{"time": 1.0, "action": "kill", "node": ""}])


def _record(topic: str, value: bytes, key: str | None = "broker-1") -> ConsumerRecord:
    return ConsumerRecord(topic, 0, 0, 0, None if key is None else key.encode(), value)


def test_record_lines_keep_the_shipped_json() -> None:
    compact = b'{"v":1,"kind":"log","event":"x"}'
    assert json.loads(record_line(_record(LOGS_TOPIC, compact)) or "") == {
        "topic": LOGS_TOPIC,
        "key": "broker-1",
        "value": {"v": 1, "kind": "log", "event": "x"},
    }
    pretty = b'{\n  "kind": "metrics"\n}'
    assert json.loads(record_line(_record(METRICS_TOPIC, pretty, None)) or "")["value"] == {
        "kind": "metrics"
    }
    assert record_line(_record(LOGS_TOPIC, b"[1, 2]")) is None
    assert record_line(_record(LOGS_TOPIC, b"{torn")) is None


def _telemetry() -> list[ConsumerRecord]:
    """A ZK-mode failover as the cluster ships it: broker-1 (the controller) detects broker-3 at
    T0+5 s, elects fo0/0 on broker-2, which applies it; GlobalPartitionCount 3,000 before."""

    def log(ts_off: int, node: int, event: str, **fields: Any) -> ConsumerRecord:
        value = log_record({"event": event, "level": "info", "role": "broker", "node_id": node,
                            **fields}, T0 + ts_off)  # fmt: skip
        return _record(
            LOGS_TOPIC, json.dumps(value, separators=(",", ":")).encode(), f"broker-{node}"
        )

    gpc = GLOBAL_PARTITION_COUNT
    snapshot = MetricsSnapshot(T0, Source("broker", 1), [Sample(gpc, {}, 3_000.0)]).to_json()
    return [
        _record(METRICS_TOPIC, json.dumps(snapshot).encode()),
        log(700, 3, "fetcher started"),
        log(5_000, 1, "broker failure detected", broker_id=3, broker_epoch=9, reason="fenced",
            event_type="FenceDeadBroker"),
        log(5_010, 1, "leader election", topic="fo0", partition=0, leader=2, previous_leader=3,
            leader_epoch=4, isr=[1, 2], cause="offline", unclean=False,
            event_type="FenceDeadBroker"),
        log(5_020, 1, "controller event processed", event_type="FenceDeadBroker", queue_ms=2.0,
            process_ms=15.0, records=2, error="NONE"),
        log(5_100, 2, "partition leadership applied", topic="fo0", partition=0,
            role_in_partition="leader", leader=2, leader_epoch=4, previous_leader=3, isr=[1, 2]),
        log(5_105, 2, "applied LeaderAndIsr", leaders=1, followers=0, apply_ms=50.0),
    ]  # fmt: skip


def test_an_exported_run_reads_back_into_a_report(spark: Any, tmp_path: Path) -> None:
    from analytics.job import JobArgs, run

    spool = tmp_path / "run" / "spool"
    with Segments(spool / "cluster") as out:
        for record in _telemetry():
            out.write(record_line(record) or "")
    write_history(history_ops(SAMPLER, FAULTS), spool / "bench")
    summary = run(spark, JobArgs(out=tmp_path / "report", spools=(tmp_path / "run",)))
    (failover,) = summary.failovers
    assert (failover.broker_id, failover.fault_from, failover.fault_ms) == (3, "nemesis", KILL_MS)
    assert failover.detect_ms == 4_000.0
    assert failover.unavailability_ms == 5_300.0  # the sampler's worst gap
    assert failover.partitions == 3_000
    # received at 5,055 (the LeaderAndIsr logged at 5,105 took 50 ms): 45 + 45
    assert (failover.propagation_ms, failover.apply_ms) == (45.0, 45.0)
    assert "failovers_by_size.png" in summary.charts
