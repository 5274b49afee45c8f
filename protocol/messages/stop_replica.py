"""StopReplica: the controller tells a broker to stop (and maybe delete) replicas (ZK mode)."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class StopReplicaPartitionState:
    partition_index: int
    """Partition number."""
    leader_epoch: int = -1
    """Leader epoch of the request; -1 skips the epoch check, -2 deletes regardless
    (Kafka's sentinels for a deleted topic)."""
    delete_partition: bool = False
    """Delete the replica's log as well as stopping it."""


@message
class StopReplicaTopicState:
    topic_name: str
    """Topic name."""
    partition_states: tuple[StopReplicaPartitionState, ...]
    """Partitions of this topic to stop."""
    topic_id: str = ""
    """Topic id (KIP-516); when set, a log with another id is left alone (trioka's addition:
    a recreated topic's replicas are never deleted by a stale request)."""


@message
class StopReplicaPartitionError:
    topic_name: str
    """Topic name."""
    partition_index: int
    """Partition number."""
    error_code: int
    """NONE, FENCED_LEADER_EPOCH, KAFKA_STORAGE_ERROR, ..."""


@message
class StopReplicaResponse(Response):
    partition_errors: tuple[StopReplicaPartitionError, ...] = ()
    """One entry per partition in the request."""
    error_code: int = 0
    """Request-level error: STALE_CONTROLLER_EPOCH, STALE_BROKER_EPOCH, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class StopReplicaRequest(Request):
    API_KEY = ApiKey.STOP_REPLICA
    MAX_VERSION = 0
    RESPONSE = StopReplicaResponse

    controller_id: int
    """The sending controller's broker id."""
    controller_epoch: int
    """The sending controller's epoch; older than the broker's -> STALE_CONTROLLER_EPOCH."""
    broker_epoch: int
    """The receiving broker's epoch as the controller knows it; older -> STALE_BROKER_EPOCH."""
    topic_states: tuple[StopReplicaTopicState, ...]
    """Replicas to stop, by topic."""
