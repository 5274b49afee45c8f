"""UpdateMetadata: the controller sends every broker the cluster's metadata (ZK mode)."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class UpdateMetadataPartitionState:
    partition_index: int
    """Partition number."""
    controller_epoch: int
    """Epoch of the controller that last changed this partition's leader or ISR."""
    leader: int
    """Broker id of the leader; -1 when none, -2 (LeaderDuringDelete) while being deleted."""
    leader_epoch: int
    """Leader epoch."""
    isr: tuple[int, ...]
    """In-sync replica ids."""
    partition_epoch: int
    """Partition epoch (Kafka's ZkVersion)."""
    replicas: tuple[int, ...]
    """Assigned replica ids, preferred leader first."""
    offline_replicas: tuple[int, ...] = ()
    """Assigned replicas whose broker is down or whose log dir failed."""


@message
class UpdateMetadataTopicState:
    topic_name: str
    """Topic name."""
    topic_id: str
    """Topic id (KIP-516), Kafka's base64 form."""
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    """Partitions to update."""


@message
class UpdateMetadataEndpoint:
    port: int
    """Port of this endpoint."""
    host: str
    """Advertised host of this endpoint."""
    listener: str
    """Listener name (PLAINTEXT, INTERNAL, EXTERNAL, ...)."""
    security_protocol: int = 0
    """Kafka's SecurityProtocol id; 0 = PLAINTEXT."""


@message
class UpdateMetadataBroker:
    id: int
    """Broker id."""
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    """The broker's advertised listeners."""
    rack: str | None = None
    """broker.rack, if set."""


@message
class UpdateMetadataResponse(Response):
    error_code: int = 0
    """STALE_CONTROLLER_EPOCH, STALE_BROKER_EPOCH, or NONE."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class UpdateMetadataRequest(Request):
    API_KEY = ApiKey.UPDATE_METADATA
    MAX_VERSION = 0
    RESPONSE = UpdateMetadataResponse

    controller_id: int
    """The sending controller's broker id (Metadata responses name it as the controller)."""
    controller_epoch: int
    """The sending controller's epoch; older than the broker's -> STALE_CONTROLLER_EPOCH."""
    broker_epoch: int
    """The receiving broker's epoch as the controller knows it; older -> STALE_BROKER_EPOCH."""
    topic_states: tuple[UpdateMetadataTopicState, ...]
    """Partitions whose metadata changed (all of them after a controller failover)."""
    live_brokers: tuple[UpdateMetadataBroker, ...]
    """Every live broker: the complete set, replacing the broker's previous list."""
