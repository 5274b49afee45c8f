"""Fetch: read record batches (consumers) or replicate them (followers, replica_id >= 0).

Incremental fetch sessions (KIP-227): a fetch with session_id 0 and session_epoch 0 asks for a
new session (full fetch); later fetches name the session and the next epoch and list only the
partitions that changed, plus the ones to drop in forgotten_topics_data; the response lists only
partitions with news. session_epoch -1 (FINAL_EPOCH) is a sessionless full fetch, or closes the
named session.

The KRaft metadata quorum replicates with Fetch too (KIP-595): a follower sends `cluster_id`
and its `replica_epoch`; the leader's answer may name the `current_leader` (after a leadership
error) or, when the fetch offset is below its log start, the `snapshot_id` to get with
FetchSnapshot.
"""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register
from protocol.messages.quorum_common import LeaderIdAndEpoch, NodeEndpoint, SnapshotId


@message
class FetchPartition:
    index: int
    """Partition number."""
    fetch_offset: int
    """First offset wanted."""
    partition_max_bytes: int = 1048576
    """At most this many bytes for this partition (max.partition.fetch.bytes), but at least
    one whole batch so a consumer always makes progress."""
    current_leader_epoch: int = -1
    """The fetcher's idea of the leader epoch (-1: unknown); FENCED_LEADER_EPOCH if stale."""
    last_fetched_epoch: int = -1
    """Epoch of the last batch the follower holds (KIP-595 divergence check); -1 for consumers."""
    log_start_offset: int = -1
    """The follower's log start offset; -1 for consumers."""


@message
class FetchTopic:
    name: str
    """Topic name."""
    partitions: tuple[FetchPartition, ...]
    """Partitions to read."""


@message
class ForgottenTopic:
    topic: str
    """Topic name."""
    partitions: tuple[int, ...]
    """Partitions to remove from the fetch session."""


@message
class EpochEndOffset:
    epoch: int
    """Largest leader epoch the two logs agree on."""
    end_offset: int
    """End offset of that epoch on the leader: the follower truncates to it."""


@message
class FetchPartitionResponse:
    index: int
    """Partition number."""
    error_code: int
    """Kafka error code for this partition."""
    high_watermark: int = -1
    """Offset up to which records are committed (consumers read below it)."""
    last_stable_offset: int = -1
    """Equal to the high watermark: trioka has no transactions yet."""
    log_start_offset: int = -1
    """First offset still in the log."""
    records: bytes = b""
    """Whole record batches, as stored; possibly empty."""
    diverging_epoch: EpochEndOffset | None = None
    """Set when a follower's last_fetched_epoch diverges from the leader's log."""
    error_message: str | None = None
    """What went wrong, for a person."""
    current_leader: LeaderIdAndEpoch | None = None
    """The leader and epoch the answering node knows (KRaft: set with NOT_LEADER_OR_FOLLOWER,
    FENCED_LEADER_EPOCH and UNKNOWN_LEADER_EPOCH)."""
    snapshot_id: SnapshotId | None = None
    """KRaft: the fetch offset is below the leader's log start; fetch this snapshot with
    FetchSnapshot, then fetch from its end offset."""


@message
class FetchTopicResponse:
    name: str
    """Topic name."""
    partitions: tuple[FetchPartitionResponse, ...]
    """One entry per partition in the request."""


@message
class FetchResponse(Response):
    topics: tuple[FetchTopicResponse, ...] = ()
    """One entry per topic in the request."""
    throttle_time_ms: int = 0
    """Always 0: trioka has no quotas yet."""
    error_code: int = 0
    """Request-level error; per-partition errors below."""
    error_message: str | None = None
    """What went wrong, for a person."""
    session_id: int = 0
    """The fetch session's id (KIP-227); 0 when the fetch has no session."""
    node_endpoints: tuple[NodeEndpoint, ...] = ()
    """Endpoints of the leaders named in `current_leader` (KRaft, KIP-853)."""


@register
@message
class FetchRequest(Request):
    API_KEY = ApiKey.FETCH
    MAX_VERSION = 0
    RESPONSE = FetchResponse

    max_wait_ms: int
    """Long poll: wait up to this long for min_bytes (fetch.max.wait.ms)."""
    min_bytes: int
    """Answer as soon as this many bytes are available (fetch.min.bytes)."""
    topics: tuple[FetchTopic, ...]
    """Partitions to read."""
    max_bytes: int = 52428800
    """At most this many bytes in the whole response (fetch.max.bytes), at least one batch."""
    replica_id: int = -1
    """-1 for consumers; the follower's broker id for replication."""
    isolation_level: int = 0
    """0 read_uncommitted, 1 read_committed (the same until transactions exist)."""
    rack_id: str = ""
    """The consumer's rack (client.rack), for follower fetching later."""
    session_id: int = 0
    """The fetch session (KIP-227) this fetch belongs to; 0 for none or to create one."""
    session_epoch: int = -1
    """The session's epoch: 0 creates a session, then 1, 2, ... on each fetch; -1 (FINAL_EPOCH)
    fetches without a session, or closes the named one."""
    forgotten_topics_data: tuple[ForgottenTopic, ...] = ()
    """Partitions to remove from the session (incremental fetches only)."""
    cluster_id: str | None = None
    """KRaft: the cluster id, if known; a quorum node of another cluster answers
    INCONSISTENT_CLUSTER_ID."""
    replica_epoch: int = -1
    """KRaft: the fetching replica's epoch (Kafka's ReplicaState.ReplicaEpoch), -1 if none."""
