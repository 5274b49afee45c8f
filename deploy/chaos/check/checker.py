"""The chaos history checker: Jepsen's Kafka workload checks over a History.

Sent values must be unique in a history (the harness makes them so): that is how a record read
back is matched with the send that wrote it. Only ok completions count as reads.

- lost-write: an ok send whose value no poll returned, although reads of its partition
  reached past it (its acknowledged offset is below the highest offset read there).
- unseen: an ok send never read and not lost (the reads stopped before it). Always counted;
  an anomaly only when the history has final reads (polls by a "final-" process), which were
  meant to reach every partition's end.
- duplicate: a sent value read at more than one (partition, offset). Each copy counts once
  however many polls saw it: a re-read after a rebalance is no duplicate.
- inconsistent-offsets: two different values at one (partition, offset), by two reads or by
  an acknowledgement and a read.
- aborted-read: a value read whose send completed fail (known not to have happened).
- nonmonotonic-send, nonmonotonic-poll, poll-skip, commit-offset-backwards: see
  deploy.chaos.check.checker_order.
- unexpected: a value read that no send in the history wrote.

Sends that failed or are unknown (info, or never completed) may be missing; info ones may be
read. The whole check is a few passes over the history with dicts (no quadratic scans).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from deploy.chaos.check.anomalies import (
    ANOMALY_NAMES,
    AbortedRead,
    CommitBackwards,
    Duplicate,
    InconsistentOffset,
    LostWrite,
    NonmonotonicPoll,
    NonmonotonicSend,
    PollSkip,
    to_jsonable,
)
from deploy.chaos.check.checker_order import check_order
from deploy.chaos.check.history import (
    History,
    Op,
    OpKind,
    OpType,
    PolledRecord,
    SendValue,
    is_final,
)
from protocol.names import TopicPartition

Position = tuple[TopicPartition, int]

EXAMPLES = 5
"""How many examples of each anomaly summary() shows."""


@dataclass(slots=True)
class CheckResult:
    sent: int = 0
    acknowledged: int = 0
    read: int = 0
    """Distinct (partition, offset) positions read."""
    final_reads: bool = False
    """Whether the history has final reads: then unseen writes are an anomaly."""
    stats: dict[str, int] = field(default_factory=dict)
    lost: list[LostWrite] = field(default_factory=list)
    unseen: list[SendValue] = field(default_factory=list)
    """Ok sends never read, beyond what the reads reached (their acknowledged SendValue)."""
    duplicates: list[Duplicate] = field(default_factory=list)
    inconsistent_offsets: list[InconsistentOffset] = field(default_factory=list)
    aborted_reads: list[AbortedRead] = field(default_factory=list)
    nonmonotonic_sends: list[NonmonotonicSend] = field(default_factory=list)
    nonmonotonic_polls: list[NonmonotonicPoll] = field(default_factory=list)
    poll_skips: list[PollSkip] = field(default_factory=list)
    commits_backwards: list[CommitBackwards] = field(default_factory=list)
    unexpected: list[PolledRecord] = field(default_factory=list)

    @property
    def unread(self) -> list[SendValue]:
        """The issue-5 name of `unseen`."""
        return self.unseen

    def by_name(self) -> dict[str, list[Any]]:
        """Every anomaly list under its Jepsen name (unseen included even when no anomaly)."""
        return dict(
            zip(
                ANOMALY_NAMES,
                (
                    self.lost,
                    self.unseen,
                    self.duplicates,
                    self.inconsistent_offsets,
                    self.aborted_reads,
                    self.nonmonotonic_sends,
                    self.nonmonotonic_polls,
                    self.poll_skips,
                    self.commits_backwards,
                    self.unexpected,
                ),
                strict=True,
            )
        )

    def anomalies(self) -> dict[str, list[Any]]:
        """The anomalies found: names with a non-empty list that counts against validity."""
        return {
            name: found
            for name, found in self.by_name().items()
            if found and (name != "unseen" or self.final_reads)
        }

    @property
    def valid(self) -> bool:
        return not self.anomalies()

    def counts(self) -> dict[str, int]:
        return {name: len(found) for name, found in self.by_name().items()}

    def summary(self) -> str:
        """One line of counts, then the first few examples of each anomaly."""
        found = self.anomalies()
        counts = ", ".join(f"{n} {name}" for name, n in self.counts().items() if n)
        lines = [
            f"{'valid' if not found else 'INVALID'}: {self.sent} sent, {self.acknowledged} "
            f"acknowledged, {self.read} read" + (f"; {counts}" if counts else "; no anomalies")
        ]
        for name, examples in found.items():
            lines += [f"  {name} {_describe(e)}" for e in examples[:EXAMPLES]]
            if len(examples) > EXAMPLES:
                lines.append(f"  ... {len(examples) - EXAMPLES} more {name}")
        return "\n".join(lines)

    def to_json(self, examples: int = 20) -> dict[str, Any]:
        """The verdict: {"valid", "counts", "anomalies": {name: first examples}, "stats"}."""
        return {
            "valid": self.valid,
            "counts": self.counts(),
            "anomalies": {
                name: to_jsonable(found[:examples]) for name, found in self.anomalies().items()
            },
            "stats": {
                "sent": self.sent,
                "acknowledged": self.acknowledged,
                "read": self.read,
                "final_reads": self.final_reads,
                **self.stats,
            },
        }


def _describe(anomaly: Any) -> str:
    if isinstance(anomaly, Duplicate):
        return f"{anomaly.value!r} at {[f'{tp}@{o}' for tp, o in anomaly.copies]}"
    if isinstance(anomaly, LostWrite):
        return f"{anomaly.value!r} (acknowledged at {anomaly.tp} offset {anomaly.offset})"
    if isinstance(anomaly, SendValue):
        return f"{anomaly.value!r} (acknowledged at {anomaly.topic}-{anomaly.partition} offset {anomaly.offset})"
    return str(to_jsonable(anomaly))


def _sends(history: History) -> dict[bytes, tuple[SendValue, OpType | None, Op | None]]:
    """Sent value -> (the send, with its position when ok; completion type; completion)."""
    out: dict[bytes, tuple[SendValue, OpType | None, Op | None]] = {}
    for invoke, done in history.pairs():
        if invoke.kind is not OpKind.SEND:
            continue
        sent: SendValue = invoke.value
        if sent.value in out:
            raise ValueError(f"value {sent.value!r} is sent twice: the checker needs unique values")
        if done is None:
            out[sent.value] = (sent, None, None)
        else:
            out[sent.value] = (done.value if done.type is OpType.OK else sent, done.type, done)
    return out


def _reads(history: History) -> tuple[dict[Position, set[bytes | None]], bool]:
    """The values read at each position; whether the history has final reads."""
    values: dict[Position, set[bytes | None]] = defaultdict(set)
    final = False
    for op in history.completed(OpKind.POLL):
        final = final or is_final(op.process)
        for record in op.value:
            position = (record.tp, record.offset)
            values[position].add(record.value)
    return values, final


def _acked_at(sent: SendValue) -> Position | None:
    if sent.partition is None or sent.offset is None:
        return None
    return TopicPartition(sent.topic, sent.partition), sent.offset


def _known_offsets(
    read_values: dict[Position, set[bytes | None]], acked: dict[Position, list[bytes]]
) -> dict[TopicPartition, list[int]]:
    known: dict[TopicPartition, set[int]] = defaultdict(set)
    for tp, offset in (*read_values, *acked):
        known[tp].add(offset)
    return {tp: sorted(offsets) for tp, offsets in known.items()}


def _inconsistent(
    read_values: dict[Position, set[bytes | None]], acked: dict[Position, list[bytes]]
) -> list[InconsistentOffset]:
    """Positions where reads and acknowledgements name more than one value."""
    out = []
    for position in sorted({*read_values, *acked}):
        values = {*read_values.get(position, ()), *acked.get(position, ())}
        if len(values) > 1:
            out.append(InconsistentOffset(*position, tuple(sorted(values, key=lambda v: v or b""))))
    return out


def check(history: History) -> CheckResult:
    sends = _sends(history)
    read_values, final = _reads(history)
    result = CheckResult(sent=len(sends), read=len(read_values), final_reads=final)
    acked: dict[Position, list[bytes]] = defaultdict(list)
    for value, (sent, outcome, _) in sends.items():
        position = _acked_at(sent) if outcome is OpType.OK else None
        if position is not None:
            acked[position].append(value)
    result.inconsistent_offsets = _inconsistent(read_values, acked)
    where = _check_reads(result, sends, read_values)
    _check_acks(result, sends, read_values, where)
    order = check_order(history, _known_offsets(read_values, acked))
    result.nonmonotonic_sends = order.nonmonotonic_sends
    result.nonmonotonic_polls = order.nonmonotonic_polls
    result.poll_skips = order.poll_skips
    result.commits_backwards = order.commits_backwards
    result.stats = _stats(history, sends, where)
    return result


def _check_reads(
    result: CheckResult,
    sends: dict[bytes, tuple[SendValue, OpType | None, Op | None]],
    read_values: dict[Position, set[bytes | None]],
) -> dict[bytes, list[Position]]:
    """Duplicates, aborted and unexpected reads; returns value -> positions it was read at."""
    where: dict[bytes, list[Position]] = defaultdict(list)
    for position in sorted(read_values):
        values = read_values[position]
        for value in values:
            if value is None or value not in sends:
                tp, offset = position
                result.unexpected.append(PolledRecord(tp.topic, tp.partition, offset, value))
                continue
            where[value].append(position)
            _, outcome, done = sends[value]
            if outcome is OpType.FAIL and done is not None:
                result.aborted_reads.append(AbortedRead(value, *position, done.index))
    result.duplicates = [Duplicate(v, tuple(c)) for v, c in where.items() if len(c) > 1]
    return where


def _check_acks(
    result: CheckResult,
    sends: dict[bytes, tuple[SendValue, OpType | None, Op | None]],
    read_values: dict[Position, set[bytes | None]],
    where: dict[bytes, list[Position]],
) -> None:
    """Lost and unseen writes."""
    read_end: dict[TopicPartition, int] = {}
    for tp, offset in read_values:
        read_end[tp] = max(read_end.get(tp, 0), offset + 1)
    for value, (sent, outcome, _) in sends.items():
        if outcome is not OpType.OK:
            continue
        result.acknowledged += 1
        position = _acked_at(sent)
        if value in where:
            continue
        if position is not None and position[1] < read_end.get(position[0], 0):
            result.lost.append(LostWrite(value, *position))
        else:
            result.unseen.append(sent)


def _stats(
    history: History,
    sends: dict[bytes, tuple[SendValue, OpType | None, Op | None]],
    where: dict[bytes, list[Position]],
) -> dict[str, int]:
    outcomes = Counter(outcome for _, outcome, _ in sends.values())
    kinds = Counter(op.kind for op in history.ops if op.type is not OpType.INVOKE)
    return {
        "failed": outcomes[OpType.FAIL],
        "info": outcomes[OpType.INFO],
        "unfinished": outcomes[None],
        "info_read": sum(1 for v, (_, o, _) in sends.items() if o is OpType.INFO and v in where),
        "polls": kinds[OpKind.POLL],
        "commits": kinds[OpKind.COMMIT],
        "assigns": kinds[OpKind.ASSIGN],
        "seeks": kinds[OpKind.SEEK],
        "nemesis": kinds[OpKind.NEMESIS],
    }


__all__ = ["EXAMPLES", "CheckResult", "Duplicate", "LostWrite", "check"]
