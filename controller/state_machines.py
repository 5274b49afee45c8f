"""Kafka's partition and replica state machines (ZK mode), as pure functions.

Kafka's ZK controller keeps these states in memory and moves them with handleStateChanges; here
a state is derived from the replayed image plus broker liveness, so the active controller, a
standby and a freshly failed-over controller agree on it without storing it. The transition
tables are Kafka's (PartitionState.validPreviousStates, ReplicaState.validPreviousStates) and
`check_*_transition` refuse anything else, naming both states.

The replica deletion states (ReplicaDeletionStarted/Successful/Ineligible) are not derivable
from records: they follow StopReplica responses during a ZK-mode topic deletion.
`TopicDeletionReplicas` tracks them for one topic, with the same transition checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from protocol.metadata.image import MetadataImage, PartitionRegistration
from protocol.metadata.records import NO_LEADER


class IllegalStateTransition(ValueError):
    """A state change Kafka's state machines refuse (IllegalStateException)."""


class PartitionState(Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaState(Enum):
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"


_P = PartitionState
_R = ReplicaState

PARTITION_VALID_PREVIOUS: Mapping[PartitionState, frozenset[PartitionState]] = {
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
}
"""Kafka's PartitionState.validPreviousStates."""

REPLICA_VALID_PREVIOUS: Mapping[ReplicaState, frozenset[ReplicaState]] = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}
"""Kafka's ReplicaState.validPreviousStates."""


def is_valid_partition_transition(current: PartitionState, target: PartitionState) -> bool:
    return current in PARTITION_VALID_PREVIOUS[target]


def is_valid_replica_transition(current: ReplicaState, target: ReplicaState) -> bool:
    return current in REPLICA_VALID_PREVIOUS[target]


def check_partition_transition(what: str, current: PartitionState, target: PartitionState) -> None:
    if not is_valid_partition_transition(current, target):
        raise IllegalStateTransition(
            f"Partition {what} should be in one of "
            f"{sorted(s.value for s in PARTITION_VALID_PREVIOUS[target])} states before moving "
            f"to {target.value} state. Instead it is in {current.value} state"
        )


def check_replica_transition(what: str, current: ReplicaState, target: ReplicaState) -> None:
    if not is_valid_replica_transition(current, target):
        raise IllegalStateTransition(
            f"Replica {what} should be in the "
            f"{sorted(s.value for s in REPLICA_VALID_PREVIOUS[target])} states before moving to "
            f"{target.value} state. Instead it is in {current.value} state"
        )


@dataclass(frozen=True, slots=True)
class Liveness:
    """Which brokers are up, as Kafka's ControllerContext sees them.

    `live_or_shutting_down` are the registered, unfenced brokers (liveOrShuttingDownBrokerIds);
    `shutting_down` those among them in controlled shutdown; `live` the rest (liveBrokerIds):
    the only brokers a leader may be elected on.
    """

    live_or_shutting_down: frozenset[int]
    shutting_down: frozenset[int] = frozenset()

    @classmethod
    def from_image(cls, image: MetadataImage) -> Liveness:
        up = [b for b in image.cluster.brokers.values() if not b.fenced]
        return cls(
            frozenset(b.broker_id for b in up),
            frozenset(b.broker_id for b in up if b.in_controlled_shutdown),
        )

    @property
    def live(self) -> frozenset[int]:
        return self.live_or_shutting_down - self.shutting_down

    def is_live(self, broker_id: int) -> bool:
        return broker_id in self.live_or_shutting_down and broker_id not in self.shutting_down

    def is_live_or_shutting_down(self, broker_id: int) -> bool:
        return broker_id in self.live_or_shutting_down


def partition_state(partition: PartitionRegistration | None, liveness: Liveness) -> PartitionState:
    """NonExistent when absent; New before it ever had a leader (no leader and an empty ISR:
    created while none of its replicas was up, or loaded from ZooKeeper without a state znode);
    Online when its leader is live or shutting down (it still leads until it moves); Offline
    otherwise."""
    if partition is None:
        return PartitionState.NON_EXISTENT
    if partition.leader == NO_LEADER and not partition.isr:
        return PartitionState.NEW
    if liveness.is_live_or_shutting_down(partition.leader):
        return PartitionState.ONLINE
    return PartitionState.OFFLINE


def replica_state(
    partition: PartitionRegistration | None, broker_id: int, liveness: Liveness
) -> ReplicaState:
    """NonExistent when the broker does not host the partition; New while it is being added
    by a reassignment and has not joined the ISR yet on a live broker; Online on a broker that
    is up (shutting down included, as Kafka's isReplicaOnline with shutting-down brokers);
    Offline otherwise."""
    if partition is None or broker_id not in partition.replicas:
        return ReplicaState.NON_EXISTENT
    if not liveness.is_live_or_shutting_down(broker_id):
        return ReplicaState.OFFLINE
    if broker_id in partition.adding_replicas and broker_id not in partition.isr:
        return ReplicaState.NEW
    return ReplicaState.ONLINE


class TopicDeletionReplicas:
    """The deletion states of one topic's replicas (Kafka's TopicDeletionManager view).

    Starts with every replica Offline (the controller moved them there before sending
    StopReplica with delete); `transition` checks Kafka's table. The topic's records can be
    removed once `all_successful()`.
    """

    def __init__(self, replicas: Iterable[tuple[int, int]]) -> None:
        self._states: dict[tuple[int, int], ReplicaState] = {
            key: ReplicaState.OFFLINE for key in replicas
        }

    def state(self, partition_id: int, broker_id: int) -> ReplicaState:
        return self._states.get((partition_id, broker_id), ReplicaState.NON_EXISTENT)

    def transition(self, partition_id: int, broker_id: int, target: ReplicaState) -> None:
        key = (partition_id, broker_id)
        current = self.state(partition_id, broker_id)
        check_replica_transition(f"[partition {partition_id}, broker {broker_id}]", current, target)
        if target is ReplicaState.NON_EXISTENT:
            del self._states[key]
        else:
            self._states[key] = target

    def in_state(self, state: ReplicaState) -> list[tuple[int, int]]:
        return sorted(k for k, s in self._states.items() if s is state)

    def all_successful(self) -> bool:
        return all(s is ReplicaState.DELETION_SUCCESSFUL for s in self._states.values())
