"""The idempotent producer's state, without I/O (the idempotence half of Kafka's
TransactionManager; trioka has no transactions).

The producer holds one producer id and epoch (from InitProducerId) and, per partition, the id
and epoch its sequences run under, the next sequence to give and the batches sent and not yet
completed, in sequence order. A batch gets its partition's next sequence when it is first
drained and keeps its producer id, epoch and sequence on every retry, so the leader can
recognise a retry of a batch it already appended.

Ordering with up to five requests in flight per connection (Kafka's rules):
- sequences are given in queue order, and a retried batch goes back into its queue in
  sequence order (the accumulator keeps creation order, which is the same);
- a retried batch is drained only when it is the first unacknowledged batch of its partition,
  so retries go out one at a time, oldest first, and never overtake each other;
- an OUT_OF_ORDER_SEQUENCE_NUMBER for a batch while an earlier batch of its partition is still
  unresolved (in flight, or waiting for its retry) means that earlier one failed on the way:
  retry it, it resolves once the earlier one lands. With nothing unresolved before it, it is a
  real gap (the broker lost state, or an earlier batch failed for good): the batch fails (the
  broker refused it: it is not written) and, under the current id, the producer id is reset,
  as Kafka's idempotent producer without epoch bumps (KIP-360 is not served: InitProducerId
  takes no current id); likewise UNKNOWN_PRODUCER_ID and INVALID_PRODUCER_EPOCH.
- A reset keeps, as Kafka's per-partition producer id and epoch (`hasStaleProducerIdAndEpoch`),
  the partitions that still have batches in flight under the dropped id: those batches are
  never re-stamped (they may be in the log already) and go on being retried as they were,
  until they are answered or delivery.timeout.ms expires them, so a batch whose outcome is
  unknown is reported as written or as a timeout, never as OUT_OF_ORDER_SEQUENCE_NUMBER;
  the partition's new batches wait until they are resolved and then start at sequence 0
  under the new id (a new batch overtaking them could be written first).
- Simpler than Kafka: any sequenced batch that fails for good under the current id (refused,
  expired, retries spent) resets the producer id, where Kafka bumps the epoch of that
  partition once its in-flight batches are resolved, and shifts the later sequences down
  after a batch the broker surely did not write.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from protocol.names import TopicPartition
from protocol.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE

SEQUENCE_MAX = 0x7FFFFFFF
"""Sequences are int32 and wrap to 0 after this (as Kafka's DefaultRecordBatch)."""


def increment_sequence(sequence: int, count: int) -> int:
    return (sequence + count) & SEQUENCE_MAX


class SequencedBatch(Protocol):
    """What the manager needs of a batch (client.accumulator.ProducerBatch has it)."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    base_sequence: int

    @property
    def record_count(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH

    @property
    def is_valid(self) -> bool:
        return self.producer_id >= 0


NO_PRODUCER = ProducerIdAndEpoch()


@dataclass(slots=True)
class PartitionSequences:
    producer: ProducerIdAndEpoch = NO_PRODUCER
    """The producer id and epoch this partition's sequences run under: the producer's own, or
    (after a reset, while `in_flight` holds batches stamped with it) the dropped one."""
    next_sequence: int = 0
    last_acked_sequence: int = NO_SEQUENCE
    in_flight: list[SequencedBatch] = field(default_factory=list)
    """Batches given a sequence and not completed (sent, or waiting for a retry), by sequence."""


class IdempotenceManager:
    """Producer id, epoch and per-partition sequences of one idempotent producer."""

    def __init__(self) -> None:
        self.producer = NO_PRODUCER
        self._partitions: dict[TopicPartition, PartitionSequences] = {}
        self.resets = 0
        """How many times the producer id was dropped after a sequence error (for tests/logs)."""

    @property
    def has_producer_id(self) -> bool:
        return self.producer.is_valid

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        self.producer = ProducerIdAndEpoch(producer_id, epoch)

    def reset_producer_id(self) -> None:
        """Forget the id: the sender asks InitProducerId again and the next batches start at
        sequence 0 under the new id. A partition with batches in flight under the dropped id
        keeps its sequences until they are resolved (retried as they were, never re-stamped);
        its new batches wait for that."""
        self.producer = NO_PRODUCER
        self._partitions = {tp: state for tp, state in self._partitions.items() if state.in_flight}
        self.resets += 1

    def _state(self, tp: TopicPartition) -> PartitionSequences:
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = PartitionSequences()
        return state

    # -- drain ---------------------------------------------------------------------------------

    def may_drain(self, batch: SequencedBatch) -> bool:
        """Whether the batch at the head of its queue may be sent now."""
        if not self.has_producer_id:
            return False
        state = self._partitions.get(batch.tp)
        if batch.base_sequence == NO_SEQUENCE:
            # A new batch waits while its partition still has batches in flight under a dropped
            # id (Kafka's RecordAccumulator.shouldStopDrainBatchesForPartition).
            return state is None or not state.in_flight or state.producer == self.producer
        # A retry (under the current id or a dropped one: it goes out as it was, so the leader
        # still sees it as what it was) goes when it is its partition's oldest unresolved batch.
        return state is None or not state.in_flight or state.in_flight[0] is batch

    def assign(self, batch: SequencedBatch) -> None:
        """Give a batch drained for the first time the producer id, epoch and its partition's
        next sequence; a batch that has them keeps them."""
        if batch.base_sequence != NO_SEQUENCE:
            return
        state = self._state(batch.tp)
        if state.producer != self.producer:
            # The partition's batches under a dropped id are all resolved (may_drain): its
            # sequences start over under the current id.
            state.producer = self.producer
            state.next_sequence = 0
            state.last_acked_sequence = NO_SEQUENCE
            state.in_flight.clear()
        batch.producer_id = self.producer.producer_id
        batch.producer_epoch = self.producer.epoch
        batch.base_sequence = state.next_sequence
        state.next_sequence = increment_sequence(state.next_sequence, batch.record_count)
        state.in_flight.append(batch)

    def is_current(self, batch: SequencedBatch) -> bool:
        return (batch.producer_id, batch.producer_epoch) == (
            self.producer.producer_id,
            self.producer.epoch,
        )

    # -- completion ----------------------------------------------------------------------------

    def _owner(self, batch: SequencedBatch) -> PartitionSequences | None:
        """The partition's sequences the batch belongs to (same producer id and epoch)."""
        state = self._partitions.get(batch.tp)
        if state is None or (batch.producer_id, batch.producer_epoch) != (
            state.producer.producer_id,
            state.producer.epoch,
        ):
            return None
        return state

    def is_next_sequence(self, batch: SequencedBatch) -> bool:
        """Whether the batch is the one its partition's leader expects next (the first after
        the last acknowledged)."""
        state = self._owner(batch)
        if state is None:
            return True
        expected = (
            increment_sequence(state.last_acked_sequence, 1)
            if (state.last_acked_sequence != NO_SEQUENCE)
            else 0
        )
        return batch.base_sequence == expected

    def has_unresolved_before(self, batch: SequencedBatch) -> bool:
        """Whether an earlier batch of the same partition and producer id is still unresolved
        (in flight or waiting for its retry): an OUT_OF_ORDER_SEQUENCE_NUMBER answer to this
        batch may then be that earlier batch's doing."""
        state = self._owner(batch)
        return state is not None and bool(state.in_flight) and state.in_flight[0] is not batch

    def acknowledged(self, batch: SequencedBatch) -> None:
        state = self._owner(batch)
        if state is None:
            return
        last = increment_sequence(batch.base_sequence, batch.record_count - 1)
        if state.last_acked_sequence == NO_SEQUENCE or _after(last, state.last_acked_sequence):
            state.last_acked_sequence = last
        self._remove(state, batch)

    def failed(self, batch: SequencedBatch) -> None:
        state = self._owner(batch)
        if state is not None:
            self._remove(state, batch)

    @staticmethod
    def _remove(state: PartitionSequences, batch: SequencedBatch) -> None:
        for i, b in enumerate(state.in_flight):
            if b is batch:
                del state.in_flight[i]
                return

    def in_flight(self, tp: TopicPartition) -> list[SequencedBatch]:
        state = self._partitions.get(tp)
        return list(state.in_flight) if state else []

    def next_sequence(self, tp: TopicPartition) -> int:
        state = self._partitions.get(tp)
        return state.next_sequence if state and state.producer == self.producer else 0

    def stale_partitions(self) -> list[TopicPartition]:
        """Partitions whose in-flight batches run under a dropped producer id."""
        return [
            tp
            for tp, state in self._partitions.items()
            if state.in_flight and state.producer != self.producer
        ]


def _after(a: int, b: int) -> bool:
    """Whether sequence a comes after b, allowing for one wrap-around."""
    return 0 < ((a - b) & SEQUENCE_MAX) < SEQUENCE_MAX // 2


__all__ = [
    "NO_PRODUCER",
    "SEQUENCE_MAX",
    "IdempotenceManager",
    "PartitionSequences",
    "ProducerIdAndEpoch",
    "SequencedBatch",
    "increment_sequence",
]
