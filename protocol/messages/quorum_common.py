"""Structures shared by the KRaft quorum APIs (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
FetchSnapshot, DescribeQuorum), and the check every quorum request needs.

Kafka's quorum APIs keep the general topics -> partitions shape of its other APIs although a
quorum serves exactly one partition, `__cluster_metadata-0`. A request naming anything else is
refused with INVALID_REQUEST (`check_only_partition`, behind each request's
`.only_partition(topic, partition)`), as KafkaRaftClient's hasValidTopicPartition does.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.errors import ErrorCode, KafkaError
from protocol.messages.base import message


@message
class NodeEndpoint:
    node_id: int
    """The node's id."""
    host: str
    """The node's host on the listener the request came in on."""
    port: int
    """Its port."""


@message
class LeaderEndpoint:
    name: str
    """Listener name (controller.listener.names)."""
    host: str
    """The leader's host on that listener."""
    port: int
    """Its port."""


@message
class LeaderIdAndEpoch:
    leader_id: int = -1
    """The current leader, -1 when unknown."""
    leader_epoch: int = -1
    """The latest known leader epoch, -1 when unknown."""


@message
class SnapshotId:
    end_offset: int
    """The snapshot's end offset: it holds every record below this offset."""
    epoch: int
    """The epoch of the last record the snapshot covers."""


def check_only_partition(
    request_name: str, named: Sequence[tuple[str, int]], topic: str, partition: int
) -> None:
    """A quorum request must name exactly `topic`-`partition` (given as `named`).

    Raises KafkaError INVALID_REQUEST saying what the request named instead.
    """
    if list(named) != [(topic, partition)]:
        shown = ", ".join(f"{t}-{p}" for t, p in named) or "none"
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"{request_name} must name exactly one partition, {topic}-{partition}; "
            f"it named {shown}",
        )
