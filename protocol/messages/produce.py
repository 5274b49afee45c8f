"""Produce: append record batches to partition leaders."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register
from protocol.messages.quorum_common import LeaderIdAndEpoch, NodeEndpoint


@message
class ProducePartition:
    index: int
    """Partition number."""
    records: bytes
    """One or more whole record batches (protocol.record_batch), opaque to the broker."""


@message
class ProduceTopic:
    name: str
    """Topic name."""
    partitions: tuple[ProducePartition, ...]
    """Partitions to append to."""


@message
class ProducePartitionResponse:
    index: int
    """Partition number."""
    error_code: int
    """Kafka error code for this partition."""
    base_offset: int = -1
    """Offset given to the first record of the first batch; -1 on error or with acks=0."""
    log_append_time_ms: int = -1
    """-1: trioka uses CreateTime."""
    log_start_offset: int = -1
    """The partition's log start offset after the append."""
    error_message: str | None = None
    """What went wrong, for a person."""
    current_leader: LeaderIdAndEpoch | None = None
    """With NOT_LEADER_OR_FOLLOWER: the leader and epoch the answering broker knows (KIP-951),
    so the client retries there without a Metadata round trip."""


@message
class ProduceTopicResponse:
    name: str
    """Topic name."""
    partitions: tuple[ProducePartitionResponse, ...]
    """One entry per partition in the request."""


@message
class ProduceResponse(Response):
    topics: tuple[ProduceTopicResponse, ...] = ()
    """One entry per topic in the request."""
    throttle_time_ms: int = 0
    """Always 0: trioka has no quotas yet."""
    error_code: int = 0
    """Request-level error (INVALID_REQUEST, UNSUPPORTED_VERSION); per-partition errors below."""
    error_message: str | None = None
    """What went wrong, for a person."""
    node_endpoints: tuple[NodeEndpoint, ...] = ()
    """Endpoints, on the request's listener, of the leaders named in `current_leader`."""


@register
@message
class ProduceRequest(Request):
    API_KEY = ApiKey.PRODUCE
    MAX_VERSION = 0
    RESPONSE = ProduceResponse

    acks: int
    """0: no response; 1: the leader appended; -1 (all): the ISR has it (HW passed it)."""
    timeout_ms: int
    """How long an acks=all request may wait for replication (request.timeout.ms)."""
    topics: tuple[ProduceTopic, ...]
    """What to append."""
    transactional_id: str | None = None
    """Unused until transactions exist; must be null."""
