"""FetchSnapshot: a follower whose fetch offset fell below the leader's log start offset copies
the leader's latest snapshot in chunks (KIP-630), then fetches the log from its end offset.

The leader's Fetch answer names the snapshot (`snapshot_id`); the follower asks for it from byte
position 0 and then from each chunk's end until `position + len(unaligned_records) == size`.
"""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register
from protocol.messages.quorum_common import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    SnapshotId,
    check_only_partition,
)

NO_SNAPSHOT = SnapshotId(end_offset=-1, epoch=-1)
"""The snapshot id of an answer that carries no snapshot (an error)."""


@message
class FetchSnapshotPartition:
    partition: int
    """The partition index (0: the metadata log)."""
    current_leader_epoch: int
    """The follower's idea of the leader epoch; a stale one -> FENCED_LEADER_EPOCH."""
    snapshot_id: SnapshotId
    """The snapshot wanted (from the Fetch answer)."""
    position: int
    """The byte position in the snapshot to read from."""


@message
class FetchSnapshotTopic:
    name: str
    """The topic name (__cluster_metadata)."""
    partitions: tuple[FetchSnapshotPartition, ...]
    """Exactly one partition."""


@message
class FetchSnapshotPartitionResponse:
    index: int
    """The partition index."""
    error_code: int
    """NONE, SNAPSHOT_NOT_FOUND, POSITION_OUT_OF_RANGE, FENCED_LEADER_EPOCH, ..."""
    snapshot_id: SnapshotId = NO_SNAPSHOT
    """The snapshot the bytes come from."""
    current_leader: LeaderIdAndEpoch | None = None
    """The leader and epoch the answering node knows (set with leadership errors)."""
    size: int = -1
    """The snapshot's total size in bytes."""
    position: int = -1
    """The byte position of `unaligned_records` in the snapshot."""
    unaligned_records: bytes = b""
    """A chunk of the snapshot; it may end in the middle of a record batch."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class FetchSnapshotTopicResponse:
    name: str
    """The topic name."""
    partitions: tuple[FetchSnapshotPartitionResponse, ...]
    """One entry per partition in the request."""


@message
class FetchSnapshotResponse(Response):
    topics: tuple[FetchSnapshotTopicResponse, ...] = ()
    """Per-partition answers."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error: INCONSISTENT_CLUSTER_ID, INVALID_REQUEST, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""
    node_endpoints: tuple[NodeEndpoint, ...] = ()
    """Endpoints of the leaders named above (KIP-853)."""


@register
@message
class FetchSnapshotRequest(Request):
    API_KEY = ApiKey.FETCH_SNAPSHOT
    MAX_VERSION = 0
    RESPONSE = FetchSnapshotResponse

    topics: tuple[FetchSnapshotTopic, ...]
    """The snapshot wanted: exactly one partition."""
    cluster_id: str | None = None
    """The cluster id; a leader of another cluster answers INCONSISTENT_CLUSTER_ID."""
    replica_id: int = -1
    """The fetching replica's id (-1: an observer without one)."""
    max_bytes: int = 0x7FFFFFFF
    """At most this many snapshot bytes in the answer."""

    def only_partition(self, topic: str, partition: int) -> FetchSnapshotPartition:
        """The request's one partition, which must be `topic`-`partition`, else KafkaError
        INVALID_REQUEST naming what it asked for."""
        named = [(t.name, p.partition) for t in self.topics for p in t.partitions]
        check_only_partition("FetchSnapshotRequest", named, topic, partition)
        return next(p for t in self.topics for p in t.partitions)
