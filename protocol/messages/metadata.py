"""Metadata: brokers, controller, topics, partition leaders and replicas."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register, reused_message


@message
class MetadataBroker:
    node_id: int
    """Broker id."""
    host: str
    """Advertised host of the listener the request came in on."""
    port: int
    """Advertised port."""
    rack: str | None = None
    """broker.rack, if set."""


@message
class MetadataPartition:
    error_code: int
    """LEADER_NOT_AVAILABLE when the partition has no leader, else NONE."""
    index: int
    """Partition number."""
    leader_id: int
    """Leader broker id, -1 when none."""
    leader_epoch: int = -1
    """Current leader epoch."""
    replica_nodes: tuple[int, ...] = ()
    """Assigned replicas, preferred leader first."""
    isr_nodes: tuple[int, ...] = ()
    """In-sync replicas."""
    offline_replicas: tuple[int, ...] = ()
    """Assigned replicas whose broker is down."""


@reused_message
class MetadataTopic:
    error_code: int
    """UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION or NONE."""
    name: str
    """Topic name."""
    topic_id: str = ""
    """Topic id (KIP-516), Kafka's base64 form; empty when unknown."""
    is_internal: bool = False
    """True for topics such as __consumer_offsets."""
    partitions: tuple[MetadataPartition, ...] = ()
    """Partitions in order."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class MetadataResponse(Response):
    brokers: tuple[MetadataBroker, ...] = ()
    """Live brokers."""
    cluster_id: str | None = None
    """The cluster id from meta.properties."""
    controller_id: int = -1
    """Active controller's id, -1 when unknown."""
    topics: tuple[MetadataTopic, ...] = ()
    """Requested topics (all when the request named none)."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class MetadataRequest(Request):
    API_KEY = ApiKey.METADATA
    MAX_VERSION = 0
    RESPONSE = MetadataResponse

    topics: tuple[str, ...] | None = None
    """Topics to describe; null for all topics, empty for none (brokers only)."""
    allow_auto_topic_creation: bool = False
    """Create unknown topics (auto.create.topics.enable must be true as well)."""
