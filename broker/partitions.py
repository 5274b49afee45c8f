"""The partitions this broker hosts (Kafka's ReplicaManager, the part that owns partitions).

`apply_leader_and_isr(deletes, leaders, followers)` is the one entry point for leadership
changes, in Kafka's order: stop and delete removed partitions, then make leaders, then make
followers. High watermarks are checkpointed periodically
(replica.high.watermark.checkpoint.interval.ms) and at shutdown, as Kafka's ReplicaManager
does, and only when one changed since the last checkpoint. In standalone/KRaft mode the metadata publisher
derives the changes from committed metadata records; in ZK mode `broker.leader_and_isr` feeds
LeaderAndIsr requests through `become` (the same per-partition step) and adds the fetchers. Changes whose leader epoch is not newer are skipped.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from broker.replica.fetch_session import PartitionRequest, PartitionResult
from broker.replica.leader import CommittedIsr
from broker.replica.partition_state import (
    DEFAULT_REPLICA_LAG_TIME_MAX_MS,
    PartitionChange,
    PartitionState,
)
from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.fetch import FetchPartitionResponse
from protocol.names import TopicPartition
from storage.config import LogConfig

if TYPE_CHECKING:
    from storage.log import Log
    from storage.log_manager import LogManager

log = structlog.get_logger("broker.partitions")

TopicConfigFn = Callable[[str], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class IdleFollowerRead:
    """The last answer to a follower that fetched at our LEO with nothing to read (the leader's
    side of an idle fetch session). While the same request object comes back (a KIP-227 session
    keeps it until the follower sends a new position), in the same leader epoch, with the HW and
    log start unchanged, the answer is this very object: no read, no new response."""

    request: PartitionRequest
    leader_epoch: int
    response: FetchPartitionResponse
    summary: PartitionResult
    """What the fetch session compares (`FetchContext.complete`)."""


@dataclass(slots=True, eq=False)
class Partition:
    state: PartitionState
    log: Log
    idle_reads: dict[int, IdleFollowerRead] = field(default_factory=dict)
    """By follower id (`IdleFollowerRead`); only a cache: any entry may be dropped."""

    @property
    def tp(self) -> TopicPartition:
        return self.state.tp


def log_leadership_applied(state: PartitionState, previous_leader: int) -> None:
    """The catalogued "partition leadership applied" (protocol.telemetry)."""
    log.info(
        "partition leadership applied",
        topic=state.tp.topic,
        partition=state.tp.partition,
        role_in_partition="leader" if state.is_leader else "follower",
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        previous_leader=previous_leader,
        isr=list(state.isr),
    )


def log_isr_change(state: PartitionState, old_isr: tuple[int, ...], origin: str) -> None:
    """The catalogued "isr shrink" / "isr expand" of a leader whose committed ISR changed
    (both, when members left and others joined at once)."""
    new_isr = state.isr
    fields = {
        "topic": state.tp.topic,
        "partition": state.tp.partition,
        "leader_epoch": state.leader_epoch,
        "old_isr": list(old_isr),
        "new_isr": list(new_isr),
        "origin": origin,
        "partition_epoch": state.partition_epoch,
    }
    if any(r not in new_isr for r in old_isr):
        log.info("isr shrink", **fields)
    if any(r not in old_isr for r in new_isr):
        log.info("isr expand", **fields)


class PartitionManager:
    def __init__(
        self,
        log_manager: LogManager,
        node_id: int,
        topic_config: TopicConfigFn,
        *,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        clock: Clock = SYSTEM_CLOCK,
        on_topic_gone: Callable[[str], None] | None = None,
    ) -> None:
        self.log_manager = log_manager
        self.on_topic_gone = on_topic_gone
        """Called with a topic once none of its partitions is hosted here (its metrics go)."""
        self._hosted_per_topic: collections.Counter[str] = collections.Counter()
        self.clock = clock
        self.node_id = node_id
        self.topic_config = topic_config
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        self._checkpointed_hw: dict[TopicPartition, int] | None = None
        self._last_checkpoint: dict[TopicPartition, int] | None = None
        """What `checkpoint_high_watermarks` wrote last."""

    def get(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def leader(self, tp: TopicPartition) -> Partition:
        """The partition if this broker leads it; KafkaError otherwise."""
        partition = self.partitions.get(tp)
        if partition is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"this server does not host topic-partition {tp}",
            )
        if not partition.state.is_leader:
            raise KafkaError(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                f"broker {self.node_id} is not the leader of {tp} "
                f"(leader: {partition.state.leader})",
            )
        return partition

    def _log_config(self, topic: str) -> tuple[LogConfig, int]:
        typed = dict(self.topic_config(topic))
        return LogConfig.from_topic_configs(typed), int(typed.get("min.insync.replicas", 1))

    def apply_leader_and_isr(
        self,
        *,
        deletes: Iterable[TopicPartition] = (),
        leaders: Iterable[PartitionChange] = (),
        followers: Iterable[PartitionChange] = (),
    ) -> list[TopicPartition]:
        """Apply leadership changes; returns the partitions whose state changed."""
        changed: list[TopicPartition] = []
        for tp in deletes:
            if self._forget(tp) or self.log_manager.get_log(tp):
                self.log_manager.delete_log(tp)
                changed.append(tp)
        n_leaders = n_followers = 0
        for change in leaders:
            if self._become(change):
                changed.append(change.tp)
                n_leaders += 1
        for change in followers:
            if self._become(change):
                changed.append(change.tp)
                n_followers += 1
        if changed:
            log.info(
                "applied partition changes",
                deleted=len(changed) - n_leaders - n_followers,
                leaders=n_leaders,
                followers=n_followers,
            )
        # The HW checkpoint is left to the periodic task and shutdown, as Kafka's (see
        # broker.leader_and_isr).
        return changed

    def become(self, change: PartitionChange) -> bool:
        """makeLeader / makeFollower for one partition; False when the change is not newer
        than our state."""
        return self._become(change)

    def stop(self, tp: TopicPartition, *, delete: bool) -> bool:
        """StopReplica for one partition: with `delete`, forget it and delete its log."""
        if not delete:
            return tp in self.partitions
        removed = self._forget(tp)
        if self.log_manager.get_log(tp) is not None:
            self.log_manager.delete_log(tp)
            removed = True
        return removed

    def _forget(self, tp: TopicPartition) -> bool:
        """Drop `tp` from the hosted partitions; True if it was there."""
        if self.partitions.pop(tp, None) is None:
            return False
        left = self._hosted_per_topic[tp.topic] = self._hosted_per_topic[tp.topic] - 1
        if left <= 0:
            del self._hosted_per_topic[tp.topic]
            if self.on_topic_gone is not None:
                self.on_topic_gone(tp.topic)
        return True

    def _become(self, change: PartitionChange) -> bool:
        partition = self.partitions.get(change.tp)
        if partition is not None and not partition.state.is_newer(change):
            return False
        if partition is None:
            config, min_isr = self._log_config(change.tp.topic)
            the_log = self.log_manager.get_or_create_log(change.tp, config, change.topic_id)
            state = PartitionState(
                change.tp,
                self.node_id,
                min_insync_replicas=min_isr,
                replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                clock_ms=self.clock.monotonic_ms,
            )
            if self._checkpointed_hw is None:
                self._checkpointed_hw = dict(self.log_manager.read_high_watermarks())
            hw = self._checkpointed_hw.pop(change.tp, 0)
            state.restore_high_watermark(hw, the_log.log_end_offset)
            partition = Partition(state, the_log)
            self.partitions[change.tp] = partition
            self._hosted_per_topic[change.tp.topic] += 1
        state = partition.state
        previous_leader, previous_epoch = state.leader, state.leader_epoch
        was_leader, old_isr = state.is_leader, state.isr
        # An ISR this leader proposed may arrive in metadata before the AlterPartition answer.
        pending = state.isr_state
        proposed = None if isinstance(pending, CommittedIsr) else pending.proposal.new_isr
        state.apply(change, partition.log.log_end_offset)
        if change.leader_epoch != previous_epoch:
            log_leadership_applied(state, previous_leader)
        if was_leader and state.is_leader and state.isr != old_isr:
            origin = "alter_partition" if state.isr == proposed else "controller"
            log_isr_change(state, old_isr, origin)
        return True

    def update_topic_config(self, topic: str) -> int:
        """Give every live log of `topic` its current config; returns how many were updated."""
        config, min_isr = self._log_config(topic)
        n = 0
        for tp, partition in self.partitions.items():
            if tp.topic == topic:
                partition.log.update_config(config)
                partition.state.min_insync_replicas = min_isr
                n += 1
        return n

    def high_watermarks(self) -> dict[TopicPartition, int]:
        return {tp: p.state.high_watermark for tp, p in self.partitions.items()}

    def checkpoint_high_watermarks(self) -> bool:
        """Write the HW checkpoint unless no HW changed since the last one; True if written."""
        hws = self.high_watermarks()
        if hws == self._last_checkpoint:
            return False
        self.log_manager.checkpoint_high_watermarks(hws)
        self._last_checkpoint = hws
        return True
