"""OffsetForLeaderEpoch: the end offset of a leader epoch on the leader (KIP-101, KIP-320)."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class OffsetForLeaderPartition:
    partition: int
    """Partition number."""
    leader_epoch: int
    """The epoch whose end offset is wanted."""
    current_leader_epoch: int = -1
    """The sender's idea of the current leader epoch (-1: unknown); FENCED_LEADER_EPOCH if
    stale, UNKNOWN_LEADER_EPOCH if newer than the leader's."""


@message
class OffsetForLeaderTopic:
    topic: str
    """Topic name."""
    partitions: tuple[OffsetForLeaderPartition, ...]
    """Partitions to look up."""


@message
class OffsetForLeaderPartitionResult:
    error_code: int
    """NONE, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION, ..."""
    partition: int
    """Partition number."""
    leader_epoch: int = -1
    """The largest epoch <= the requested one in the leader's log; -1 when none."""
    end_offset: int = -1
    """That epoch's end offset: the start offset of the next epoch, or the log end offset."""


@message
class OffsetForLeaderTopicResult:
    topic: str
    """Topic name."""
    partitions: tuple[OffsetForLeaderPartitionResult, ...]
    """One result per partition in the request."""


@message
class OffsetForLeaderEpochResponse(Response):
    topics: tuple[OffsetForLeaderTopicResult, ...] = ()
    """Results by topic."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class OffsetForLeaderEpochRequest(Request):
    API_KEY = ApiKey.OFFSET_FOR_LEADER_EPOCH
    MAX_VERSION = 0
    RESPONSE = OffsetForLeaderEpochResponse

    replica_id: int
    """The follower's broker id; -1 for a consumer (KIP-320 truncation detection)."""
    topics: tuple[OffsetForLeaderTopic, ...]
    """Partitions to look up."""
