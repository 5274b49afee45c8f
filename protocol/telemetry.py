"""Telemetry records: what every process ships and what analytics/ reads (docs/telemetry.md).

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
- `__trioka_chaos_history`: the chaos runner's operations (deploy/chaos/check/history_files.py's JSON).

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
    """One catalogued log event: its exact `event` string, who emits it, and its fields.

    `fields` maps each field to its JSON type; every emitted event has at least these fields,
    with values of these types (`check_log_event`). `field_docs` says what each one means and
    `values` lists the only values a string field takes (cause, reason, ...)."""

    name: str
    emitter: str
    doc: str
    fields: Mapping[str, FieldType] = field(default_factory=dict)
    field_docs: Mapping[str, str] = field(default_factory=dict)
    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


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

CONTEXT_FIELDS: Mapping[str, tuple[FieldType, str]] = {
    "role": (
        FieldType.STRING,
        "the process kind (configure_logging): broker (ZK-mode, Raft-mode and standalone "
        "brokers), controller (a dedicated Raft controller), chaos (the chaos runner), cli",
    ),
    "node_id": (FieldType.INT, "node.id of the process; absent for the chaos runner and the CLI"),
    "process_roles": (
        FieldType.STRING,
        "a combined KRaft process (broker and its own controller): 'broker,controller'",
    ),
    "metadata_mode": (FieldType.STRING, "a broker's metadata.mode: zk, raft or standalone"),
    "correlation_id": (
        FieldType.INT,
        "while the broker or controller serves one request: the request's correlation id",
    ),
    "client_id": (FieldType.STRING, "while serving one request: the request's client id"),
    "api": (FieldType.STRING, "while serving one request: its API name (Produce, Fetch, ...)"),
    "topic": (FieldType.STRING, "the topic a partition-level event is about"),
    "partition": (FieldType.INT, "the partition a partition-level event is about"),
    "source_broker": (FieldType.INT, "in a replica fetcher: the leader it fetches from"),
}
"""The context processes bind (structlog.contextvars) and events carry: name -> (type, doc)."""

REQUEST_CONTEXT_KEYS = ("correlation_id", "client_id", "api")
"""Bound for the duration of one request only; a long-lived task started while serving a
request must not carry them (it would stamp them on everything it logs later)."""

ELECTION_CAUSES = (
    "offline",
    "controlled_shutdown",
    "preferred",
    "auto_rebalance",
    "reassignment",
    "unclean",
    "new_partition",
)
"""Why the controller elected a leader (Kafka's PartitionLeaderElectionStrategy and trigger):
its leader was gone or it had none (OfflinePartitionLeaderElectionStrategy, clean), its leader
is shutting down (ControlledShutdown...), an ElectLeaders request for the preferred replica
(AdminClientTriggered), the periodic preferred-replica rebalance (AutoTriggered), a reassignment
moved it off its leader (Reassign...), an out-of-sync replica was elected (unclean), or the
partition was created."""

BROKER_FAILURE_REASONS = (
    "znode_deleted",
    "bounced",
    "session_expired",
    "new_incarnation",
    "fence_requested",
    "process_dead",
)
"""How the active controller learnt that a broker failed. ZK mode: its /brokers/ids/<id> znode
went away (znode_deleted), or came back with another epoch before the controller saw it go
(bounced). Raft mode: no heartbeat within broker.session.timeout.ms (session_expired), a new
incarnation of it registered (new_incarnation: it restarted), or it asked to be fenced. Both
modes: the fast fencing found its process gone (process_dead: a connection it owned ended and
its listeners refused connections, controller.liveness)."""

ISR_CHANGE_ORIGINS = ("alter_partition", "controller")
"""Who changed a leader's ISR: its own AlterPartition proposal, committed (Kafka's
IsrShrinksPerSec / IsrExpandsPerSec count these), or the controller (a broker going away leaves
every ISR; a reassignment), seen in a LeaderAndIsr request or a metadata delta."""

PARTITION_ROLES = ("leader", "follower")


@dataclass(frozen=True, slots=True)
class _Field:
    type: FieldType
    doc: str
    values: tuple[str, ...] = ()


def _f(type_: FieldType, doc: str, values: tuple[str, ...] = ()) -> _Field:
    return _Field(type_, doc, values)


def _spec(name: str, emitter: str, doc: str, **fields: _Field) -> EventSpec:
    return EventSpec(
        name,
        emitter,
        doc,
        {k: f.type for k, f in fields.items()},
        {k: f.doc for k, f in fields.items()},
        {k: f.values for k, f in fields.items() if f.values},
    )


_STR, _INT, _FLT, _BOOL, _INTS = (
    FieldType.STRING,
    FieldType.INT,
    FieldType.FLOAT,
    FieldType.BOOL,
    FieldType.INT_LIST,
)

_TOPIC = _f(_STR, "topic name")
_PARTITION = _f(_INT, "partition index")
_EVENT_TYPE = _f(
    _STR,
    "the controller event, by its Kafka API or event name without 'Request' (BrokerChange, "
    "FenceStaleBrokers, BrokerRegistration, CreateTopics, AlterPartition, ElectLeaders, ...)",
)
_OLD_ISR = _f(_INTS, "the leader's committed ISR before the change")
_NEW_ISR = _f(_INTS, "its committed ISR after the change")
_ISR_ORIGIN = _f(_STR, "who changed the ISR (ISR_CHANGE_ORIGINS)", ISR_CHANGE_ORIGINS)
_ISR_LEADER_EPOCH = _f(_INT, "the leader epoch the ISR changed in")
_PARTITION_EPOCH = _f(_INT, "the partition epoch after the change")

QUIET_CONTROLLER_EVENTS = ("BrokerHeartbeat", "WriteNoOp")
"""Controller events not logged one by one: broker heartbeats and the idle no-op record come
several times a second and change nothing analytics reads."""


def _applied(name: str, what: str) -> EventSpec:
    """A broker's one event per applied change set (both metadata modes, the same fields)."""
    return _spec(
        name,
        "broker",
        f"a broker applied one change set to its partitions ({what}); logged once per change "
        "set, after the set's 'partition leadership applied' events, never per partition",
        leaders=_f(_INT, "partitions this broker was made leader of"),
        followers=_f(_INT, "partitions this broker was made follower of"),
        apply_ms=_f(
            _FLT,
            "from when this broker received the change set (Raft: its metadata records were "
            "read from the log, so a later step of a large delta counts the steps before it; "
            "ZK: the LeaderAndIsr request's handling began) to this event, milliseconds",
        ),
    )


# The events analytics/ depends on. Emitters log exactly these names with at least these fields.
LOG_EVENTS: tuple[EventSpec, ...] = (
    _spec(
        "broker failure detected",
        "controller",
        "the active controller learns that a broker is gone (ZK: its /brokers/ids znode went "
        "away; Raft: its heartbeat session expired or it was fenced); logged when the controller "
        "event that found it runs, before its elections. A broker that was in controlled "
        "shutdown leaving is not a failure and is not logged",
        broker_id=_f(_INT, "the failed broker"),
        broker_epoch=_f(_INT, "its broker epoch (registration) that ended"),
        reason=_f(_STR, "how it was detected (BROKER_FAILURE_REASONS)", BROKER_FAILURE_REASONS),
        event_type=_EVENT_TYPE,
        metadata_mode=_f(_STR, "the controller's metadata mode: zk or raft"),
    ),
    _spec(
        "controller event processed",
        "controller",
        "one event of the single-writer controller loop (not heartbeats nor idle no-ops: "
        "QUIET_CONTROLLER_EVENTS), logged when it is answered: its wait in the queue and its "
        "processing time (run, append, commit: Kafka's EventQueueTimeMs and the event's "
        "rate-and-time timer)",
        event_type=_EVENT_TYPE,
        queue_ms=_f(_FLT, "from its submission to the start of its run, milliseconds"),
        process_ms=_f(
            _FLT,
            "from the start of its run to its answer (its records committed), milliseconds; "
            "0 for an event dropped before it ran",
        ),
        records=_f(_INT, "metadata records it wrote"),
        error=_f(_STR, "the error code of its answer by Kafka name (NONE on success)"),
    ),
    _spec(
        "leader election",
        "controller",
        "the controller chose a new leader for a partition (cause: ELECTION_CAUSES), logged "
        "once the change is committed, one event per partition",
        topic=_TOPIC,
        partition=_PARTITION,
        leader=_f(_INT, "the new leader"),
        previous_leader=_f(_INT, "the leader before (-1: none)"),
        leader_epoch=_f(_INT, "the new leader epoch"),
        isr=_f(_INTS, "the ISR written with the new leader"),
        cause=_f(_STR, "why (ELECTION_CAUSES)", ELECTION_CAUSES),
        unclean=_f(_BOOL, "the new leader was not in the ISR (unclean leader election)"),
        event_type=_EVENT_TYPE,
    ),
    _spec(
        "partition leadership applied",
        "broker",
        "a broker applied a new leader epoch of a partition it hosts, as leader or follower "
        "(a LeaderAndIsr request in ZK mode, a metadata delta in Raft and standalone mode), "
        "including its creation; ISR-only changes are 'isr shrink' / 'isr expand'",
        topic=_TOPIC,
        partition=_PARTITION,
        role_in_partition=_f(_STR, "this broker's role in the partition now", PARTITION_ROLES),
        leader=_f(_INT, "the partition's leader"),
        leader_epoch=_f(_INT, "the leader epoch applied"),
        previous_leader=_f(_INT, "the leader this broker knew before (-1: none or new)"),
        isr=_f(_INTS, "the ISR applied"),
    ),
    _applied("applied metadata changes", "Raft mode, one step of a metadata delta"),
    _applied("applied LeaderAndIsr", "ZK mode, one LeaderAndIsr request"),
    _spec(
        "isr shrink",
        "broker",
        "a partition leader's committed ISR lost members (Kafka: 'Shrinking ISR from ... to "
        "...'), by its own AlterPartition or by the controller",
        topic=_TOPIC,
        partition=_PARTITION,
        leader_epoch=_ISR_LEADER_EPOCH,
        old_isr=_OLD_ISR,
        new_isr=_NEW_ISR,
        origin=_ISR_ORIGIN,
        partition_epoch=_PARTITION_EPOCH,
    ),
    _spec(
        "isr expand",
        "broker",
        "a partition leader's committed ISR gained a caught-up follower (Kafka: 'Expanding ISR "
        "from ... to ...'), by its own AlterPartition or by the controller",
        topic=_TOPIC,
        partition=_PARTITION,
        leader_epoch=_ISR_LEADER_EPOCH,
        old_isr=_OLD_ISR,
        new_isr=_NEW_ISR,
        origin=_ISR_ORIGIN,
        partition_epoch=_PARTITION_EPOCH,
    ),
)

LOG_EVENTS_BY_NAME: Mapping[str, EventSpec] = {spec.name: spec for spec in LOG_EVENTS}


def _has_type(value: Any, type_: FieldType) -> bool:
    match type_:
        case FieldType.STRING:
            return isinstance(value, str)
        case FieldType.INT:
            return isinstance(value, int) and not isinstance(value, bool)
        case FieldType.FLOAT:
            return isinstance(value, int | float) and not isinstance(value, bool)
        case FieldType.BOOL:
            return isinstance(value, bool)
        case FieldType.INT_LIST:
            return isinstance(value, list | tuple) and all(
                isinstance(v, int) and not isinstance(v, bool) for v in value
            )


def check_log_event(event: Mapping[str, Any]) -> list[str]:
    """What is wrong with a catalogued event (missing fields, wrong types, values outside the
    allowed ones), as sentences; [] when nothing is, or when the event is not catalogued."""
    spec = LOG_EVENTS_BY_NAME.get(str(event.get("event")))
    if spec is None:
        return []
    problems = []
    for name, type_ in spec.fields.items():
        if name not in event:
            problems.append(f"{spec.name!r}: field {name!r} is missing")
        elif not _has_type(event[name], type_):
            problems.append(
                f"{spec.name!r}: field {name!r} should be {type_.value}, "
                f"got {event[name]!r} ({type(event[name]).__name__})"
            )
        elif name in spec.values and event[name] not in spec.values[name]:
            problems.append(
                f"{spec.name!r}: field {name!r} is {event[name]!r}, not one of "
                f"{list(spec.values[name])}"
            )
    return problems


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
    "BROKER_FAILURE_REASONS",
    "CHAOS_HISTORY_TOPIC",
    "COMMON_LOG_FIELDS",
    "CONTEXT_FIELDS",
    "ELECTION_CAUSES",
    "ISR_CHANGE_ORIGINS",
    "LOGS_TOPIC",
    "LOG_EVENTS",
    "LOG_EVENTS_BY_NAME",
    "METRICS_TOPIC",
    "PARTITION_ROLES",
    "QUIET_CONTROLLER_EVENTS",
    "REQUEST_CONTEXT_KEYS",
    "SCHEMA_VERSION",
    "SPOOL_DIR_NAME",
    "SPOOL_SEGMENT_SUFFIX",
    "TELEMETRY_TOPICS",
    "EventSpec",
    "FieldType",
    "MetricsSnapshot",
    "Sample",
    "Source",
    "check_log_event",
    "json_number",
    "log_record",
]
