"""Applying leadership changes to the local partitions, fetchers included (Kafka's
ReplicaManager.becomeLeaderOrFollower / applyDelta, the part both metadata paths share).

ZK mode feeds it from LeaderAndIsr requests (broker.leader_and_isr), Raft mode from the
metadata image's local changes (broker.metadata_publisher): one code path, in Kafka's order:
deletes (stop fetching, drop the partition, delete its log), then makeLeaders (stop fetching,
take the registration, wake waiting produces and fetches), then makeFollowers (take the
registration, stop the old fetcher, truncate by leader epoch as
`FollowerFetchState.become_follower` decides, fetch from the new leader when its endpoint is
known: `live_brokers` maps broker ids to their inter-broker endpoint).

`on_leadership(elected, resigned)` (optional, set by the broker's wiring) is told after each
change set which partitions this broker became leader of and which it stopped leading, with
the leader epoch (None for a deleted partition): the group coordinator loads and unloads
`__consumer_offsets` partitions from it (Kafka's onElection / onResignation).

A follower whose leader is not in `live_brokers` (not registered yet, or no leader) waits in
`waiting_for_leader` with its fetch state; `resume_followers(live_brokers)` (Raft mode: on
every change to the registered brokers) starts its fetcher once the leader is known, as
KRaft's applyDelta would on the next image. A later change to the partition replaces the
wait.

`applier_for(core)` builds the one applier of a broker whose metadata feed replicates (ZK and
Raft mode, broker.metadata_feeds), on the broker's fetchers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import structlog

from broker.fetcher import ReplicaFetcherManager, SourceBroker, truncate_log
from broker.partitions import PartitionManager
from broker.replica.follower import FollowerFetchState
from broker.replica.partition_state import PartitionChange
from protocol.config_defs import ConfigError
from protocol.errors import ErrorCode
from protocol.names import TopicPartition

if TYPE_CHECKING:
    from broker.partitions import Partition
    from broker.ports import BrokerCore

log = structlog.get_logger("broker.partition_changes")

LeadershipListener = Callable[
    [Sequence[tuple[TopicPartition, int]], Sequence[tuple[TopicPartition, int | None]]], None
]


class PartitionChangeApplier:
    def __init__(
        self,
        *,
        node_id: int,
        partitions: PartitionManager,
        fetchers: ReplicaFetcherManager,
        on_partition_change: Callable[[TopicPartition], None] = lambda tp: None,
        truncate_to_hw_on_become_follower: bool = False,
    ) -> None:
        self.node_id = node_id
        self.partitions = partitions
        self.fetchers = fetchers
        self.on_partition_change = on_partition_change
        self.truncate_to_hw_on_become_follower = truncate_to_hw_on_become_follower
        self.waiting_for_leader: dict[TopicPartition, tuple[int, FollowerFetchState]] = {}
        """Followers without a fetcher: partition -> (leader id, fetch state to start)."""
        self.on_leadership: LeadershipListener | None = None

    def apply_partition_changes(
        self,
        *,
        deletes: Iterable[TopicPartition] = (),
        leaders: Iterable[PartitionChange] = (),
        followers: Iterable[PartitionChange] = (),
        live_brokers: Mapping[int, SourceBroker],
    ) -> dict[TopicPartition, int]:
        """Deletes, then leaders, then followers; returns an error code per partition
        (0: applied)."""
        errors: dict[TopicPartition, int] = {}
        for tp in deletes:
            errors[tp] = self.delete(tp)
        elected = []
        for change in leaders:
            errors[change.tp] = self.make_leader(change)
            if errors[change.tp] == 0:
                elected.append((change.tp, change.leader_epoch))
        resigned: list[tuple[TopicPartition, int | None]] = []
        for change in followers:
            errors[change.tp] = self.make_follower(change, live_brokers)
            resigned.append((change.tp, change.leader_epoch))
        if self.on_leadership is not None and (elected or resigned):
            self.on_leadership(elected, resigned)
        return errors

    def check(self, change: PartitionChange) -> ErrorCode:
        """INCONSISTENT_TOPIC_ID when the local log belongs to another topic id,
        STALE_CONTROLLER_EPOCH when the change is not newer than our state, else NONE."""
        partition = self.partitions.get(change.tp)
        log_topic_id = None
        if partition is not None:
            log_topic_id = partition.state.topic_id or partition.log.topic_id
        else:
            existing = self.partitions.log_manager.get_log(change.tp)
            log_topic_id = existing.topic_id if existing is not None else None
        if log_topic_id and change.topic_id and log_topic_id != change.topic_id:
            log.error(
                "partition change for another topic id",
                topic_partition=str(change.tp),
                log_topic_id=log_topic_id,
                request_topic_id=change.topic_id,
            )
            return ErrorCode.INCONSISTENT_TOPIC_ID
        if partition is not None and not partition.state.is_newer(change):
            return ErrorCode.STALE_CONTROLLER_EPOCH
        return ErrorCode.NONE

    def resume_followers(self, live: Mapping[int, SourceBroker]) -> list[TopicPartition]:
        """Start the fetchers of waiting followers whose leader is now in `live`."""
        started = []
        for tp, (leader, state) in list(self.waiting_for_leader.items()):
            source = live.get(leader)
            if source is None or source.port <= 0:
                continue
            del self.waiting_for_leader[tp]
            self.fetchers.add_partition(tp, source, state)
            started.append(tp)
        if started:
            log.info(
                "followers fetching from a leader that became known",
                partitions=len(started),
                sample=[str(tp) for tp in started[:10]],
            )
        return started

    def delete(self, tp: TopicPartition) -> int:
        self.waiting_for_leader.pop(tp, None)
        if self.on_leadership is not None:
            self.on_leadership([], [(tp, None)])
        self.fetchers.remove_partitions([tp])
        try:
            self.partitions.stop(tp, delete=True)
        except Exception as exc:  # the next full change set tries again
            return storage_error(tp, exc)
        self.on_partition_change(tp)
        return 0

    def make_leader(self, change: PartitionChange) -> int:
        self.waiting_for_leader.pop(change.tp, None)
        try:
            self.fetchers.remove_partitions([change.tp])
            self.partitions.become(change)
        except Exception as exc:
            return storage_error(change.tp, exc)
        self.on_partition_change(change.tp)
        return 0

    def make_follower(self, change: PartitionChange, live: Mapping[int, SourceBroker]) -> int:
        if self._fetching_at(change):
            # Only the ISR or the partition epoch changed (a failover shrinks thousands of
            # ISRs led elsewhere): the fetch goes on as it is, as Kafka's makeFollower starts
            # fetchers only for a new leader epoch.
            try:
                self.partitions.become(change)
            except Exception as exc:
                return storage_error(change.tp, exc)
            self.on_partition_change(change.tp)
            return 0
        self.waiting_for_leader.pop(change.tp, None)
        try:
            self.partitions.become(change)
            partition = self.partitions.get(change.tp)
            assert partition is not None
            state = FollowerFetchState.become_follower(
                topic_id=change.topic_id,
                leader_epoch=change.leader_epoch,
                log=partition.log,
                high_watermark=partition.state.high_watermark,
                current=self.fetchers.state_of(change.tp),
                truncate_to_hw_on_become_follower=self.truncate_to_hw_on_become_follower,
            )
            self.fetchers.remove_partitions([change.tp])
            if state.truncate_to is not None:
                _truncate(partition, state.truncate_to)
                state.truncation_done(partition.log)
            source = live.get(change.leader)
            if source is not None and source.port > 0:
                self.fetchers.add_partition(change.tp, source, state)
            else:
                self.waiting_for_leader[change.tp] = (change.leader, state)
                log.info(
                    "follower without a live leader; fetching once it is known",
                    topic_partition=str(change.tp),
                    leader=change.leader,
                )
        except Exception as exc:
            return storage_error(change.tp, exc)
        self.on_partition_change(change.tp)
        return 0

    def _fetching_at(self, change: PartitionChange) -> bool:
        """True when this broker follows `change.tp` from `change.leader` at its leader epoch
        already, with a fetcher running."""
        partition = self.partitions.get(change.tp)
        if partition is None:
            return False
        state = partition.state
        return (
            not state.is_leader
            and state.leader == change.leader
            and state.leader_epoch == change.leader_epoch
            and self.fetchers.source_of(change.tp) == change.leader
        )


def applier_for(core: BrokerCore) -> PartitionChangeApplier:
    """The applier of a broker whose replicas follow leaders, telling its group coordinator of
    leadership changes. ConfigError when the broker has no fetchers (no transport given)."""
    config = core.config
    if core.fetchers is None:
        raise ConfigError(
            f"metadata.mode={config.metadata_mode}: the broker needs a transport to reach leaders"
        )
    applier = PartitionChangeApplier(
        node_id=config.node_id,
        partitions=core.partitions,
        fetchers=core.fetchers,
        on_partition_change=core.notify,
        truncate_to_hw_on_become_follower=bool(
            config["trioka.replica.truncate.to.hw.on.become.follower"]
        ),
    )
    applier.on_leadership = core.on_leadership
    return applier


def _truncate(partition: Partition, offset: int) -> None:
    log.info(
        "truncating on becoming follower",
        topic_partition=str(partition.tp),
        log_end_offset=partition.log.log_end_offset,
        truncate_to=offset,
    )
    truncate_log(partition, offset)


def storage_error(tp: TopicPartition, exc: Exception) -> int:
    log.warning("partition change failed", topic_partition=str(tp), error=str(exc))
    code = getattr(exc, "code", None)
    if isinstance(code, ErrorCode):
        return int(code)
    return int(ErrorCode.KAFKA_STORAGE_ERROR)
