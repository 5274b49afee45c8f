"""LeaderAndIsr: the controller tells a broker which replicas it leads or follows (ZK mode)."""

from __future__ import annotations

from enum import IntEnum

from protocol.messages.base import ApiKey, Request, Response, message, register


class LeaderAndIsrType(IntEnum):
    """Kafka's LeaderAndIsrRequest type: a full request lists every partition the broker
    hosts, so the broker may drop what it does not name (KIP-516)."""

    INCREMENTAL = 0
    FULL = 1


@message
class LeaderAndIsrPartitionState:
    partition_index: int
    """Partition number."""
    controller_epoch: int
    """Epoch of the controller that last changed this partition's leader or ISR."""
    leader: int
    """Broker id of the leader; -1 when the partition has none."""
    leader_epoch: int
    """Leader epoch; a broker ignores a state whose epoch is not newer than its own."""
    isr: tuple[int, ...]
    """In-sync replica ids."""
    partition_epoch: int
    """Partition epoch (Kafka's ZkVersion: the partition state znode's version)."""
    replicas: tuple[int, ...]
    """Assigned replica ids, preferred leader first."""
    adding_replicas: tuple[int, ...] = ()
    """Replicas being added by a reassignment."""
    removing_replicas: tuple[int, ...] = ()
    """Replicas being removed by a reassignment."""
    is_new: bool = False
    """The replica is new on this broker (created, not recovered from disk)."""
    leader_recovery_state: int = 0
    """0 RECOVERED, 1 RECOVERING (after an unclean election, KIP-704)."""


@message
class LeaderAndIsrTopicState:
    topic_name: str
    """Topic name."""
    topic_id: str
    """Topic id (KIP-516), Kafka's base64 form; a log with another id is stale."""
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    """The state of each partition of this topic the broker hosts."""


@message
class LeaderAndIsrLiveLeader:
    broker_id: int
    """A leader's broker id."""
    host_name: str
    """Its host on the inter-broker listener."""
    port: int
    """Its port on the inter-broker listener."""


@message
class LeaderAndIsrPartitionError:
    partition_index: int
    """Partition number."""
    error_code: int
    """NONE, or why this partition's state was not applied (STALE_CONTROLLER_EPOCH,
    FENCED_LEADER_EPOCH, KAFKA_STORAGE_ERROR, ...)."""


@message
class LeaderAndIsrTopicError:
    topic_name: str
    """Topic name."""
    topic_id: str
    """Topic id, as in the request."""
    partition_errors: tuple[LeaderAndIsrPartitionError, ...]
    """One entry per partition in the request."""


@message
class LeaderAndIsrResponse(Response):
    topics: tuple[LeaderAndIsrTopicError, ...] = ()
    """Per-partition results, by topic."""
    error_code: int = 0
    """Request-level error: STALE_CONTROLLER_EPOCH, STALE_BROKER_EPOCH, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class LeaderAndIsrRequest(Request):
    API_KEY = ApiKey.LEADER_AND_ISR
    MAX_VERSION = 0
    RESPONSE = LeaderAndIsrResponse

    controller_id: int
    """The sending controller's broker id."""
    controller_epoch: int
    """The sending controller's epoch; older than the broker's -> STALE_CONTROLLER_EPOCH."""
    broker_epoch: int
    """The receiving broker's epoch as the controller knows it (the czxid of its registration);
    older than the broker's -> STALE_BROKER_EPOCH."""
    topic_states: tuple[LeaderAndIsrTopicState, ...]
    """Partitions whose leader or ISR the broker must apply."""
    live_leaders: tuple[LeaderAndIsrLiveLeader, ...]
    """Every leader named in topic_states, so followers know where to fetch from."""
    type: int = 0
    """LeaderAndIsrType: 0 incremental, 1 full."""
