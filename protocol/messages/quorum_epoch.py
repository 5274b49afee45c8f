"""BeginQuorumEpoch and EndQuorumEpoch: a new leader announces itself; a leader resigns (KIP-595).

A newly elected leader sends BeginQuorumEpoch to every voter so they become its followers without
waiting for an election timeout. A leader shutting down gracefully sends EndQuorumEpoch so the
voters start an election at once, the preferred successors (most caught up first) sooner than
the others.
"""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register
from protocol.messages.quorum_common import LeaderEndpoint, NodeEndpoint, check_only_partition


@message
class BeginQuorumEpochPartition:
    partition_index: int
    """The partition index (0: the metadata log)."""
    leader_id: int
    """The id of the newly elected leader."""
    leader_epoch: int
    """Its epoch."""


@message
class BeginQuorumEpochTopic:
    topic_name: str
    """The topic name (__cluster_metadata)."""
    partitions: tuple[BeginQuorumEpochPartition, ...]
    """Exactly one partition."""


@message
class QuorumEpochPartitionResponse:
    partition_index: int
    """The partition index."""
    error_code: int
    """NONE, FENCED_LEADER_EPOCH, INCONSISTENT_VOTER_SET, NOT_LEADER_OR_FOLLOWER, ..."""
    leader_id: int = -1
    """The leader the receiver knows, -1 when unknown."""
    leader_epoch: int = -1
    """The latest epoch the receiver knows."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class QuorumEpochTopicResponse:
    topic_name: str
    """The topic name."""
    partitions: tuple[QuorumEpochPartitionResponse, ...]
    """One entry per partition in the request."""


@message
class BeginQuorumEpochResponse(Response):
    topics: tuple[QuorumEpochTopicResponse, ...] = ()
    """Per-partition answers."""
    error_code: int = 0
    """Request-level error: INCONSISTENT_CLUSTER_ID, INVALID_REQUEST, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""
    node_endpoints: tuple[NodeEndpoint, ...] = ()
    """Endpoints of the leaders named above (KIP-853)."""


@register
@message
class BeginQuorumEpochRequest(Request):
    API_KEY = ApiKey.BEGIN_QUORUM_EPOCH
    MAX_VERSION = 0
    RESPONSE = BeginQuorumEpochResponse

    topics: tuple[BeginQuorumEpochTopic, ...]
    """The partition whose new leader is announced: exactly one."""
    cluster_id: str | None = None
    """The cluster id; a voter of another cluster answers INCONSISTENT_CLUSTER_ID."""
    voter_id: int = -1
    """The replica id of the voter receiving the request (-1: not checked)."""
    leader_endpoints: tuple[LeaderEndpoint, ...] = ()
    """Where the new leader listens (KIP-853), so followers can fetch from it."""

    def only_partition(self, topic: str, partition: int) -> BeginQuorumEpochPartition:
        """The request's one partition, which must be `topic`-`partition`, else KafkaError
        INVALID_REQUEST naming what it asked for."""
        named = [(t.topic_name, p.partition_index) for t in self.topics for p in t.partitions]
        check_only_partition("BeginQuorumEpochRequest", named, topic, partition)
        return next(p for t in self.topics for p in t.partitions)


@message
class EndQuorumEpochPartition:
    partition_index: int
    """The partition index (0: the metadata log)."""
    leader_id: int
    """The id of the leader that is resigning."""
    leader_epoch: int
    """Its epoch."""
    preferred_successors: tuple[int, ...] = ()
    """Voters to start the election first, most caught up first (Kafka's v0 field; v1's
    PreferredCandidates adds directory ids, which trioka does not have)."""


@message
class EndQuorumEpochTopic:
    topic_name: str
    """The topic name (__cluster_metadata)."""
    partitions: tuple[EndQuorumEpochPartition, ...]
    """Exactly one partition."""


@message
class EndQuorumEpochResponse(Response):
    topics: tuple[QuorumEpochTopicResponse, ...] = ()
    """Per-partition answers."""
    error_code: int = 0
    """Request-level error: INCONSISTENT_CLUSTER_ID, INVALID_REQUEST, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""
    node_endpoints: tuple[NodeEndpoint, ...] = ()
    """Endpoints of the leaders named above (KIP-853)."""


@register
@message
class EndQuorumEpochRequest(Request):
    API_KEY = ApiKey.END_QUORUM_EPOCH
    MAX_VERSION = 0
    RESPONSE = EndQuorumEpochResponse

    topics: tuple[EndQuorumEpochTopic, ...]
    """The partition whose leader resigns: exactly one."""
    cluster_id: str | None = None
    """The cluster id; a voter of another cluster answers INCONSISTENT_CLUSTER_ID."""
    leader_endpoints: tuple[LeaderEndpoint, ...] = ()
    """Where the resigning leader listens (KIP-853)."""

    def only_partition(self, topic: str, partition: int) -> EndQuorumEpochPartition:
        """The request's one partition, which must be `topic`-`partition`, else KafkaError
        INVALID_REQUEST naming what it asked for."""
        named = [(t.topic_name, p.partition_index) for t in self.topics for p in t.partitions]
        check_only_partition("EndQuorumEpochRequest", named, topic, partition)
        return next(p for t in self.topics for p in t.partitions)
