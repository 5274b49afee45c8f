"""Kafka's partition and replica state machines (ZK mode), as pure functions.

Kafka's ZK controller keeps these states in memory and moves them with handleStateChanges; here
a state is derived from the replayed image plus broker liveness, so the active controller, a
standby and a freshly failed-over controller agree on it without storing it. The transition
tables are Kafka's (PartitionState.validPreviousStates, ReplicaState.validPreviousStates) and
`check_*_transition` refuse anything else, naming both states.

The operations go through the machines where Kafka's controller does (`StateChangeLog`, one
per operation, result in `ControllerResult.state_changes`, logged by the driver after commit):
CreateTopics / CreatePartitions (onNewPartitionCreation), BrokerChange (onBrokerFailure,
onBrokerStartup, triggerOnlinePartitionStateChange), ControlledShutdown, ElectLeaders and the
rebalance (onReplicaElection), reassignment steps in AlterPartitionReassignments and
AlterPartition (onPartitionReassignment: `reassignment_states`) and DeleteTopics (Offline then
NonExistent). The current state is derived from the image before the operation, the target is
Kafka's for that step and the reached state is derived from the partition the records produce;
an invalid transition raises `IllegalStateTransition` before any record is written (a bug).

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


# -- the state-change log of one operation -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class StateChange:
    """One state change an operation made, as a line of Kafka's state-change log.

    `replica` is None for a partition change. `reached` is False when the change was attempted
    but failed (Kafka's logFailedStateChange: e.g. no leader could be elected for an Offline
    partition, which then stays Offline)."""

    topic: str
    partition: int
    replica: int | None
    current: PartitionState | ReplicaState
    target: PartitionState | ReplicaState
    reached: bool = True

    @property
    def what(self) -> str:
        if self.replica is None:
            return f"{self.topic}-{self.partition}"
        return f"[Topic={self.topic},Partition={self.partition},Replica={self.replica}]"

    @property
    def transition(self) -> str:
        return f"{self.current.value}->{self.target.value}"


class StateChangeLog:
    """Kafka's PartitionStateMachine / ReplicaStateMachine handleStateChanges, over derived
    states: an operation says which state each partition or replica it touches is in (derived
    from the image before it, `partition_state` / `replica_state`) and which state Kafka's
    controller would move it to at that step; the move is checked against Kafka's tables (an
    invalid one is a bug in the operation: `IllegalStateTransition` naming the partition or
    replica and both states, which fails the whole operation before any record is written)
    and kept for the driver to log once the operation's records are committed."""

    def __init__(self) -> None:
        self.changes: list[StateChange] = []

    def partition(
        self,
        topic: str,
        partition: int,
        current: PartitionState,
        target: PartitionState,
        reached: PartitionState | None = None,
        *,
        failed: bool = False,
    ) -> PartitionState:
        """Move a partition from `current` to `target`; `reached` is the state the records
        produce (derived from the partition after the change): `target`, or `current` when
        the change failed; `failed` marks a failed Online -> Online change (an election that
        found no leader, so the current one stays). Returns the state it is in afterwards."""
        check_partition_transition(f"{topic}-{partition}", current, target)
        if reached is None:
            reached = current if failed else target
        if reached is not target and reached is not current:
            raise IllegalStateTransition(
                f"Partition {topic}-{partition} ends in {reached.value} state after a change "
                f"from {current.value} to {target.value} state"
            )
        ok = reached is target and not failed
        self.changes.append(StateChange(topic, partition, None, current, target, ok))
        return reached

    def replica(
        self,
        topic: str,
        partition: int,
        replica: int,
        current: ReplicaState,
        target: ReplicaState,
    ) -> ReplicaState:
        check_replica_transition(
            f"[Topic={topic},Partition={partition},Replica={replica}]", current, target
        )
        self.changes.append(StateChange(topic, partition, replica, current, target))
        return target


def reassignment_states(
    sm: StateChangeLog,
    topic: str,
    partition: int,
    before: PartitionRegistration,
    after: PartitionRegistration,
    liveness: Liveness,
) -> None:
    """The replica (and partition) state changes of a reassignment step, as Kafka's
    onPartitionReassignment: replicas being added NonExistent -> New when it starts; at its end
    (or when it is cancelled) the target replicas -> Online, a leader not among them moved
    (OnlinePartition with the reassign election) and the removed replicas through Kafka's
    stopRemovedReplicasOfReassignedPartition: Offline -> DeletionStarted -> DeletionSuccessful
    -> NonExistent. Nothing when `after` changes none of replicas / adding / removing."""
    if (
        before.replicas == after.replicas
        and before.adding_replicas == after.adding_replicas
        and before.removing_replicas == after.removing_replicas
    ):
        return
    for r in after.adding_replicas:
        if r not in before.replicas:
            sm.replica(topic, partition, r, ReplicaState.NON_EXISTENT, ReplicaState.NEW)
    if after.adding_replicas or after.removing_replicas:
        return  # started (or still going): the rest happens when it completes
    for r in after.replicas:
        sm.replica(topic, partition, r, replica_state(before, r, liveness), ReplicaState.ONLINE)
    if after.leader != before.leader:
        sm.partition(
            topic,
            partition,
            partition_state(before, liveness),
            PartitionState.ONLINE,
            partition_state(after, liveness),
        )
    for r in before.replicas:
        if r not in after.replicas:
            state = sm.replica(
                topic, partition, r, replica_state(before, r, liveness), ReplicaState.OFFLINE
            )
            for target in (
                ReplicaState.DELETION_STARTED,
                ReplicaState.DELETION_SUCCESSFUL,
                ReplicaState.NON_EXISTENT,
            ):
                state = sm.replica(topic, partition, r, state, target)
