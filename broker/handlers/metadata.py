"""Metadata and DescribeCluster, answered from this broker's metadata image: the live brokers
at their address on the request's listener, the topics with their leaders (Metadata may ask
the controller to create missing topics first: auto.create.topics.enable)."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence

from broker.config import Listener
from broker.handlers.router import Handler
from broker.server import BoundListener, ConnectionInfo
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from protocol.messages.metadata import (
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
)
from protocol.messages.topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.metadata.image import MetadataImage, TopicImage
from protocol.names import is_internal, topic_name_problem

CreateTopics = Callable[[CreateTopicsRequest, ConnectionInfo], Awaitable[CreateTopicsResponse]]


class LiveBrokers:
    """The brokers a client on one listener can reach, this one included (Kafka's
    MetadataCache.getAliveBrokerNodes): Metadata, DescribeCluster and FindCoordinator list
    them."""

    def __init__(
        self,
        *,
        node_id: int,
        rack: str | None,
        advertised: Sequence[Listener],
        self_listed_once_unfenced: bool,
        image: Callable[[], MetadataImage],
        bound: Callable[[], Sequence[BoundListener]],
    ) -> None:
        self.node_id = node_id
        self.rack = rack
        """broker.rack, None when unset."""
        self.advertised = tuple(advertised)
        """This broker's effective advertised listeners."""
        self.self_listed_once_unfenced = self_listed_once_unfenced
        """Raft mode: list this broker only once the image has it registered and unfenced."""
        self.image = image
        self.bound = bound
        """The listeners bound (their real port when 0 was configured); empty until serving."""

    def on_listener(self, listener: str) -> tuple[MetadataBroker, ...]:
        """The live brokers with an endpoint on `listener` (the one the request arrived on), at
        that endpoint: a client on EXTERNAL learns only EXTERNAL addresses, and a broker
        lacking the listener is left out of the answer, as Kafka's getAliveBrokerNodes."""
        image = self.image()
        brokers = {}
        own = self._advertised(listener)
        mine = image.cluster.brokers.get(self.node_id)
        if self.self_listed_once_unfenced and (mine is None or mine.fenced):
            # Raft mode lists what the image says, this broker included, as KRaft's
            # getAliveBrokerNodes: a broker not yet unfenced is not one the controller places
            # replicas on, so a client (and cluster readiness) must not count it yet.
            own = None
        if own is not None:
            brokers[self.node_id] = MetadataBroker(
                node_id=self.node_id, host=own[0], port=own[1], rack=self.rack
            )
        for broker_id, reg in image.cluster.brokers.items():
            if broker_id == self.node_id or reg.fenced:
                continue
            endpoint = reg.endpoint(listener)
            if endpoint is not None:
                brokers[broker_id] = MetadataBroker(
                    node_id=broker_id, host=endpoint.host, port=endpoint.port, rack=reg.rack
                )
        return tuple(brokers[k] for k in sorted(brokers))

    def alive(self, broker_id: int) -> bool:
        return broker_id == self.node_id or self.image().cluster.is_usable(broker_id)

    def alive_set(self) -> frozenset[int]:
        """The brokers `alive` is true for."""
        cluster = self.image().cluster
        return frozenset((self.node_id, *(b for b, reg in cluster.brokers.items() if reg.usable)))

    def _advertised(self, listener: str) -> tuple[str, int] | None:
        """This broker's advertised address for `listener` (bound port when 0 was asked), or
        None when advertised.listeners is set without it (Kafka does not advertise it)."""
        bound = {b.name: b for b in self.bound()}
        for adv in self.advertised:
            if adv.name == listener:
                port = adv.port or (bound[listener].port if listener in bound else 0)
                host = adv.host if adv.host not in ("", "0.0.0.0", "::") else socket.getfqdn()
                return host, port
        return None


class TopicEntries:
    """The Metadata answers of the topics, kept between requests (Kafka keeps its metadata
    cache's answers ready the same way; a full Metadata of 25,000 partitions rebuilt and
    encoded per request was a third of a broker's CPU during a failover). A kept entry is
    valid while its topic's image is the same object (images share unchanged topics) and the
    brokers it depends on are the same: the live ones (leader errors, offline replicas) and
    those reachable on the request's listener. Entries are `reused_message`s, so each is also
    encoded once."""

    def __init__(self, alive: Callable[[], frozenset[int]]) -> None:
        self._alive = alive
        self._key: tuple[frozenset[int], frozenset[int]] | None = None
        self._topics: Mapping[str, TopicImage] = {}
        self._kept: dict[str, tuple[TopicImage, MetadataTopic]] = {}

    def follow(self, image: MetadataImage, reachable: frozenset[int]) -> None:
        """Before the lookups of one request: forget everything if the brokers changed."""
        key = (reachable, self._alive())
        if key != self._key:
            self._key = key
            self._kept.clear()
        self._topics = image.topics.by_name
        if len(self._kept) > 2 * len(self._topics) + 64:
            self._kept = {n: e for n, e in self._kept.items() if n in self._topics}

    def get(self, name: str) -> MetadataTopic | None:
        kept = self._kept.get(name)
        if kept is not None and kept[0] is self._topics.get(name):
            return kept[1]
        return None

    def keep(self, name: str, entry: MetadataTopic) -> None:
        topic = self._topics.get(name)
        if topic is not None:
            self._kept[name] = (topic, entry)


class MetadataHandler:
    """Also broker.group's ClusterView (what FindCoordinator needs): `image()`,
    `alive_brokers(listener)` and `create_topics(request, conn)`."""

    def __init__(
        self,
        *,
        brokers: LiveBrokers,
        image: Callable[[], MetadataImage],
        create_topics: CreateTopics,
        auto_create_topics: bool,
        cluster_id: str,
        controller_id: Callable[[], int],
    ) -> None:
        self.brokers = brokers
        self.image = image
        self.create_topics = create_topics
        """Auto-creation of the missing topics a Metadata request names (AdminHandler)."""
        self.auto_create_topics = auto_create_topics
        """auto.create.topics.enable"""
        self.cluster_id = cluster_id
        """Reported while the image has no cluster id yet."""
        self.controller_id = controller_id
        """The controller id Metadata and DescribeCluster report (depends on the mode)."""
        self._entries = TopicEntries(lambda: self.brokers.alive_set())

    def handlers(self) -> Mapping[ApiKey, Handler]:
        return {
            ApiKey.METADATA: self.metadata,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
        }

    def alive_brokers(self, listener: str) -> tuple[MetadataBroker, ...]:
        """The brokers Metadata would list for a request on `listener`."""
        return self.brokers.on_listener(listener)

    async def metadata(self, request: MetadataRequest, conn: ConnectionInfo) -> MetadataResponse:
        image = self.image()
        names: Sequence[str]
        names = sorted(image.topics.by_name) if request.topics is None else request.topics
        unique = list(dict.fromkeys(names))
        creation_errors: dict[str, CreatableTopicResult] = {}
        if request.allow_auto_topic_creation and self.auto_create_topics:
            creation_errors = await self._auto_create(unique, image, conn)
        # The image again: auto-creation waited for the new topics to reach it.
        brokers = self.brokers.on_listener(conn.listener)
        reachable = frozenset(b.node_id for b in brokers)
        self._entries.follow(self.image(), reachable)
        topics = [self._topic_entry(name, reachable, creation_errors) for name in unique]
        return MetadataResponse(
            brokers=brokers,
            cluster_id=self.image().cluster_id or self.cluster_id,
            controller_id=self.controller_id(),
            topics=tuple(topics),
        )

    async def _auto_create(
        self, names: list[str], image: MetadataImage, conn: ConnectionInfo
    ) -> dict[str, CreatableTopicResult]:
        """Create the valid `names` missing from `image`; the failures, by topic (a topic that
        exists meanwhile is no failure)."""
        missing = [
            n for n in names if topic_name_problem(n) is None and image.topics.get_topic(n) is None
        ]
        if not missing:
            return {}
        response = await self.create_topics(
            CreateTopicsRequest(topics=tuple(CreatableTopic(name=n) for n in missing)), conn
        )
        return {
            r.name: r
            for r in response.topics
            if r.error_code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
        }

    def _topic_entry(
        self,
        name: str,
        reachable: frozenset[int],
        creation_errors: Mapping[str, CreatableTopicResult],
    ) -> MetadataTopic:
        """One topic's answer: its partitions, or why there are none."""
        problem = topic_name_problem(name)
        if problem is not None:
            return MetadataTopic(
                error_code=int(ErrorCode.INVALID_TOPIC_EXCEPTION),
                name=name,
                error_message=problem,
            )
        described = self._entries.get(name)
        if described is None:
            described = self._topic_metadata(name, reachable)
            if described is not None:
                self._entries.keep(name, described)
        if described is not None:
            return described
        failed = creation_errors.get(name)
        return MetadataTopic(
            error_code=failed.error_code if failed else int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            name=name,
            error_message=(failed.error_message if failed else None)
            or f"topic {name!r} does not exist",
        )

    def _topic_metadata(self, name: str, reachable: frozenset[int]) -> MetadataTopic | None:
        """`reachable`: the brokers in the answer (those with the request's listener)."""
        topic = self.image().topics.get_topic(name)
        if topic is None:
            return None
        parts = []
        for pid in sorted(topic.partitions):
            reg = topic.partitions[pid]
            parts.append(
                MetadataPartition(
                    error_code=self._leader_error(reg.leader, reachable),
                    index=pid,
                    leader_id=reg.leader,
                    leader_epoch=reg.leader_epoch,
                    replica_nodes=reg.replicas,
                    isr_nodes=reg.isr,
                    offline_replicas=tuple(r for r in reg.replicas if not self.brokers.alive(r)),
                )
            )
        return MetadataTopic(
            error_code=0,
            name=name,
            topic_id=topic.topic_id,
            is_internal=is_internal(name),
            partitions=tuple(parts),
        )

    def _leader_error(self, leader: int, reachable: frozenset[int]) -> int:
        """Kafka's MetadataCache.getPartitionMetadata: no leader -> LEADER_NOT_AVAILABLE; a live
        leader without the request's listener -> LISTENER_NOT_FOUND."""
        if leader < 0 or not self.brokers.alive(leader):
            return int(ErrorCode.LEADER_NOT_AVAILABLE)
        return 0 if leader in reachable else int(ErrorCode.LISTENER_NOT_FOUND)

    async def describe_cluster(
        self, request: DescribeClusterRequest, conn: ConnectionInfo
    ) -> DescribeClusterResponse:
        return DescribeClusterResponse(
            brokers=tuple(
                DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                for b in self.brokers.on_listener(conn.listener)
            ),
            cluster_id=self.image().cluster_id or self.cluster_id,
            controller_id=self.controller_id(),
        )
