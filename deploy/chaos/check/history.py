"""A Jepsen-style history of client operations against the cluster.

Every operation is recorded twice: an `invoke` when a client process starts it, and a
completion when it ends, `ok` (it happened), `fail` (it surely did not happen) or `info` (it
may or may not have happened: a timeout, a broken connection, a crash). Checkers read the
pairs. Operation kinds are Kafka's client calls: `send` (a producer's record and, when
acknowledged, its partition and offset), `poll` (the records a consumer got), `commit` (the
offsets a consumer committed) and `assign` (the partitions a group member was given); a
checker uses the kinds it knows and skips the others.

The value contract (what the runner records and the checker reads; docs/internals.md, "Chaos
history and checker (issue 6)"):

- send: invoke `SendValue(topic, value, key, partition=None or the chosen one)`; ok: the
  `SendValue` with `partition` and `offset` where it landed; fail: the client knows it was not
  written (the runner uses fail only for errors raised before any request left); info: unknown.
  Sent values are unique in a history.
- poll: ok `tuple[PolledRecord, ...]` (invoke: empty tuple). Final reads (from the beginning
  after healing) are polls by a process whose name starts with `FINAL_PREFIX` ("final-").
- commit: `CommitValue(group, offsets: Mapping[TopicPartition, int])` (a bare mapping, as older
  histories hold, means group ""; `commit_value` reads either).
- assign: ok tuple of TopicPartitions: the consumer's whole new assignment (a rebalance or a
  manual assign); it resets that consumer's poll state, as in Jepsen.
- seek: ok mapping TopicPartition -> offset: the consumer's next position on those partitions
  (a seek or a reset); it resets the poll state of those partitions only.
- nemesis: info ops from process "nemesis" with `NemesisValue(fault, targets, detail)` (what
  fault was done to which nodes, when); the checkers only count them.

Times are monotonic nanoseconds from the recorder's clock (`time.monotonic_ns` by default),
so the history orders operations of different processes. A History is appended to by one
thread (the harness's trio task); it is not locked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from protocol.names import TopicPartition


class OpType(StrEnum):
    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"
    INFO = "info"


class OpKind(StrEnum):
    SEND = "send"
    POLL = "poll"
    COMMIT = "commit"
    ASSIGN = "assign"
    SEEK = "seek"
    NEMESIS = "nemesis"


FINAL_PREFIX = "final-"
"""Polls by a process named "final-..." are the final reads, meant to reach every partition's
end: only then is an acknowledged write never read an anomaly (unseen)."""

NEMESIS_PROCESS = "nemesis"


def is_final(process: str) -> bool:
    return process.startswith(FINAL_PREFIX)


@dataclass(frozen=True, slots=True)
class SendValue:
    """A produced record: what was sent and, once acknowledged, where it landed."""

    topic: str
    value: bytes
    key: bytes | None = None
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True, slots=True)
class PolledRecord:
    """One record a consumer got from a poll."""

    topic: str
    partition: int
    offset: int
    value: bytes | None
    key: bytes | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class CommitValue:
    """Offsets a consumer committed for its group (next offset to read, as Kafka commits)."""

    group: str
    offsets: Mapping[TopicPartition, int]


def commit_value(value: Any) -> CommitValue:
    """A commit op's value as a CommitValue; a bare mapping (older histories) is group ""."""
    if isinstance(value, CommitValue):
        return value
    if isinstance(value, Mapping):
        return CommitValue("", value)
    raise ValueError(f"a commit's value is a CommitValue or a mapping, not {value!r}")


@dataclass(frozen=True, slots=True)
class NemesisValue:
    """A fault the nemesis did (or healed): e.g. fault "kill", targets ("broker-2",)."""

    fault: str
    targets: tuple[str, ...] = ()
    detail: Mapping[str, Any] = field(default_factory=dict)
    """JSON-able details (signal, partition halves, latency, ...)."""


@dataclass(frozen=True, slots=True)
class Op:
    index: int
    """Position in the history (0, 1, ...)."""
    time_ns: int
    process: str
    """Which client did it (e.g. "producer-1", "consumer-2"): one operation at a time each."""
    type: OpType
    kind: OpKind
    value: Any = None
    """SendValue for send; tuple[PolledRecord, ...] for poll (empty on invoke); CommitValue
    (or a bare mapping TopicPartition -> offset) for commit; a tuple of TopicPartitions for
    assign; a mapping TopicPartition -> offset for seek; NemesisValue for nemesis."""
    error: str | None = None
    """Why a fail or info completion failed (the client's error, for a person)."""
    invocation: int | None = None
    """For a completion: the index of its invoke."""
    ts_ms: int | None = None
    """Wall-clock epoch milliseconds of the same instant, so that analytics/ can lay the
    history beside the processes' logs and metrics (the checkers use `time_ns` only)."""


@dataclass(slots=True)
class History:
    ops: list[Op] = field(default_factory=list)
    clock_ns: Callable[[], int] = time.monotonic_ns
    wall_ms: Callable[[], int] = field(default=lambda: time.time_ns() // 1_000_000)

    def invoke(self, process: str, kind: OpKind, value: Any = None) -> Op:
        op = Op(
            len(self.ops),
            self.clock_ns(),
            process,
            OpType.INVOKE,
            kind,
            value,
            ts_ms=self.wall_ms(),
        )
        self.ops.append(op)
        return op

    def complete(
        self, invocation: Op, type: OpType, value: Any = None, error: str | None = None
    ) -> Op:
        """Record the end of `invocation`: OK, FAIL or INFO; `value` defaults to the invoke's."""
        if type is OpType.INVOKE:
            raise ValueError("a completion is ok, fail or info, not invoke")
        op = replace(
            invocation,
            index=len(self.ops),
            time_ns=self.clock_ns(),
            type=type,
            value=invocation.value if value is None else value,
            error=error,
            invocation=invocation.index,
            ts_ms=self.wall_ms(),
        )
        self.ops.append(op)
        return op

    def nemesis(self, value: NemesisValue, error: str | None = None) -> Op:
        """Record a fault done (or healed) now: one info op of process "nemesis"."""
        op = Op(
            len(self.ops),
            self.clock_ns(),
            NEMESIS_PROCESS,
            OpType.INFO,
            OpKind.NEMESIS,
            value,
            error,
            ts_ms=self.wall_ms(),
        )
        self.ops.append(op)
        return op

    def pairs(self) -> Iterator[tuple[Op, Op | None]]:
        """(invoke, completion) for every operation; None when it never completed (the
        process crashed or the run ended first: as good as `info`)."""
        completions: Mapping[int, Op] = {
            op.invocation: op for op in self.ops if op.invocation is not None
        }
        for op in self.ops:
            if op.type is OpType.INVOKE:
                yield op, completions.get(op.index)

    def completed(self, kind: OpKind, type: OpType = OpType.OK) -> Iterator[Op]:
        """The completions of one kind and type, in history order."""
        return (op for op in self.ops if op.kind is kind and op.type is type)


__all__ = [
    "FINAL_PREFIX",
    "NEMESIS_PROCESS",
    "CommitValue",
    "History",
    "NemesisValue",
    "Op",
    "OpKind",
    "OpType",
    "PolledRecord",
    "SendValue",
    "commit_value",
    "is_final",
]
