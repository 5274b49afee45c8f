"""A History as JSON Lines, for history files and for shipping a history to a topic.

One op per line: {"index", "time_ns", "process", "type", "kind", "value", "error",
"invocation", "ts_ms"} (ts_ms: wall-clock epoch ms, absent from older histories). Bytes (record values and keys) are latin-1 strings: every byte maps to one code
point, so any bytes round-trip and the harness's ASCII values stay readable. Values by kind:

- send: {"topic", "value", "key", "partition", "offset"}
- poll: [[topic, partition, offset, value, key], ...]
- commit: {"group", "offsets": [[topic, partition, offset], ...]} (a bare mapping is written as
  group "" and reads back as a CommitValue)
- assign: [[topic, partition], ...]
- seek: [[topic, partition, offset], ...]
- nemesis: {"fault", "targets": [...], "detail": {...}} (detail must be JSON-able)

The functions here are the package's only I/O: plain file reading and writing by path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from deploy.chaos.check.history import (
    CommitValue,
    History,
    NemesisValue,
    Op,
    OpKind,
    OpType,
    PolledRecord,
    SendValue,
    commit_value,
)
from protocol.names import TopicPartition


def _b(data: bytes | None) -> str | None:
    return None if data is None else data.decode("latin-1")


def _unb(text: str | None) -> bytes | None:
    return None if text is None else text.encode("latin-1")


def _send_out(v: SendValue) -> dict[str, Any]:
    return {
        "topic": v.topic,
        "value": _b(v.value),
        "key": _b(v.key),
        "partition": v.partition,
        "offset": v.offset,
    }


def _send_in(j: Mapping[str, Any]) -> SendValue:
    value = _unb(j["value"])
    if value is None:
        raise ValueError("a send's value is null")
    return SendValue(j["topic"], value, _unb(j.get("key")), j.get("partition"), j.get("offset"))


def _poll_out(v: Iterable[PolledRecord]) -> list[list[Any]]:
    return [[r.topic, r.partition, r.offset, _b(r.value), _b(r.key)] for r in v]


def _poll_in(j: Iterable[list[Any]]) -> tuple[PolledRecord, ...]:
    return tuple(PolledRecord(t, p, o, _unb(v), _unb(k)) for t, p, o, v, k in j)


def _offsets_out(offsets: Mapping[TopicPartition, int]) -> list[list[Any]]:
    return [[tp.topic, tp.partition, offset] for tp, offset in offsets.items()]


def _offsets_in(j: Iterable[list[Any]]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, p): o for t, p, o in j}


def _commit_out(v: Any) -> dict[str, Any]:
    commit = commit_value(v)
    return {"group": commit.group, "offsets": _offsets_out(commit.offsets)}


def _commit_in(j: Mapping[str, Any]) -> CommitValue:
    return CommitValue(j["group"], _offsets_in(j["offsets"]))


def _nemesis_out(v: NemesisValue) -> dict[str, Any]:
    return {"fault": v.fault, "targets": list(v.targets), "detail": dict(v.detail)}


def _nemesis_in(j: Mapping[str, Any]) -> NemesisValue:
    return NemesisValue(j["fault"], tuple(j.get("targets", ())), dict(j.get("detail", {})))


_CODECS: dict[OpKind, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    OpKind.SEND: (_send_out, _send_in),
    OpKind.POLL: (_poll_out, _poll_in),
    OpKind.COMMIT: (_commit_out, _commit_in),
    OpKind.ASSIGN: (
        lambda v: [[tp.topic, tp.partition] for tp in v],
        lambda j: tuple(TopicPartition(t, p) for t, p in j),
    ),
    OpKind.SEEK: (_offsets_out, _offsets_in),
    OpKind.NEMESIS: (_nemesis_out, _nemesis_in),
}


def op_to_json(op: Op) -> dict[str, Any]:
    encode = _CODECS[op.kind][0]
    return {
        "index": op.index,
        "time_ns": op.time_ns,
        "process": op.process,
        "type": op.type.value,
        "kind": op.kind.value,
        "value": None if op.value is None else encode(op.value),
        "error": op.error,
        "invocation": op.invocation,
        **({} if op.ts_ms is None else {"ts_ms": op.ts_ms}),
    }


def op_from_json(j: Mapping[str, Any]) -> Op:
    """An Op from its JSON form; KeyError, ValueError or TypeError when it is malformed."""
    kind = OpKind(j["kind"])
    value = j.get("value")
    return Op(
        index=int(j["index"]),
        time_ns=int(j["time_ns"]),
        process=str(j["process"]),
        type=OpType(j["type"]),
        kind=kind,
        value=None if value is None else _CODECS[kind][1](value),
        error=j.get("error"),
        invocation=j.get("invocation"),
        ts_ms=None if j.get("ts_ms") is None else int(j["ts_ms"]),
    )


def op_line(op: Op) -> str:
    return json.dumps(op_to_json(op), separators=(",", ":"))


def write_history(history: History, path: str | Path) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for op in history.ops:
            out.write(op_line(op) + "\n")


def read_history(path: str | Path) -> History:
    """The History in a JSON Lines file; ValueError naming the file and line when one is bad."""
    ops: list[Op] = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                op = op_from_json(json.loads(line))
            except (KeyError, ValueError, TypeError) as e:
                raise ValueError(f"{path}:{number}: not a history op ({e!r})") from e
            if op.index != len(ops):
                raise ValueError(f"{path}:{number}: op index {op.index}, expected {len(ops)}")
            ops.append(op)
    return History(ops=ops)


def history_records(history: History) -> Iterator[tuple[bytes, bytes]]:
    """(key, value) per op for an analytics topic: the key is the process name (one process's
    ops stay in order in one partition), the value the op's JSON line."""
    for op in history.ops:
        yield op.process.encode(), op_line(op).encode()


__all__ = [
    "history_records",
    "op_from_json",
    "op_line",
    "op_to_json",
    "read_history",
    "write_history",
]
