"""PartitionChangeBuilder: the one way to change a partition, as Kafka's (no-op aware).

Callers say what they want (a target ISR, target replicas, an election) and `build()` returns
the PartitionChangeRecord that gets there, or None when nothing would change, so a retried or
redundant request writes no record and bumps no epoch. The leader is kept when it may stay;
otherwise elected in assignment order (election.py). The ISR never becomes empty: when its last
member goes, it stays as the only member (leaderless) so the partition can come back cleanly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum

from controller.election import offline_leader
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
    ) -> None:
        self._partition = partition
        self._topic_id = topic_id
        self._partition_id = partition_id
        self._acceptable = is_acceptable_leader
        self._target_isr: tuple[int, ...] = partition.isr
        self._target_replicas: tuple[int, ...] = partition.replicas
        self._election = Election.ONLINE

    def set_target_isr(self, isr: Sequence[int]) -> PartitionChangeBuilder:
        self._target_isr = tuple(isr)
        return self

    def set_target_replicas(self, replicas: Sequence[int]) -> PartitionChangeBuilder:
        self._target_replicas = tuple(replicas)
        return self

    def set_election(self, election: Election) -> PartitionChangeBuilder:
        self._election = election
        return self

    def _leader_may_stay(self, isr: tuple[int, ...]) -> bool:
        leader = self._partition.leader
        if leader == NO_LEADER or leader not in isr or leader not in self._target_replicas:
            return False
        if not self._acceptable(leader):
            return False
        if self._election is Election.PREFERRED:
            preferred = self._target_replicas[0] if self._target_replicas else NO_LEADER
            return leader == preferred or not (preferred in isr and self._acceptable(preferred))
        return True

    def _elect(self, isr: tuple[int, ...]) -> tuple[int, bool]:
        """(new leader, whether the election was unclean)."""
        if self._election is Election.PREFERRED and self._target_replicas:
            preferred = self._target_replicas[0]
            if preferred in isr and self._acceptable(preferred):
                return preferred, False
        leader = offline_leader(
            self._target_replicas,
            isr,
            self._acceptable,
            unclean_allowed=self._election is Election.UNCLEAN,
        )
        return leader, leader != NO_LEADER and leader not in isr

    def build(self) -> PartitionChangeRecord | None:
        current = self._partition
        isr = tuple(r for r in self._target_isr if r in self._target_replicas)
        if not isr:
            # Never shrink the ISR to empty: the last member stays (leaderless).
            isr = current.isr[:1] if current.isr else ()
        unclean = False
        if self._leader_may_stay(isr):
            leader = current.leader
        else:
            leader, unclean = self._elect(isr)
            if unclean:
                isr = (leader,)
        changed_leader = leader != current.leader
        changed_isr = isr != current.isr
        changed_replicas = self._target_replicas != current.replicas
        if not (changed_leader or changed_isr or changed_replicas):
            return None
        return PartitionChangeRecord(
            partition_id=self._partition_id,
            topic_id=self._topic_id,
            isr=isr if changed_isr else None,
            leader=leader if changed_leader else NO_LEADER_CHANGE,
            replicas=self._target_replicas if changed_replicas else None,
            leader_recovery_state=int(LeaderRecoveryState.RECOVERING) if unclean else -1,
        )
