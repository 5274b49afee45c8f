"""PartitionChangeBuilder: the one way to change a partition, as Kafka's (no-op aware).

Callers say what they want (a target ISR, target replicas, replicas being added or removed,
an election, a leader recovery state) and `build()` returns the PartitionChangeRecord that gets
there, or None when nothing would change, so a retried or redundant request writes no record
and bumps no epoch. Steps, in Kafka's order:

1. complete a reassignment when every adding replica is in the target ISR (the removing ones
   then leave the replicas and the ISR);
2. elect when the leader may not stay (it left the ISR or the replicas, it is not acceptable,
   or a preferred election wants the first replica), walking the assignment order;
   an unclean election makes the ISR just the new leader, RECOVERING;
3. bump the leader epoch (by naming the current leader) when replicas went away, and when the
   ISR shrank unless told otherwise: a ZK-mode broker skips a LeaderAndIsr whose leader epoch is
   not newer, so a controller-made shrink must bump it (AlterPartition's own shrinks do not);
4. never write an empty ISR: an empty target leaves the ISR as it is, so when the last member
   dies it stays in the ISR, leaderless, and the partition can come back cleanly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum

from controller.election import offline_partition_leader
from protocol.metadata.image import PartitionRegistration
from protocol.metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    LeaderRecoveryState,
    PartitionChangeRecord,
)


class Election(Enum):
    """Kafka's PartitionChangeBuilder.Election."""

    ONLINE = "online"
    """Keep a good leader; elect one (clean) only when there is none."""
    PREFERRED = "preferred"
    """Move leadership to the preferred replica when it is a good leader."""
    UNCLEAN = "unclean"
    """As ONLINE, but an out-of-sync live replica may be elected when no in-sync one is."""


class PartitionChangeBuilder:
    def __init__(
        self,
        partition: PartitionRegistration,
        topic_id: str,
        partition_id: int,
        is_acceptable_leader: Callable[[int], bool],
        *,
        bump_leader_epoch_on_isr_shrink: bool = True,
    ) -> None:
        self._partition = partition
        self._topic_id = topic_id
        self._partition_id = partition_id
        self._acceptable = is_acceptable_leader
        self._bump_on_shrink = bump_leader_epoch_on_isr_shrink
        self._target_isr: tuple[int, ...] = partition.isr
        self._target_replicas: tuple[int, ...] = partition.replicas
        self._target_removing: tuple[int, ...] = partition.removing_replicas
        self._target_adding: tuple[int, ...] = partition.adding_replicas
        self._target_recovery = LeaderRecoveryState(partition.leader_recovery_state)
        self._election = Election.ONLINE

    def set_target_isr(self, isr: Sequence[int]) -> PartitionChangeBuilder:
        self._target_isr = tuple(isr)
        return self

    def set_target_replicas(self, replicas: Sequence[int]) -> PartitionChangeBuilder:
        self._target_replicas = tuple(replicas)
        return self

    def set_target_removing(self, replicas: Sequence[int]) -> PartitionChangeBuilder:
        self._target_removing = tuple(replicas)
        return self

    def set_target_adding(self, replicas: Sequence[int]) -> PartitionChangeBuilder:
        self._target_adding = tuple(replicas)
        return self

    def set_election(self, election: Election) -> PartitionChangeBuilder:
        self._election = election
        return self

    def set_target_leader_recovery_state(
        self, state: LeaderRecoveryState
    ) -> PartitionChangeBuilder:
        self._target_recovery = state
        return self

    def _complete_reassignment(self) -> None:
        removing, adding = self._target_removing, self._target_adding
        if not removing and not adding:
            return
        isr = tuple(r for r in self._target_isr if r not in removing)
        if not isr or any(r not in isr for r in adding):
            return
        self._target_isr = isr
        self._target_replicas = tuple(r for r in self._target_replicas if r not in removing)
        self._target_removing = ()
        self._target_adding = ()

    def _valid(self, replica: int, isr: tuple[int, ...]) -> bool:
        return replica in isr and replica in self._target_replicas and self._acceptable(replica)

    def _should_elect(self, isr: tuple[int, ...]) -> bool:
        leader = self._partition.leader
        if not self._valid(leader, isr):
            return True
        return self._election is Election.PREFERRED and leader != self._preferred()

    def _preferred(self) -> int:
        return self._target_replicas[0] if self._target_replicas else NO_LEADER

    def _elect(self, isr: tuple[int, ...]) -> tuple[int, bool]:
        """(new leader, whether the election was unclean), as Kafka's electLeader."""
        current = self._partition.leader
        if self._election is Election.PREFERRED and self._valid(self._preferred(), isr):
            return self._preferred(), False
        if self._valid(current, isr):
            return current, False
        clean = offline_partition_leader(
            self._target_replicas, isr, self._acceptable, unclean=False
        )
        if clean != NO_LEADER or self._election is not Election.UNCLEAN:
            return clean, False
        unclean = offline_partition_leader(
            self._target_replicas, (), self._acceptable, unclean=True
        )
        return unclean, unclean != NO_LEADER

    def build(self) -> PartitionChangeRecord | None:
        current = self._partition
        self._complete_reassignment()
        isr = tuple(r for r in self._target_isr if r in self._target_replicas)
        leader = current.leader
        recovery = self._target_recovery
        if self._should_elect(isr):
            leader, unclean = self._elect(isr)
            if unclean:
                isr = (leader,)
                recovery = LeaderRecoveryState.RECOVERING
        if not isr:
            isr = current.isr  # never an empty ISR: its last members stay, leaderless
        record_leader = NO_LEADER_CHANGE if leader == current.leader else leader
        if record_leader == NO_LEADER_CHANGE and leader != NO_LEADER:
            replicas_left = any(r not in self._target_replicas for r in current.replicas)
            isr_shrank = any(r not in isr for r in current.isr)
            if replicas_left or (self._bump_on_shrink and isr_shrank):
                record_leader = leader  # same leader, new leader epoch
        changed_isr = isr != current.isr
        changed_replicas = self._target_replicas != current.replicas
        changed_removing = self._target_removing != current.removing_replicas
        changed_adding = self._target_adding != current.adding_replicas
        changed_recovery = recovery != current.leader_recovery_state
        if not (
            record_leader != NO_LEADER_CHANGE
            or changed_isr
            or changed_replicas
            or changed_removing
            or changed_adding
            or changed_recovery
        ):
            return None
        return PartitionChangeRecord(
            partition_id=self._partition_id,
            topic_id=self._topic_id,
            isr=isr if changed_isr else None,
            leader=record_leader,
            replicas=self._target_replicas if changed_replicas else None,
            removing_replicas=self._target_removing if changed_removing else None,
            adding_replicas=self._target_adding if changed_adding else None,
            leader_recovery_state=int(recovery) if changed_recovery else -1,
        )
