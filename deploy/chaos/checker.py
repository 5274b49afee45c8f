"""Checkers over a chaos History (Jepsen's Kafka workload checks, those trioka needs so far).

Sent values must be unique in a history (the harness makes them so): that is how a record read
back is matched with the send that wrote it.

- duplicates: a sent value read at more than one (partition, offset). Each copy in the log is
  counted once however many polls saw it, so a consumer re-reading after a rebalance or a
  restart is not a duplicate write.
- lost writes: a send acknowledged (ok) whose value no poll ever returned, although the
  reads reached past where it was acknowledged (its offset is below the highest offset read
  on its partition + 1). Sends that failed or are unknown (info) may be missing; an
  acknowledged write the reads did not reach is "unread", not lost.
- unexpected: a value read that no send in the history wrote.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from deploy.chaos.history import History, OpKind, OpType, PolledRecord, SendValue
from protocol.names import TopicPartition


@dataclass(frozen=True, slots=True)
class Duplicate:
    value: bytes
    copies: tuple[tuple[TopicPartition, int], ...]
    """Every (partition, offset) holding the value."""


@dataclass(frozen=True, slots=True)
class LostWrite:
    value: bytes
    tp: TopicPartition | None
    offset: int | None
    """Where the acknowledgement said it was written."""


@dataclass(slots=True)
class CheckResult:
    sent: int = 0
    acknowledged: int = 0
    read: int = 0
    """Distinct (partition, offset) positions read."""
    duplicates: list[Duplicate] = field(default_factory=list)
    lost: list[LostWrite] = field(default_factory=list)
    unread: list[SendValue] = field(default_factory=list)
    """Acknowledged sends past the end of what was read (no verdict)."""
    unexpected: list[PolledRecord] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return not (self.duplicates or self.lost or self.unexpected)

    def summary(self) -> str:
        return (
            f"{'valid' if self.valid else 'INVALID'}: {self.sent} sent, {self.acknowledged} "
            f"acknowledged, {self.read} read; {len(self.duplicates)} duplicated, "
            f"{len(self.lost)} lost, {len(self.unexpected)} unexpected, {len(self.unread)} unread"
            + "".join(f"\n  duplicate {d.value!r} at {list(d.copies)}" for d in self.duplicates[:5])
            + "".join(
                f"\n  lost {w.value!r} (acknowledged at {w.tp} offset {w.offset})"
                for w in self.lost[:5]
            )
        )


def _sends(history: History) -> dict[bytes, tuple[SendValue, OpType | None]]:
    """Sent value -> (its send, with the acknowledged position when ok; completion type)."""
    out: dict[bytes, tuple[SendValue, OpType | None]] = {}
    for invoke, done in history.pairs():
        if invoke.kind is not OpKind.SEND:
            continue
        sent: SendValue = invoke.value
        if sent.value in out:
            raise ValueError(f"value {sent.value!r} is sent twice: the checker needs unique values")
        if done is None:
            out[sent.value] = (sent, None)
        else:
            out[sent.value] = (done.value if done.type is OpType.OK else sent, done.type)
    return out


def _reads(history: History) -> dict[tuple[TopicPartition, int], PolledRecord]:
    """Every distinct (partition, offset) some poll returned."""
    out: dict[tuple[TopicPartition, int], PolledRecord] = {}
    for op in history.completed(OpKind.POLL):
        for record in op.value:
            out.setdefault((record.tp, record.offset), record)
    return out


def check(history: History) -> CheckResult:
    sends = _sends(history)
    reads = _reads(history)
    result = CheckResult(sent=len(sends), read=len(reads))
    where: dict[bytes, list[tuple[TopicPartition, int]]] = defaultdict(list)
    read_end: dict[TopicPartition, int] = {}
    for (tp, offset), record in sorted(reads.items()):
        read_end[tp] = max(read_end.get(tp, 0), offset + 1)
        if record.value is None or record.value not in sends:
            result.unexpected.append(record)
            continue
        where[record.value].append((tp, offset))
    result.duplicates = [Duplicate(v, tuple(c)) for v, c in where.items() if len(c) > 1]
    for value, (sent, outcome) in sends.items():
        if outcome is not OpType.OK:
            continue
        result.acknowledged += 1
        if value in where:
            continue
        tp = None if sent.partition is None else TopicPartition(sent.topic, sent.partition)
        reached = tp is not None and sent.offset is not None and sent.offset < read_end.get(tp, 0)
        if reached:
            result.lost.append(LostWrite(value, tp, sent.offset))
        else:
            result.unread.append(sent)
    return result


__all__ = ["CheckResult", "Duplicate", "LostWrite", "check"]
