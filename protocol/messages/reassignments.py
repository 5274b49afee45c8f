"""AlterPartitionReassignments and ListPartitionReassignments (KIP-455)."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class ReassignablePartition:
    partition_index: int
    """Partition number."""
    replicas: tuple[int, ...] | None = None
    """The target replicas, preferred leader first; null cancels the partition's reassignment."""


@message
class ReassignableTopic:
    name: str
    """Topic name."""
    partitions: tuple[ReassignablePartition, ...]
    """Partitions to reassign (or whose reassignment to cancel)."""


@message
class ReassignablePartitionResponse:
    partition_index: int
    """Partition number."""
    error_code: int
    """NONE, NO_REASSIGNMENT_IN_PROGRESS, INVALID_REPLICA_ASSIGNMENT,
    UNKNOWN_TOPIC_OR_PARTITION, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class ReassignableTopicResponse:
    name: str
    """Topic name."""
    partitions: tuple[ReassignablePartitionResponse, ...]
    """One result per partition in the request."""


@message
class AlterPartitionReassignmentsResponse(Response):
    responses: tuple[ReassignableTopicResponse, ...] = ()
    """Results by topic."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error: NOT_CONTROLLER, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class AlterPartitionReassignmentsRequest(Request):
    API_KEY = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    MAX_VERSION = 0
    RESPONSE = AlterPartitionReassignmentsResponse

    topics: tuple[ReassignableTopic, ...]
    """Reassignments to start or cancel."""
    timeout_ms: int = 60000
    """How long to wait for the controller to accept them (not for them to finish)."""


@message
class ListPartitionReassignmentsTopic:
    name: str
    """Topic name."""
    partition_indexes: tuple[int, ...]
    """Partitions to list."""


@message
class OngoingPartitionReassignment:
    partition_index: int
    """Partition number."""
    replicas: tuple[int, ...]
    """The current replica set (target and original replicas while it moves)."""
    adding_replicas: tuple[int, ...] = ()
    """Replicas being added."""
    removing_replicas: tuple[int, ...] = ()
    """Replicas being removed."""


@message
class OngoingTopicReassignment:
    name: str
    """Topic name."""
    partitions: tuple[OngoingPartitionReassignment, ...]
    """Partitions of this topic being reassigned."""


@message
class ListPartitionReassignmentsResponse(Response):
    topics: tuple[OngoingTopicReassignment, ...] = ()
    """Ongoing reassignments (only partitions with one in progress)."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error: NOT_CONTROLLER, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class ListPartitionReassignmentsRequest(Request):
    API_KEY = ApiKey.LIST_PARTITION_REASSIGNMENTS
    MAX_VERSION = 0
    RESPONSE = ListPartitionReassignmentsResponse

    timeout_ms: int = 60000
    """How long to wait for the answer."""
    topics: tuple[ListPartitionReassignmentsTopic, ...] | None = None
    """Partitions to list; null for every ongoing reassignment."""
