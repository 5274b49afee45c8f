"""ListOffsets: earliest, latest, or first offset at/after a timestamp."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register

LATEST_TIMESTAMP = -1
"""Kafka's ListOffsetsRequest.LATEST_TIMESTAMP: the log end offset (the HW for consumers)."""
EARLIEST_TIMESTAMP = -2
"""Kafka's ListOffsetsRequest.EARLIEST_TIMESTAMP: the log start offset."""
MAX_TIMESTAMP = -3
"""Kafka's ListOffsetsRequest.MAX_TIMESTAMP: the offset of the record with the largest
timestamp."""


@message
class ListOffsetsPartition:
    index: int
    """Partition number."""
    timestamp: int
    """A timestamp in ms, or LATEST_TIMESTAMP / EARLIEST_TIMESTAMP / MAX_TIMESTAMP."""
    current_leader_epoch: int = -1
    """The client's idea of the leader epoch (-1: unknown)."""


@message
class ListOffsetsTopic:
    name: str
    """Topic name."""
    partitions: tuple[ListOffsetsPartition, ...]
    """Partitions to look up."""


@message
class ListOffsetsPartitionResponse:
    index: int
    """Partition number."""
    error_code: int
    """Kafka error code for this partition."""
    timestamp: int = -1
    """Timestamp of the record found, -1 for earliest/latest or when none."""
    offset: int = -1
    """The offset found; -1 when no record has a timestamp at or after the one asked for."""
    leader_epoch: int = -1
    """Leader epoch of the record found."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class ListOffsetsTopicResponse:
    name: str
    """Topic name."""
    partitions: tuple[ListOffsetsPartitionResponse, ...]
    """One entry per partition in the request."""


@message
class ListOffsetsResponse(Response):
    topics: tuple[ListOffsetsTopicResponse, ...] = ()
    """One entry per topic in the request."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error; per-partition errors below."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class ListOffsetsRequest(Request):
    API_KEY = ApiKey.LIST_OFFSETS
    MAX_VERSION = 0
    RESPONSE = ListOffsetsResponse

    topics: tuple[ListOffsetsTopic, ...]
    """Partitions to look up."""
    replica_id: int = -1
    """-1 for clients; a broker id for replicas (which may read past the HW)."""
    isolation_level: int = 0
    """0 read_uncommitted, 1 read_committed."""
