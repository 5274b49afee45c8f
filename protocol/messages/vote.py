"""Vote: a candidate (or pre-candidate) asks a voter for its vote in a new epoch (KIP-595).

The voter grants it only if the candidate's log is at least as up to date as its own (the last
record's epoch, then its offset) and it has not voted for someone else in that epoch. A pre-vote
(KIP-996) asks the same question without bumping the epoch or recording a vote, so a node cut
off from the quorum cannot disrupt it when it comes back.
"""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register
from protocol.messages.quorum_common import NodeEndpoint, check_only_partition


@message
class VotePartition:
    partition_index: int
    """The partition index (0: the metadata log)."""
    candidate_epoch: int
    """The candidate's bumped epoch (for a pre-vote: the epoch it would bump to)."""
    candidate_id: int
    """The replica id of the candidate asking for the vote."""
    last_offset_epoch: int
    """The epoch of the last record in the candidate's log."""
    last_offset: int
    """The candidate's log end offset (Kafka's LastOffset)."""
    pre_vote: bool = False
    """True for a pre-vote (KIP-996): granting it records nothing and changes no epoch."""


@message
class VoteTopic:
    topic_name: str
    """The topic name (__cluster_metadata)."""
    partitions: tuple[VotePartition, ...]
    """The partition voted on: exactly one."""


@message
class VotePartitionResponse:
    partition_index: int
    """The partition index."""
    error_code: int
    """NONE, FENCED_LEADER_EPOCH, INCONSISTENT_VOTER_SET, ..."""
    leader_id: int = -1
    """The leader the voter knows, -1 when unknown."""
    leader_epoch: int = -1
    """The latest epoch the voter knows."""
    vote_granted: bool = False
    """True if the vote was granted."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class VoteTopicResponse:
    topic_name: str
    """The topic name."""
    partitions: tuple[VotePartitionResponse, ...]
    """One entry per partition in the request."""


@message
class VoteResponse(Response):
    topics: tuple[VoteTopicResponse, ...] = ()
    """Per-partition answers."""
    error_code: int = 0
    """Request-level error: INCONSISTENT_CLUSTER_ID, INVALID_REQUEST, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""
    node_endpoints: tuple[NodeEndpoint, ...] = ()
    """Endpoints of the leaders named above (KIP-853), so the candidate can reach them."""


@register
@message
class VoteRequest(Request):
    API_KEY = ApiKey.VOTE
    MAX_VERSION = 0
    RESPONSE = VoteResponse

    topics: tuple[VoteTopic, ...]
    """The partition voted on: exactly one."""
    cluster_id: str | None = None
    """The cluster id; a voter of another cluster answers INCONSISTENT_CLUSTER_ID."""
    voter_id: int = -1
    """The replica id of the voter receiving the request (-1: not checked)."""

    def only_partition(self, topic: str, partition: int) -> VotePartition:
        """The request's one partition, which must be `topic`-`partition`, else KafkaError
        INVALID_REQUEST naming what it asked for."""
        named = [(t.topic_name, p.partition_index) for t in self.topics for p in t.partitions]
        check_only_partition("VoteRequest", named, topic, partition)
        return next(p for t in self.topics for p in t.partitions)
