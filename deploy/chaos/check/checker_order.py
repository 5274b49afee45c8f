"""Order checks over one pass of a History: each producer's sends, each consumer's polls and
each group's commits must move forward.

- nonmonotonic-send: one process's successive ok sends to one partition must get increasing
  offsets (a process does one operation at a time).
- nonmonotonic-poll: one consumer process's polled offsets of a partition must increase, from
  record to record and poll to poll, until its assignment changes (an ok assign resets all its
  partitions, an ok seek the partitions it names).
- poll-skip: in the same span, two consecutive polled offsets of a partition must be adjacent
  in the partition's known offsets (every offset some poll read or some send was acknowledged
  at): skipping a known one is a skip. Offsets no one knows of are gaps, not skips (Jepsen
  orders values by offset and ignores gaps the same way).
- A poll that fails or is unknown (info) resets the process's poll state: it may have moved
  the consumer's position without telling us where.
- commit-offset-backwards: per group and partition, an ok commit below the previous ok commit.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from deploy.chaos.check.anomalies import (
    CommitBackwards,
    NonmonotonicPoll,
    NonmonotonicSend,
    PollSkip,
)
from deploy.chaos.check.history import History, Op, OpKind, OpType, commit_value
from protocol.names import TopicPartition


@dataclass(slots=True)
class OrderAnomalies:
    nonmonotonic_sends: list[NonmonotonicSend] = field(default_factory=list)
    nonmonotonic_polls: list[NonmonotonicPoll] = field(default_factory=list)
    poll_skips: list[PollSkip] = field(default_factory=list)
    commits_backwards: list[CommitBackwards] = field(default_factory=list)


@dataclass(slots=True)
class _Walk:
    known: Mapping[TopicPartition, Sequence[int]]
    """Each partition's known offsets, sorted."""
    out: OrderAnomalies = field(default_factory=OrderAnomalies)
    sent: dict[tuple[str, TopicPartition], int] = field(default_factory=dict)
    polled: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    committed: dict[tuple[str, TopicPartition], int] = field(default_factory=dict)

    def send(self, op: Op) -> None:
        v = op.value
        if v.partition is None or v.offset is None:
            return
        tp = TopicPartition(v.topic, v.partition)
        previous = self.sent.get((op.process, tp))
        if previous is not None and v.offset <= previous:
            self.out.nonmonotonic_sends.append(
                NonmonotonicSend(op.process, tp, previous, v.offset, op.index)
            )
        self.sent[(op.process, tp)] = v.offset

    def poll(self, op: Op) -> None:
        at = self.polled.setdefault(op.process, {})
        for record in op.value:
            tp, offset = record.tp, record.offset
            previous = at.get(tp)
            at[tp] = offset
            if previous is None:
                continue
            if offset <= previous:
                self.out.nonmonotonic_polls.append(
                    NonmonotonicPoll(op.process, tp, previous, offset, op.index)
                )
                continue
            skipped = self._between(tp, previous, offset)
            if skipped:
                self.out.poll_skips.append(
                    PollSkip(op.process, tp, previous, offset, skipped, op.index)
                )

    def _between(self, tp: TopicPartition, low: int, high: int) -> tuple[int, ...]:
        known = self.known.get(tp, ())
        return tuple(known[bisect.bisect_right(known, low) : bisect.bisect_left(known, high)])

    def commit(self, op: Op) -> None:
        commit = commit_value(op.value)
        for tp, offset in commit.offsets.items():
            previous = self.committed.get((commit.group, tp))
            if previous is not None and offset < previous:
                self.out.commits_backwards.append(
                    CommitBackwards(commit.group, tp, previous, offset, op.index)
                )
            self.committed[(commit.group, tp)] = offset

    def reposition(self, op: Op) -> None:
        if op.kind is OpKind.ASSIGN or op.kind is OpKind.POLL:
            self.polled.pop(op.process, None)
        else:
            at = self.polled.get(op.process, {})
            for tp in op.value:
                at.pop(tp, None)


def check_order(history: History, known: Mapping[TopicPartition, Sequence[int]]) -> OrderAnomalies:
    """The order anomalies of `history`, given each partition's known offsets (sorted)."""
    walk = _Walk(known)
    for op in history.ops:
        if op.type is OpType.INVOKE or op.invocation is None:
            continue
        if op.type is not OpType.OK:
            if op.kind is OpKind.POLL:
                walk.reposition(op)
            continue
        if op.kind is OpKind.SEND:
            walk.send(op)
        elif op.kind is OpKind.POLL:
            walk.poll(op)
        elif op.kind is OpKind.COMMIT:
            walk.commit(op)
        elif op.kind is OpKind.ASSIGN or op.kind is OpKind.SEEK:
            walk.reposition(op)
    return walk.out


__all__ = ["OrderAnomalies", "check_order"]
