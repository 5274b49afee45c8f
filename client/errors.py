"""Errors the client raises on top of protocol.errors.KafkaError.

Everything a user can hit (unreachable broker, timeouts, bad configs) is a KafkaError with a
message a person can act on, so callers (the CLI above all) catch one type and print one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from protocol.errors import ErrorCode, KafkaError
from protocol.names import TopicPartition


class KafkaConnectionError(KafkaError):
    """A broker could not be reached or the connection broke (Kafka's NetworkException)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)


class KafkaTimeoutError(KafkaError):
    """A client-side deadline passed (request.timeout.ms, max.block.ms, delivery.timeout.ms)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


class ClientClosedError(KafkaError):
    """The producer, consumer or admin client was used after close()."""

    def __init__(self, what: str) -> None:
        super().__init__(ErrorCode.UNKNOWN_SERVER_ERROR, f"{what} is closed")


class OutOfOrderSequenceError(KafkaError):
    """The leader found a gap in an idempotent producer's sequences and refused the batch, so
    it is not written (Kafka's OutOfOrderSequenceException); the producer takes a new producer
    id. A batch whose outcome is unknown never fails with it: it is retried, and fails with
    KafkaTimeoutError at delivery.timeout.ms."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, message)


class NoOffsetForPartitionError(KafkaError):
    """No position and auto.offset.reset=none (Kafka's NoOffsetForPartitionException)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, message)


class DivergentOffset(NamedTuple):
    """Where a consumer's log and the leader's part (Kafka's OffsetAndMetadata with a leader
    epoch in LogTruncationException.divergentOffsets): the end offset of the consumed epoch on
    the leader, and that epoch."""

    offset: int
    leader_epoch: int


class LogTruncationError(KafkaError):
    """The leader's log is shorter than what this consumer already read (an unclean leader
    election; KIP-320) and auto.offset.reset is none (Kafka's LogTruncationException).

    `fetch_offsets[tp]` is the position that could not be validated; `divergent_offsets[tp]`
    (when the leader could say) is the first offset known to diverge: `seek()` there to go on
    with the records the new leader has."""

    def __init__(
        self,
        message: str,
        fetch_offsets: Mapping[TopicPartition, int],
        divergent_offsets: Mapping[TopicPartition, DivergentOffset],
    ) -> None:
        # Kafka's LogTruncationException is an OffsetOutOfRangeException.
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, message)
        self.fetch_offsets = dict(fetch_offsets)
        self.divergent_offsets = dict(divergent_offsets)


def raise_for_code(code: int, message: str | None, context: str = "") -> None:
    """Raise KafkaError for a non-zero wire error code, keeping the broker's message."""
    if code == 0:
        return
    error = ErrorCode.from_wire(code)
    text = message or error.name
    raise KafkaError(error, f"{context}: {text}" if context else text)


class CommitFailedError(KafkaError):
    """The group rebalanced without this member (its generation is gone): the commit cannot
    be done and the partitions may already be someone else's (Kafka's CommitFailedException).
    The member rejoins at its next poll()."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(code, message)


class RebalanceInProgressError(KafkaError):
    """The commit came while the group is rebalancing (Kafka's RebalanceInProgressException):
    poll() to finish the rebalance, then commit again."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REBALANCE_IN_PROGRESS, message)
