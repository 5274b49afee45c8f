"""AlterPartition: a leader asks the controller to change a partition's ISR (KIP-497)."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class AlterPartitionPartition:
    partition_index: int
    """Partition number."""
    leader_epoch: int
    """The leader's epoch; another -> FENCED_LEADER_EPOCH."""
    new_isr: tuple[int, ...]
    """The ISR the leader proposes."""
    partition_epoch: int
    """The partition epoch the proposal is based on; another -> INVALID_UPDATE_VERSION."""
    leader_recovery_state: int = 0
    """0 RECOVERED, 1 RECOVERING (KIP-704)."""


@message
class AlterPartitionTopic:
    topic_name: str
    """Topic name."""
    topic_id: str
    """Topic id (KIP-516); another than the controller's -> UNKNOWN_TOPIC_ID."""
    partitions: tuple[AlterPartitionPartition, ...]
    """Proposed changes."""


@message
class AlterPartitionPartitionResult:
    partition_index: int
    """Partition number."""
    error_code: int
    """NONE, FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, NOT_LEADER_OR_FOLLOWER,
    INELIGIBLE_REPLICA, UNKNOWN_TOPIC_OR_PARTITION, ..."""
    leader_id: int = -1
    """The partition's leader after the change."""
    leader_epoch: int = -1
    """Its leader epoch."""
    isr: tuple[int, ...] = ()
    """The ISR now committed: the leader applies this, not its proposal."""
    leader_recovery_state: int = 0
    """0 RECOVERED, 1 RECOVERING."""
    partition_epoch: int = -1
    """The partition epoch after the change (bumped by every accepted change)."""


@message
class AlterPartitionTopicResult:
    topic_name: str
    """Topic name."""
    topic_id: str
    """Topic id, as in the request."""
    partitions: tuple[AlterPartitionPartitionResult, ...]
    """One result per partition in the request."""


@message
class AlterPartitionResponse(Response):
    topics: tuple[AlterPartitionTopicResult, ...] = ()
    """Per-partition results, by topic."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error: NOT_CONTROLLER, STALE_BROKER_EPOCH, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class AlterPartitionRequest(Request):
    API_KEY = ApiKey.ALTER_PARTITION
    MAX_VERSION = 0
    RESPONSE = AlterPartitionResponse

    broker_id: int
    """The leader proposing the changes."""
    broker_epoch: int
    """Its broker epoch; a stale one -> STALE_BROKER_EPOCH."""
    topics: tuple[AlterPartitionTopic, ...]
    """Proposed ISR changes, by topic."""
