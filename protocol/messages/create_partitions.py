"""CreatePartitions: add partitions to existing topics."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class CreatePartitionsAssignment:
    broker_ids: tuple[int, ...]
    """Replicas of one new partition, preferred leader first."""


@message
class CreatePartitionsTopic:
    name: str
    """Topic name."""
    count: int
    """The new total partition count (must be larger than the current one)."""
    assignments: tuple[CreatePartitionsAssignment, ...] | None = None
    """Replicas of each new partition, in order; null to let the controller place them."""


@message
class CreatePartitionsTopicResult:
    name: str
    """Topic name."""
    error_code: int
    """NONE, INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT, UNKNOWN_TOPIC_OR_PARTITION,
    INVALID_REPLICATION_FACTOR, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class CreatePartitionsResponse(Response):
    results: tuple[CreatePartitionsTopicResult, ...] = ()
    """One result per topic in the request."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class CreatePartitionsRequest(Request):
    API_KEY = ApiKey.CREATE_PARTITIONS
    MAX_VERSION = 0
    RESPONSE = CreatePartitionsResponse

    topics: tuple[CreatePartitionsTopic, ...]
    """Topics to grow."""
    timeout_ms: int = 30000
    """How long to wait for the partitions to be created."""
    validate_only: bool = False
    """Check the request without creating anything."""
