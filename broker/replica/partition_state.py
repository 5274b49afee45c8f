"""One partition's replication state on this broker (Kafka's Partition, minus the log): pure.

Holds the registration the controller decided (replicas, ISR, leader, leader epoch, partition
epoch), the log end offset of every replica as far as the leader knows it, and the high
watermark. The HW is the minimum LEO over the ISR and only moves forward; it does not move
while the ISR is smaller than min(min.insync.replicas, replication factor) (Kafka since 3.7).
With one replica the HW trivially follows the leader's LEO, but through the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from protocol.names import TopicPartition

UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """A leader/ISR decision for one partition, from metadata (KRaft) or a LeaderAndIsr request."""

    tp: TopicPartition
    topic_id: str
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    partition_epoch: int = 0


@dataclass(slots=True)
class PartitionState:
    tp: TopicPartition
    local_broker_id: int
    topic_id: str = ""
    leader: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    high_watermark: int = 0
    min_insync_replicas: int = 1
    replica_leos: dict[int, int] = field(default_factory=dict)

    @property
    def is_leader(self) -> bool:
        return self.leader == self.local_broker_id

    @property
    def local_leo(self) -> int:
        return self.replica_leos.get(self.local_broker_id, UNKNOWN_OFFSET)

    def is_newer(self, change: PartitionChange) -> bool:
        """Kafka skips a change whose leader epoch is older than the one it has; an equal epoch
        with a newer partition epoch (ISR change) is still applied."""
        if change.leader_epoch != self.leader_epoch:
            return change.leader_epoch > self.leader_epoch
        return change.partition_epoch > self.partition_epoch

    def apply(self, change: PartitionChange, local_leo: int) -> None:
        """Take the registration in `change`; `local_leo` is this broker's log end offset."""
        becoming_leader = change.leader == self.local_broker_id and not self.is_leader
        self.topic_id = change.topic_id
        self.leader = change.leader
        self.leader_epoch = change.leader_epoch
        self.partition_epoch = change.partition_epoch
        self.replicas = change.replicas
        self.isr = change.isr
        if becoming_leader:
            # A new leader knows nothing of its followers' positions yet (Kafka resets them).
            self.replica_leos = {}
        self.replica_leos[self.local_broker_id] = local_leo
        if self.high_watermark > local_leo:
            self.high_watermark = local_leo
        if self.is_leader:
            self.maybe_advance_high_watermark()

    def update_local_leo(self, leo: int) -> bool:
        """After an append; True when the HW moved."""
        self.replica_leos[self.local_broker_id] = leo
        return self.maybe_advance_high_watermark() if self.is_leader else False

    def update_follower_leo(self, broker_id: int, leo: int) -> bool:
        """A follower fetched from `leo`; True when the HW moved."""
        self.replica_leos[broker_id] = leo
        return self.maybe_advance_high_watermark()

    def effective_min_isr(self) -> int:
        return min(self.min_insync_replicas, max(len(self.replicas), 1))

    def maybe_advance_high_watermark(self) -> bool:
        if not self.is_leader or len(self.isr) < self.effective_min_isr():
            return False
        leos = [self.replica_leos.get(b, UNKNOWN_OFFSET) for b in self.isr]
        if not leos or min(leos) <= self.high_watermark:
            return False
        self.high_watermark = min(leos)
        return True

    def restore_high_watermark(self, hw: int, local_leo: int) -> None:
        """At start-up from the HW checkpoint, never past the local log end."""
        self.high_watermark = max(0, min(hw, local_leo))
