"""Telemetry records: what every process ships and what analytics/ reads (DESIGN section 8).

Three internal topics, each record's value a UTF-8 JSON object and its key the source
(`"<role>-<node_id>"`, e.g. `broker-1`, `controller-3000`, `chaos`):

- `__trioka_metrics`: one record per process per `metrics.interval.ms`, a `MetricsSnapshot`:
  `{"v": 1, "kind": "metrics", "ts_ms": <epoch ms>, "source": {...}, "samples": [...]}` where
  each sample is prometheus_client's flattened sample `{"name", "labels", "value"}` (counters as
  `<name>_total`, histograms as `_bucket` with an `le` label, `_count`, `_sum`); a value that JSON
  cannot hold (NaN, +-inf) is `null`.
- `__trioka_logs`: one record per log event, a `LogRecord`: structlog's event dict as rendered
  (`event`, `level`, `timestamp` ISO UTC, the bound context `role`, `node_id`, ... and the
  event's own fields) plus `"v": 1, "kind": "log", "ts_ms": <epoch ms>`. `LOG_EVENTS` is the
  catalogue of the events analytics/ depends on: their names and typed fields. Other events are
  shipped too; analytics/ keeps their common columns only.
- `__trioka_chaos_history`: the chaos runner's operations (deploy/chaos/history_files.py's JSON).

This module is the contract between the shipper (deploy/), the emitters (broker/, controller/,
raft/, zkstore/) and the readers (analytics/): pure data, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

METRICS_TOPIC = "__trioka_metrics"
LOGS_TOPIC = "__trioka_logs"
CHAOS_HISTORY_TOPIC = "__trioka_chaos_history"
TELEMETRY_TOPICS = (METRICS_TOPIC, LOGS_TOPIC, CHAOS_HISTORY_TOPIC)
SCHEMA_VERSION = 1


class FieldType(Enum):
    """A field's JSON type, which analytics/ maps to a Spark type."""

    STRING = "string"
    INT = "long"
    FLOAT = "double"
    BOOL = "boolean"
    INT_LIST = "array<long>"


@dataclass(frozen=True, slots=True)
class EventSpec:
    """One catalogued log event: its exact `event` string, who emits it, and its fields."""

    name: str
    emitter: str
    doc: str
    fields: Mapping[str, FieldType] = field(default_factory=dict)


# Fields every shipped log record has (the bound context may add more).
COMMON_LOG_FIELDS: Mapping[str, FieldType] = {
    "v": FieldType.INT,
    "kind": FieldType.STRING,
    "ts_ms": FieldType.INT,
    "timestamp": FieldType.STRING,
    "level": FieldType.STRING,
    "event": FieldType.STRING,
    "role": FieldType.STRING,
    "node_id": FieldType.INT,
}


def _spec(name: str, emitter: str, doc: str, **fields: FieldType) -> EventSpec:
    return EventSpec(name, emitter, doc, fields)


_STR, _INT, _FLT, _BOOL, _INTS = (
    FieldType.STRING,
    FieldType.INT,
    FieldType.FLOAT,
    FieldType.BOOL,
    FieldType.INT_LIST,
)

# The events analytics/ depends on. Emitters log exactly these names with at least these fields.
LOG_EVENTS: tuple[EventSpec, ...] = (
    _spec(
        "broker failure detected",
        "controller",
        "the active controller learns that a broker is gone (ZK: its /brokers/ids znode went "
        "away; Raft: its heartbeat session expired or it was fenced)",
        broker_id=_INT,
        reason=_STR,
    ),
    _spec(
        "controller event processed",
        "controller",
        "one event of the single-writer controller loop (not heartbeats): its wait in the "
        "queue and its processing time",
        event_type=_STR,
        queue_ms=_FLT,
        process_ms=_FLT,
    ),
    _spec(
        "leader election",
        "controller",
        "the controller chose a new leader for a partition (cause: offline, controlled "
        "shutdown, preferred, reassignment, unclean, new partition)",
        topic=_STR,
        partition=_INT,
        leader=_INT,
        previous_leader=_INT,
        leader_epoch=_INT,
        isr=_INTS,
        cause=_STR,
        unclean=_BOOL,
    ),
    _spec(
        "partition leadership applied",
        "broker",
        "a broker applied a leader or follower change (LeaderAndIsr or a metadata delta)",
        topic=_STR,
        partition=_INT,
        role_in_partition=_STR,
        leader=_INT,
        leader_epoch=_INT,
    ),
    _spec(
        "isr shrink",
        "broker",
        "a partition leader removed followers from its ISR",
        topic=_STR,
        partition=_INT,
        leader_epoch=_INT,
        old_isr=_INTS,
        new_isr=_INTS,
    ),
    _spec(
        "isr expand",
        "broker",
        "a partition leader added a caught-up follower to its ISR",
        topic=_STR,
        partition=_INT,
        leader_epoch=_INT,
        old_isr=_INTS,
        new_isr=_INTS,
    ),
)

LOG_EVENTS_BY_NAME: Mapping[str, EventSpec] = {spec.name: spec for spec in LOG_EVENTS}


@dataclass(frozen=True, slots=True)
class Source:
    """Who shipped a record."""

    role: str
    node_id: int | None
    host: str = ""
    pid: int = 0

    @property
    def key(self) -> str:
        return self.role if self.node_id is None else f"{self.role}-{self.node_id}"

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "node_id": self.node_id, "host": self.host, "pid": self.pid}


@dataclass(frozen=True, slots=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float | None


def json_number(value: float) -> float | None:
    """JSON has no NaN or infinities: they ship as null."""
    return value if math.isfinite(value) else None


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    ts_ms: int
    source: Source
    samples: Sequence[Sample]

    def to_json(self) -> dict[str, Any]:
        return {
            "v": SCHEMA_VERSION,
            "kind": "metrics",
            "ts_ms": self.ts_ms,
            "source": self.source.to_json(),
            "samples": [
                {"name": s.name, "labels": dict(s.labels), "value": s.value} for s in self.samples
            ],
        }


def log_record(event_dict: Mapping[str, Any], ts_ms: int) -> dict[str, Any]:
    """A structlog event dict as it ships to `__trioka_logs`."""
    return {**event_dict, "v": SCHEMA_VERSION, "kind": "log", "ts_ms": ts_ms}


# The shipper's local spool (deploy/telemetry/spool.py), which analytics/ may read too: a
# directory per process (default `<log.dirs[0]>/telemetry-spool`, a controller's
# `<metadata.log.dir>/telemetry-spool`) of segments `<20-digit number>.jsonl`, read in name
# order, one record per line: {"topic": "__trioka_logs", "key": "broker-1", "value": {...}}
# where value is the record as shipped. The shipper adds `seq` to every record it ships (per
# topic, from 0 in each process run: gaps are losses, repeats are duplicates).
SPOOL_DIR_NAME = "telemetry-spool"
SPOOL_SEGMENT_SUFFIX = ".jsonl"


__all__ = [
    "CHAOS_HISTORY_TOPIC",
    "COMMON_LOG_FIELDS",
    "LOGS_TOPIC",
    "LOG_EVENTS",
    "LOG_EVENTS_BY_NAME",
    "METRICS_TOPIC",
    "SCHEMA_VERSION",
    "SPOOL_DIR_NAME",
    "SPOOL_SEGMENT_SUFFIX",
    "TELEMETRY_TOPICS",
    "EventSpec",
    "FieldType",
    "MetricsSnapshot",
    "Sample",
    "Source",
    "json_number",
    "log_record",
]
