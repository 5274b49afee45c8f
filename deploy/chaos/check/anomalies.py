"""The anomalies the chaos checker reports, and their JSON form.

Names as Jepsen's Kafka workload spells them (`ANOMALY_NAMES`), plus "unexpected" (a value
read that no send wrote: Jepsen's histories cannot show one, ours could after a bug in the
harness or the log).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass
from typing import Any

from protocol.names import TopicPartition

ANOMALY_NAMES = (
    "lost-write",
    "unseen",
    "duplicate",
    "inconsistent-offsets",
    "aborted-read",
    "nonmonotonic-send",
    "nonmonotonic-poll",
    "poll-skip",
    "commit-offset-backwards",
    "unexpected",
)


@dataclass(frozen=True, slots=True)
class Duplicate:
    value: bytes
    copies: tuple[tuple[TopicPartition, int], ...]
    """Every (partition, offset) reads found the value at."""


@dataclass(frozen=True, slots=True)
class LostWrite:
    value: bytes
    tp: TopicPartition | None
    offset: int | None
    """Where the acknowledgement said it was written."""


@dataclass(frozen=True, slots=True)
class InconsistentOffset:
    tp: TopicPartition
    offset: int
    values: tuple[bytes | None, ...]
    """The different values reads and acknowledgements put at (tp, offset)."""


@dataclass(frozen=True, slots=True)
class AbortedRead:
    value: bytes
    tp: TopicPartition
    offset: int
    send_index: int
    """The history index of the failed send's completion."""


@dataclass(frozen=True, slots=True)
class NonmonotonicSend:
    process: str
    tp: TopicPartition
    previous: int
    offset: int
    index: int
    """The history index of the ok send that went backwards."""


@dataclass(frozen=True, slots=True)
class NonmonotonicPoll:
    process: str
    tp: TopicPartition
    previous: int
    offset: int
    index: int
    """The history index of the poll that went backwards (or re-read `previous`)."""


@dataclass(frozen=True, slots=True)
class PollSkip:
    process: str
    tp: TopicPartition
    previous: int
    offset: int
    skipped: tuple[int, ...]
    """Offsets known to hold a record (read or acknowledged) between previous and offset."""
    index: int


@dataclass(frozen=True, slots=True)
class CommitBackwards:
    group: str
    tp: TopicPartition
    previous: int
    offset: int
    index: int
    """The history index of the ok commit below the group's previous ok commit."""


def to_jsonable(obj: Any) -> Any:
    """JSON-able form of anomalies and history values: bytes as latin-1 strings (as history
    files), partitions as "topic-partition"."""
    if isinstance(obj, TopicPartition):
        return str(obj)
    if isinstance(obj, bytes):
        return obj.decode("latin-1")
    if is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, Mapping):
        return {str(to_jsonable(k)): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in obj]
    return obj


__all__ = [
    "ANOMALY_NAMES",
    "AbortedRead",
    "CommitBackwards",
    "Duplicate",
    "InconsistentOffset",
    "LostWrite",
    "NonmonotonicPoll",
    "NonmonotonicSend",
    "PollSkip",
    "to_jsonable",
]
