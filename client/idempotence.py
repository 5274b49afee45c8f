"""The idempotent producer's state, without I/O (the idempotence half of Kafka's
TransactionManager; trioka has no transactions).

The producer holds one producer id and epoch (from InitProducerId) and, per partition, the next
sequence to give and the batches sent and not yet completed, in sequence order. A batch gets
its partition's next sequence when it is first drained and keeps its producer id, epoch and
sequence on every retry, so the leader can recognise a retry of a batch it already appended.

Ordering with up to five requests in flight per connection (Kafka's rules):
- sequences are given in queue order, and a retried batch goes back into its queue in
  sequence order (the accumulator keeps creation order, which is the same);
- a retried batch is drained only when it is the first unacknowledged batch of its partition,
  so retries go out one at a time, oldest first, and never overtake each other;
- an OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is not the next one the partition expects
  means an earlier batch failed on the way: retry it, it resolves once the earlier one lands.
  For the next expected batch it is a real gap (the broker lost state): fail the batch and
  reset the producer id, as Kafka's idempotent producer without epoch bumps (KIP-360 is not
  served: InitProducerId takes no current id), likewise UNKNOWN_PRODUCER_ID and
  INVALID_PRODUCER_EPOCH. A batch stamped with an older producer id is never re-stamped with
  the new one (it may already be in the log): a retry it was waiting for is sent as it was,
  a failed attempt after the reset fails it with OutOfOrderSequence (as Kafka's Sender).
- Simpler than Kafka: any sequenced batch that fails for good (refused, expired, retries
  spent) resets the producer id, where Kafka shifts the later sequences down after a batch
  the broker surely did not write. A few batches in flight behind it may fail with it.
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
        """Forget the id and every sequence: the sender asks InitProducerId again and the next
        batches start at sequence 0 under the new id."""
        self.producer = NO_PRODUCER
        self._partitions.clear()
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
        if batch.base_sequence == NO_SEQUENCE:
            return True
        if not self.is_current(batch):
            # Stamped under a dropped id: it goes out as it is (never re-stamped, so the leader
            # still sees it as what it was); the sender fails it if it is refused again.
            return True
        state = self._partitions.get(batch.tp)
        return state is None or not state.in_flight or state.in_flight[0] is batch

    def assign(self, batch: SequencedBatch) -> None:
        """Give a batch drained for the first time the producer id, epoch and its partition's
        next sequence; a batch that has them keeps them."""
        if batch.base_sequence != NO_SEQUENCE:
            return
        state = self._state(batch.tp)
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

    def is_next_sequence(self, batch: SequencedBatch) -> bool:
        """Whether the batch is the one its partition's leader expects next (the first after
        the last acknowledged)."""
        state = self._partitions.get(batch.tp)
        if state is None:
            return True
        expected = (
            increment_sequence(state.last_acked_sequence, 1)
            if (state.last_acked_sequence != NO_SEQUENCE)
            else 0
        )
        return batch.base_sequence == expected

    def acknowledged(self, batch: SequencedBatch) -> None:
        state = self._partitions.get(batch.tp)
        if state is None or not self.is_current(batch):
            return
        last = increment_sequence(batch.base_sequence, batch.record_count - 1)
        if state.last_acked_sequence == NO_SEQUENCE or _after(last, state.last_acked_sequence):
            state.last_acked_sequence = last
        self._remove(state, batch)

    def failed(self, batch: SequencedBatch) -> None:
        state = self._partitions.get(batch.tp)
        if state is not None and self.is_current(batch):
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
        return state.next_sequence if state else 0


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
