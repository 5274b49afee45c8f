"""Leader election algorithms, as Kafka's PartitionLeaderElectionAlgorithms (ZK mode).

Every algorithm walks the replicas in assignment order, so the preferred (first) replica wins
whenever it can, and returns NO_LEADER when no replica qualifies (Kafka's None: the state change
fails and the partition keeps what it had). `live` is the set of brokers a leader may be on:
registered, unfenced and not shutting down (`state_machines.Liveness.live`).

`elect_*` wrap an algorithm with the ISR Kafka's PartitionStateMachine writes next to the new
leader (leaderForOffline, leaderForReassign, leaderForPreferredReplica,
leaderForControlledShutdown); the PartitionChangeBuilder uses the algorithms for KRaft-style
changes.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from protocol.metadata.image import PartitionRegistration
from protocol.metadata.records import NO_LEADER


@dataclass(frozen=True, slots=True)
class NewPartitionLeadership:
    leader: int
    isr: tuple[int, ...]


def new_partition_leadership(
    replicas: Sequence[int], is_live: Callable[[int], bool]
) -> NewPartitionLeadership:
    """A new partition's ISR is its live replicas and its leader the first of them in
    assignment order (NO_LEADER and an empty ISR when none is live)."""
    isr = tuple(r for r in replicas if is_live(r))
    return NewPartitionLeadership(leader=isr[0] if isr else NO_LEADER, isr=isr)


def offline_partition_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Callable[[int], bool],
    *,
    unclean: bool,
) -> int:
    """Kafka's offlinePartitionLeaderElection: the first live replica in the ISR; when none and
    unclean election is enabled, the first live replica at all; else NO_LEADER."""
    for replica in assignment:
        if live(replica) and replica in isr:
            return replica
    if unclean:
        for replica in assignment:
            if live(replica):
                return replica
    return NO_LEADER


def offline_leader(
    replicas: Sequence[int],
    isr: Collection[int],
    is_live: Callable[[int], bool],
    *,
    unclean_allowed: bool,
) -> int:
    """Alias of `offline_partition_leader` (the name issue 2 used)."""
    return offline_partition_leader(replicas, isr, is_live, unclean=unclean_allowed)


def reassign_partition_leader(
    target_replicas: Sequence[int], isr: Collection[int], live: Callable[[int], bool]
) -> int:
    """Kafka's reassignPartitionLeaderElection: the first target replica that is live and in
    the ISR (never unclean)."""
    return next((r for r in target_replicas if live(r) and r in isr), NO_LEADER)


def preferred_replica_leader(
    assignment: Sequence[int], isr: Collection[int], live: Callable[[int], bool]
) -> int:
    """Kafka's preferredReplicaPartitionLeaderElection: the first replica of the assignment
    if it is live and in the ISR; nobody else."""
    if assignment and live(assignment[0]) and assignment[0] in isr:
        return assignment[0]
    return NO_LEADER


def controlled_shutdown_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live_or_shutting_down: Callable[[int], bool],
    shutting_down: Collection[int],
) -> int:
    """Kafka's controlledShutdownPartitionLeaderElection: the first replica that is live, in
    the ISR and not shutting down."""
    return next(
        (r for r in assignment if live_or_shutting_down(r) and r in isr and r not in shutting_down),
        NO_LEADER,
    )


@dataclass(frozen=True, slots=True)
class ElectionResult:
    """A successful election: the new leader, the ISR written with it, and whether it was
    unclean (the leader was not in the ISR: LeaderRecoveryState RECOVERING)."""

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def elect_offline(
    partition: PartitionRegistration, live: Callable[[int], bool], *, unclean: bool
) -> ElectionResult | None:
    """Kafka's leaderForOffline: a clean leader keeps the live part of the ISR; an unclean one
    becomes the whole ISR."""
    leader = offline_partition_leader(partition.replicas, partition.isr, live, unclean=unclean)
    if leader == NO_LEADER:
        return None
    if leader in partition.isr:
        return ElectionResult(leader, tuple(r for r in partition.isr if live(r)))
    return ElectionResult(leader, (leader,), unclean=True)


def elect_reassign(
    partition: PartitionRegistration, target_replicas: Sequence[int], live: Callable[[int], bool]
) -> ElectionResult | None:
    """Kafka's leaderForReassign: the ISR is unchanged."""
    leader = reassign_partition_leader(target_replicas, partition.isr, live)
    return None if leader == NO_LEADER else ElectionResult(leader, partition.isr)


def elect_preferred(
    partition: PartitionRegistration, live: Callable[[int], bool]
) -> ElectionResult | None:
    """Kafka's leaderForPreferredReplica: the ISR is unchanged."""
    leader = preferred_replica_leader(partition.replicas, partition.isr, live)
    return None if leader == NO_LEADER else ElectionResult(leader, partition.isr)


def elect_controlled_shutdown(
    partition: PartitionRegistration,
    live_or_shutting_down: Callable[[int], bool],
    shutting_down: Collection[int],
) -> ElectionResult | None:
    """Kafka's leaderForControlledShutdown: the shutting-down brokers leave the ISR (the new
    leader is in it, so it is never empty)."""
    leader = controlled_shutdown_leader(
        partition.replicas, partition.isr, live_or_shutting_down, shutting_down
    )
    if leader == NO_LEADER:
        return None
    return ElectionResult(leader, tuple(r for r in partition.isr if r not in shutting_down))
