"""KIP-951: a Produce or Fetch partition answered NOT_LEADER_OR_FOLLOWER (or, for fetches, with a
stale leader epoch) names the leader this broker's metadata image knows, and the response carries
that leader's endpoint on the listener the request came in on. The client retries there at once
instead of first asking for metadata, which matters most just after a failover."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from broker.handlers.metadata import LiveBrokers
from protocol.errors import ErrorCode
from protocol.messages.quorum_common import LeaderIdAndEpoch, NodeEndpoint
from protocol.metadata.image import MetadataImage
from protocol.names import TopicPartition

HINTED_ERRORS = frozenset(
    {
        int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
        int(ErrorCode.FENCED_LEADER_EPOCH),
        int(ErrorCode.UNKNOWN_LEADER_EPOCH),
    }
)
"""The partition errors whose answer names the current leader."""


class LeaderHints:
    def __init__(self, image: Callable[[], MetadataImage], brokers: LiveBrokers) -> None:
        self._image = image
        self._brokers = brokers

    def current_leader(self, tp: TopicPartition) -> LeaderIdAndEpoch:
        """The leader and epoch of `tp` in this broker's image (-1, -1 when unknown)."""
        topic = self._image().topics.get_topic(tp.topic)
        partition = None if topic is None else topic.partitions.get(tp.partition)
        if partition is None or partition.leader < 0:
            return LeaderIdAndEpoch()
        return LeaderIdAndEpoch(leader_id=partition.leader, leader_epoch=partition.leader_epoch)

    def endpoints(self, leaders: Iterable[int], listener: str) -> tuple[NodeEndpoint, ...]:
        """Where the live brokers among `leaders` listen on `listener`."""
        wanted = set(leaders)
        if not wanted:
            return ()
        return tuple(
            NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port)
            for b in self._brokers.on_listener(listener)
            if b.node_id in wanted
        )
