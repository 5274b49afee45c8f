"""Consumer positions and their validation after a leader change (KIP-320); pure, no I/O.

Kafka's SubscriptionState.TopicPartitionState and FetchPosition, reduced to what trioka's
consumer uses. A position is an offset plus the leader epoch of the batch the last consumed
record came from (`offset_epoch`, -1 when unknown) and the leader (broker id and leader epoch)
the consumer fetches it from. When metadata names another leader or leader epoch, a position
with an epoch waits for validation: the consumer asks the new leader with OffsetForLeaderEpoch
for the end offset of `offset_epoch` in its log before it fetches again. An end offset below the
position means the log was truncated under the consumer (an unclean election): with
auto.offset.reset earliest/latest it goes back to that first offset known to diverge (or, when
the leader cannot say, resets by the policy); with none the poll raises LogTruncationError.

The consumer driver (client.consumer) owns the I/O: it calls `maybe_validate` with the leader
it sees in metadata, sends OffsetForLeaderEpoch for `fetch_position()` and hands the answer to
`complete_validation`. The record hot path only ever touches `position` and `offset_epoch`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from client.errors import DivergentOffset, LogTruncationError
from client.metadata import ClusterMetadata
from protocol.errors import KafkaError
from protocol.names import TopicPartition

NO_EPOCH = -1
"""Kafka's RecordBatch.NO_PARTITION_LEADER_EPOCH / OffsetsForLeaderEpoch UNDEFINED_EPOCH."""
UNDEFINED_OFFSET = -1
"""OffsetsForLeaderEpoch's UNDEFINED_EPOCH_OFFSET: the leader cannot place the epoch."""


class LeaderAndEpoch(NamedTuple):
    """Kafka's Metadata.LeaderAndEpoch: the leader's broker id (None: unknown) and its leader
    epoch (-1: unknown)."""

    leader: int | None
    epoch: int = NO_EPOCH


NO_LEADER = LeaderAndEpoch(None, NO_EPOCH)


class FetchPosition(NamedTuple):
    """A position as sent in an OffsetForLeaderEpoch request; the answer applies only if the
    position is still this one when it arrives."""

    offset: int
    offset_epoch: int
    current_leader: LeaderAndEpoch


class EpochEndOffset(NamedTuple):
    """An OffsetForLeaderEpoch answer: the largest epoch <= the one asked for in the leader's
    log and that epoch's end offset (-1/-1 when the leader cannot place it)."""

    leader_epoch: int
    end_offset: int


class LogTruncation(NamedTuple):
    """Kafka's SubscriptionState.LogTruncation: truncation found with auto.offset.reset=none."""

    tp: TopicPartition
    position: FetchPosition
    divergent: DivergentOffset | None

    def __str__(self) -> str:
        where = (
            f"the leader's log diverges at offset {self.divergent.offset} "
            f"(end of leader epoch {self.divergent.leader_epoch})"
            if self.divergent is not None
            else "the leader has no end offset for that epoch"
        )
        return (
            f"{self.tp}: fetch offset {self.position.offset} "
            f"(leader epoch {self.position.offset_epoch}); {where}"
        )


class Validation(enum.Enum):
    """What `complete_validation` did."""

    SKIPPED = "skipped"
    """Not awaiting validation, or the position moved since the request (a seek): no change."""
    VALID = "valid"
    """The leader's log reaches the position: fetching resumes from it."""
    DIVERGED = "diverged"
    """Truncated; the position moved back to the first offset known to diverge."""
    RESET = "reset"
    """Truncated where the leader cannot say; the position is reset by auto.offset.reset."""
    TRUNCATED = "truncated"
    """Truncated with auto.offset.reset=none: a LogTruncation for the caller to raise."""


@dataclass(slots=True)
class PartitionState:
    """The consumer's state of one assigned partition (Kafka's TopicPartitionState).

    `position is None` is Kafka's INITIALIZING/AWAIT_RESET (`reset` says which strategy was
    asked for); `awaiting_validation` is AWAIT_VALIDATION; otherwise the partition is FETCHING.
    """

    position: int | None = None
    offset_epoch: int = NO_EPOCH
    """Leader epoch of the batch of the last consumed record (-1: unknown, no validation)."""
    current_leader: LeaderAndEpoch = NO_LEADER
    """The leader (and its epoch) this position was last validated against or fetched from;
    Fetch and OffsetForLeaderEpoch send this epoch as current_leader_epoch."""
    awaiting_validation: bool = False
    next_validation_ms: float = 0.0
    """No OffsetForLeaderEpoch before this time (one in flight, or a retry backoff)."""
    reset: str | None = None
    """Pending reset strategy (earliest/latest) set by seek_to_* or OFFSET_OUT_OF_RANGE."""
    high_watermark: int = -1
    log_start_offset: int = -1
    error: KafkaError | None = None
    """Raised by the next poll() (e.g. OFFSET_OUT_OF_RANGE with auto.offset.reset=none)."""

    @property
    def fetchable(self) -> bool:
        return self.position is not None and not self.awaiting_validation

    def fetch_position(self) -> FetchPosition | None:
        if self.position is None:
            return None
        return FetchPosition(self.position, self.offset_epoch, self.current_leader)

    def seek(self, offset: int, leader_epoch: int = NO_EPOCH) -> None:
        """Kafka's seek: without an epoch the position is valid as it is (seekValidated with
        no epoch); with one (seek to a committed OffsetAndMetadata) it is validated against
        the leader first (seekUnvalidated)."""
        self.position, self.offset_epoch = offset, leader_epoch
        self.current_leader = NO_LEADER  # the next maybe_validate() sees the leader as new
        self.awaiting_validation = False
        self.next_validation_ms = 0.0
        self.reset, self.error = None, None

    def request_reset(self, strategy: str) -> None:
        """Kafka's requestOffsetReset: no position until ListOffsets answers for `strategy`."""
        self.position, self.offset_epoch = None, NO_EPOCH
        self.current_leader = NO_LEADER
        self.awaiting_validation = False
        self.reset = strategy

    def reset_to(self, offset: int) -> None:
        """A reset answered by ListOffsets. Unlike Kafka the position takes no epoch from the
        answer (trioka's broker answers with its current leader epoch, not the epoch of the
        batch at that offset): it is validated once records have been consumed from it."""
        self.seek(offset)

    def maybe_validate(self, current: LeaderAndEpoch) -> bool:
        """Kafka's maybeValidatePosition with the leader metadata names now: a new leader or
        leader epoch makes a position with an epoch await validation. True while awaiting.

        An older leader epoch than the one the position knows is stale metadata (a broker
        that has not heard of the election yet; Kafka's Metadata keeps the newest epoch it
        saw) and changes nothing."""
        if self.position is None or current.leader is None:
            return False
        known = self.current_leader
        if current != known:
            if 0 <= current.epoch < known.epoch:
                return self.awaiting_validation
            self.current_leader = current
            # Without both epochs there is nothing to compare: fetch (Kafka's validatePosition).
            self.awaiting_validation = self.offset_epoch >= 0 and current.epoch >= 0
            self.next_validation_ms = 0.0
        return self.awaiting_validation

    def complete_validation(
        self,
        tp: TopicPartition,
        requested: FetchPosition,
        end: EpochEndOffset,
        reset_policy: str,
    ) -> tuple[Validation, LogTruncation | None]:
        """Kafka's SubscriptionState.maybeCompleteValidation with the leader's answer for
        `requested`; `reset_policy` is the consumer's auto.offset.reset."""
        if not self.awaiting_validation or self.fetch_position() != requested:
            return Validation.SKIPPED, None
        if end.end_offset == UNDEFINED_OFFSET or end.leader_epoch == NO_EPOCH:
            # The leader has nothing at or before our epoch: no known divergence point.
            if reset_policy != "none":
                self.request_reset(reset_policy)
                return Validation.RESET, None
            return Validation.TRUNCATED, LogTruncation(tp, requested, None)
        if end.end_offset < requested.offset:
            divergent = DivergentOffset(end.end_offset, end.leader_epoch)
            if reset_policy != "none":
                # Kafka's seekValidated to the first offset known to diverge: the records
                # after it are the new leader's, none of which this consumer has seen.
                self.position, self.offset_epoch = end.end_offset, end.leader_epoch
                self.awaiting_validation = False
                return Validation.DIVERGED, None
            return Validation.TRUNCATED, LogTruncation(tp, requested, divergent)
        self.awaiting_validation = False
        return Validation.VALID, None


def log_truncation_error(truncations: Iterable[LogTruncation]) -> LogTruncationError:
    """Kafka's buildLogTruncationException: one error naming every truncated partition."""
    found = list(truncations)
    return LogTruncationError(
        "Detected truncated partitions (auto.offset.reset is none; seek to go on): "
        + "; ".join(str(t) for t in found),
        {t.tp: t.position.offset for t in found},
        {t.tp: t.divergent for t in found if t.divergent is not None},
    )


def leader_and_epoch(metadata: ClusterMetadata, tp: TopicPartition) -> LeaderAndEpoch:
    """The live leader metadata names for `tp` and its leader epoch (NO_LEADER when none)."""
    leader = metadata.leader_for(tp.topic, tp.partition)
    if leader is None:
        return NO_LEADER
    info = metadata.topics.get(tp.topic)
    if info is not None:
        parts, p = info.partitions, tp.partition
        # partitions are sorted by index, so the index is the position unless some are missing
        if 0 <= p < len(parts) and parts[p].partition == p:
            return LeaderAndEpoch(leader, parts[p].leader_epoch)
        for part in parts:
            if part.partition == p:
                return LeaderAndEpoch(leader, part.leader_epoch)
    return LeaderAndEpoch(leader, NO_EPOCH)
