"""DescribeQuorum: the metadata quorum as its leader sees it (KIP-595, KIP-836): leader, epoch,
high watermark and, per voter and observer, how far its log reaches and when it last fetched.

Only the leader answers with data; any other node answers NOT_LEADER_OR_FOLLOWER with the
leader it knows. `trioka quorum describe` prints it.
"""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class DescribeQuorumPartition:
    partition_index: int
    """The partition index (0: the metadata log)."""


@message
class DescribeQuorumTopic:
    topic_name: str
    """The topic name (__cluster_metadata)."""
    partitions: tuple[DescribeQuorumPartition, ...]
    """Partitions to describe."""


@message
class QuorumReplicaState:
    replica_id: int
    """The replica's node id."""
    log_end_offset: int
    """Its last known log end offset, -1 when unknown."""
    last_fetch_timestamp: int = -1
    """Leader's wall-clock time (ms) of the replica's last fetch; -1 for the leader itself or
    when unknown."""
    last_caught_up_timestamp: int = -1
    """Leader's wall-clock time (ms) at which the replica was last caught up to the leader's log
    end; the current time for the leader, -1 when unknown."""


@message
class DescribeQuorumPartitionResponse:
    partition_index: int
    """The partition index."""
    error_code: int
    """NONE, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION."""
    leader_id: int = -1
    """The leader's id, -1 when unknown."""
    leader_epoch: int = -1
    """The latest known leader epoch."""
    high_watermark: int = -1
    """The quorum's high watermark: records below it are committed."""
    current_voters: tuple[QuorumReplicaState, ...] = ()
    """Every voter, the leader included."""
    observers: tuple[QuorumReplicaState, ...] = ()
    """Non-voters that fetch the log (brokers)."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class DescribeQuorumTopicResponse:
    topic_name: str
    """The topic name."""
    partitions: tuple[DescribeQuorumPartitionResponse, ...]
    """One entry per partition in the request."""


@message
class DescribeQuorumListener:
    name: str
    """Listener name."""
    host: str
    """Host."""
    port: int
    """Port."""


@message
class DescribeQuorumNode:
    node_id: int
    """The node's id."""
    listeners: tuple[DescribeQuorumListener, ...]
    """The node's controller listeners."""


@message
class DescribeQuorumResponse(Response):
    topics: tuple[DescribeQuorumTopicResponse, ...] = ()
    """Per-partition answers."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""
    nodes: tuple[DescribeQuorumNode, ...] = ()
    """Endpoints of the voters (KIP-853)."""


@register
@message
class DescribeQuorumRequest(Request):
    API_KEY = ApiKey.DESCRIBE_QUORUM
    MAX_VERSION = 0
    RESPONSE = DescribeQuorumResponse

    topics: tuple[DescribeQuorumTopic, ...]
    """Partitions to describe (__cluster_metadata-0)."""
