"""OffsetCommit and OffsetFetch: a group's committed positions, kept by its coordinator in
`__consumer_offsets`. OffsetCommit is answered only once the commit is replicated (the offsets
partition's high watermark passed it)."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register

__all__ = [
    "OffsetCommitPartition",
    "OffsetCommitPartitionResponse",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetCommitTopic",
    "OffsetCommitTopicResponse",
    "OffsetFetchPartitionResponse",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "OffsetFetchTopic",
    "OffsetFetchTopicResponse",
]


# -- OffsetCommit ----------------------------------------------------------------------------


@message
class OffsetCommitPartition:
    partition_index: int
    """Partition number."""
    committed_offset: int
    """The offset of the next record to consume."""
    committed_leader_epoch: int = -1
    """The leader epoch of the last record consumed (-1: unknown)."""
    committed_metadata: str | None = None
    """Free text kept with the offset (at most offset.metadata.max.bytes)."""


@message
class OffsetCommitTopic:
    name: str
    """Topic name."""
    partitions: tuple[OffsetCommitPartition, ...]
    """Partitions to commit."""


@message
class OffsetCommitPartitionResponse:
    partition_index: int
    """Partition number."""
    error_code: int
    """NONE, OFFSET_METADATA_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION, and the group-level errors
    repeated per partition as Kafka does (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, REQUEST_TIMED_OUT, ...)."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class OffsetCommitTopicResponse:
    name: str
    """Topic name."""
    partitions: tuple[OffsetCommitPartitionResponse, ...]
    """One entry per partition in the request."""


@message
class OffsetCommitResponse(Response):
    throttle_time_ms: int = 0
    """Always 0."""
    topics: tuple[OffsetCommitTopicResponse, ...] = ()
    """One entry per topic in the request."""
    error_code: int = 0
    """Request-level error (INVALID_REQUEST, ...); Kafka reports group errors per partition."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class OffsetCommitRequest(Request):
    API_KEY = ApiKey.OFFSET_COMMIT
    MAX_VERSION = 0
    RESPONSE = OffsetCommitResponse

    group_id: str
    """The group."""
    generation_id: int
    """The member's generation, or -1 (UNKNOWN_GENERATION_ID) for a commit outside group
    membership (a simple consumer, an admin reset): accepted only while the group is Empty."""
    member_id: str
    """The member, or "" with generation -1."""
    topics: tuple[OffsetCommitTopic, ...]
    """What to commit."""
    group_instance_id: str | None = None
    """Static membership is not served: must be null."""


# -- OffsetFetch -----------------------------------------------------------------------------


@message
class OffsetFetchTopic:
    name: str
    """Topic name."""
    partition_indexes: tuple[int, ...]
    """Partitions to fetch the committed offsets of."""


@message
class OffsetFetchPartitionResponse:
    partition_index: int
    """Partition number."""
    committed_offset: int
    """The committed offset, or -1 when the group committed none for this partition."""
    error_code: int = 0
    """NONE, UNKNOWN_TOPIC_OR_PARTITION, ..."""
    committed_leader_epoch: int = -1
    """The leader epoch committed with it."""
    metadata: str | None = None
    """The metadata committed with it."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class OffsetFetchTopicResponse:
    name: str
    """Topic name."""
    partitions: tuple[OffsetFetchPartitionResponse, ...]
    """One entry per partition asked, or per partition committed when all were asked."""


@message
class OffsetFetchResponse(Response):
    throttle_time_ms: int = 0
    """Always 0."""
    topics: tuple[OffsetFetchTopicResponse, ...] = ()
    """The committed offsets."""
    error_code: int = 0
    """Group-level error: NONE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class OffsetFetchRequest(Request):
    API_KEY = ApiKey.OFFSET_FETCH
    MAX_VERSION = 0
    RESPONSE = OffsetFetchResponse

    group_id: str
    """The group."""
    topics: tuple[OffsetFetchTopic, ...] | None = None
    """The partitions to fetch; null: every partition the group committed an offset for."""
    require_stable: bool = False
    """No transactions, so every committed offset is stable."""
