"""ElectLeaders: an admin asks the controller for preferred or unclean leader elections."""

from __future__ import annotations

from enum import IntEnum

from protocol.messages.base import ApiKey, Request, Response, message, register


class ElectionType(IntEnum):
    """Kafka's ElectionType ids."""

    PREFERRED = 0
    UNCLEAN = 1


@message
class ElectLeadersTopicPartitions:
    topic: str
    """Topic name."""
    partitions: tuple[int, ...]
    """Partitions to elect a leader for."""


@message
class ElectLeadersPartitionResult:
    partition_id: int
    """Partition number."""
    error_code: int
    """NONE, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
    ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class ReplicaElectionResult:
    topic: str
    """Topic name."""
    partition_result: tuple[ElectLeadersPartitionResult, ...]
    """One result per partition."""


@message
class ElectLeadersResponse(Response):
    replica_election_results: tuple[ReplicaElectionResult, ...] = ()
    """Results by topic; with a null request, every partition an election was tried for."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error: NOT_CONTROLLER, INVALID_REQUEST, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class ElectLeadersRequest(Request):
    API_KEY = ApiKey.ELECT_LEADERS
    MAX_VERSION = 0
    RESPONSE = ElectLeadersResponse

    election_type: int
    """ElectionType: 0 preferred, 1 unclean (any live assigned replica, out of the ISR too)."""
    topic_partitions: tuple[ElectLeadersTopicPartitions, ...] | None = None
    """Partitions to elect leaders for; null for every partition."""
    timeout_ms: int = 60000
    """How long to wait for the elections to complete."""
