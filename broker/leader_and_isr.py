"""ZK mode: the controller's requests to this broker (Kafka's ReplicaManager.becomeLeaderOrFollower,
stopReplicas and maybeUpdateMetadataCache).

Every request is fenced first: a controller epoch older than the newest this broker has seen
-> STALE_CONTROLLER_EPOCH (a zombie controller changes nothing); a broker epoch older than ours
-> STALE_BROKER_EPOCH (the request was meant for an earlier registration of this broker).

LeaderAndIsr, in Kafka's order: per partition, a topic id other than the local log's ->
INCONSISTENT_TOPIC_ID, a leader epoch not newer than ours (nor, at the same leader epoch, a
newer partition epoch) -> skipped with STALE_CONTROLLER_EPOCH, as Kafka; then makeLeaders
(stop fetching them, take the registration, wake waiting produces and fetches), then
makeFollowers (take the registration, stop the old fetcher, truncate by leader epoch as
`FollowerFetchState.become_follower` decides, start fetching from the new leader when it is
live); then one HW checkpoint.

A FULL LeaderAndIsr (type 1: the controller's first request after a failover or after this
broker registered) names every partition this broker hosts: a local log it does not name, or
names with another topic id, is a stray (KIP-516; Kafka's findStrayPartitionsFromLeaderAndIsr)
and is stopped and deleted before the partitions are applied, so a replica of a topic deleted
(or deleted and recreated) while this broker was down is never served nor revived. An
INCREMENTAL request naming another topic id than a log's still gets INCONSISTENT_TOPIC_ID.

StopReplica: stop fetching; with delete_partition, drop the partition and delete its log
(unless the request names another topic id than the log's, KIP-516). A leader epoch older than
ours -> FENCED_LEADER_EPOCH (-1 skips the check, -2 deletes regardless).

UpdateMetadata: folded into the metadata image (`broker.metadata_cache`); the controller id it
carries is what Metadata and DescribeCluster report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog

from broker.fetcher import ReplicaFetcherManager, SourceBroker, truncate_log
from broker.metadata_cache import apply_update_metadata
from broker.metadata_publisher import MetadataPublisher
from broker.partitions import PartitionManager
from broker.replica.follower import FollowerFetchState
from broker.replica.partition_state import PartitionChange
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
    LeaderAndIsrType,
)
from protocol.messages.stop_replica import (
    StopReplicaPartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
)
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.names import TopicPartition

if TYPE_CHECKING:
    from broker.partitions import Partition

log = structlog.get_logger("broker.leader_and_isr")

EPOCH_DURING_DELETE = -2
NO_EPOCH = -1


class ControllerRequestHandler:
    def __init__(
        self,
        *,
        node_id: int,
        partitions: PartitionManager,
        publisher: MetadataPublisher,
        fetchers: ReplicaFetcherManager,
        broker_epoch: Callable[[], int],
        on_partition_change: Callable[[TopicPartition], None] = lambda tp: None,
        truncate_to_hw_on_become_follower: bool = False,
    ) -> None:
        self.node_id = node_id
        self.partitions = partitions
        self.publisher = publisher
        self.fetchers = fetchers
        self.broker_epoch = broker_epoch
        self.on_partition_change = on_partition_change
        self.truncate_to_hw_on_become_follower = truncate_to_hw_on_become_follower
        self.controller_epoch = -1
        """The newest controller epoch seen (Kafka's ReplicaManager.controllerEpoch)."""
        self.controller_id = -1
        """The controller of the newest accepted request; Metadata reports it."""

    # -- fencing ---------------------------------------------------------------------------

    def _fence(self, controller_id: int, controller_epoch: int, broker_epoch: int) -> str | None:
        """None when the request may be applied (and then remember its controller), else why
        not, as STALE_CONTROLLER_EPOCH / STALE_BROKER_EPOCH messages."""
        if controller_epoch < self.controller_epoch:
            return (
                f"controller {controller_id} has epoch {controller_epoch}, older than the "
                f"newest this broker has seen ({self.controller_epoch})"
            )
        ours = self.broker_epoch()
        if broker_epoch != -1 and broker_epoch < ours:
            return f"broker epoch {broker_epoch} is older than this broker's epoch {ours}"
        self.controller_epoch = controller_epoch
        self.controller_id = controller_id
        return None

    def _fence_code(self, controller_epoch: int) -> ErrorCode:
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        return ErrorCode.STALE_BROKER_EPOCH

    # -- LeaderAndIsr ------------------------------------------------------------------------

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        stale = self._fence(request.controller_id, request.controller_epoch, request.broker_epoch)
        if stale is not None:
            code = self._fence_code(request.controller_epoch)
            log.warning("LeaderAndIsr refused", error=code.name, reason=stale)
            return LeaderAndIsrResponse(error_code=int(code), error_message=stale)
        if request.type == LeaderAndIsrType.FULL:
            self._delete_strays(request)
        live = {
            leader.broker_id: SourceBroker(leader.broker_id, leader.host_name, leader.port)
            for leader in request.live_leaders
        }
        errors: dict[TopicPartition, int] = {}
        leaders: list[PartitionChange] = []
        followers: list[PartitionChange] = []
        for topic in request.topic_states:
            for p in topic.partition_states:
                tp = TopicPartition(topic.topic_name, p.partition_index)
                change = PartitionChange(
                    tp=tp,
                    topic_id=topic.topic_id,
                    leader=p.leader,
                    leader_epoch=p.leader_epoch,
                    isr=tuple(p.isr),
                    replicas=tuple(p.replicas),
                    partition_epoch=p.partition_epoch,
                )
                code = self._check_partition(change)
                errors[tp] = int(code)
                if code != ErrorCode.NONE:
                    continue
                if self.node_id not in change.replicas:
                    # Kafka answers UNKNOWN_TOPIC_OR_PARTITION for a partition it is not in.
                    errors[tp] = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif change.leader == self.node_id:
                    leaders.append(change)
                else:
                    followers.append(change)
        for change in leaders:
            errors[change.tp] = self._make_leader(change)
        for change in followers:
            errors[change.tp] = self._make_follower(change, live)
        # No HW checkpoint here: as Kafka's ReplicaManager, the periodic one
        # (replica.high.watermark.checkpoint.interval.ms) and the one at shutdown write it.
        # Rewriting the HWs of every partition per LeaderAndIsr was 12.5% of a broker's
        # samples while 25,000 partitions were created; a HW restored from an older
        # checkpoint is only lower, which truncation by leader epoch does not rely on.
        if leaders or followers:
            log.info(
                "applied LeaderAndIsr",
                controller_id=request.controller_id,
                controller_epoch=request.controller_epoch,
                leaders=len(leaders),
                followers=len(followers),
                skipped=sum(1 for e in errors.values() if e),
            )
        return LeaderAndIsrResponse(
            topics=tuple(
                LeaderAndIsrTopicError(
                    topic_name=topic.topic_name,
                    topic_id=topic.topic_id,
                    partition_errors=tuple(
                        LeaderAndIsrPartitionError(
                            partition_index=p.partition_index,
                            error_code=errors[TopicPartition(topic.topic_name, p.partition_index)],
                        )
                        for p in topic.partition_states
                    ),
                )
                for topic in request.topic_states
            )
        )

    def _delete_strays(self, request: LeaderAndIsrRequest) -> list[TopicPartition]:
        """Delete the local logs a FULL LeaderAndIsr does not name (or names with another
        topic id); returns them."""
        named: dict[TopicPartition, str] = {
            TopicPartition(t.topic_name, p.partition_index): t.topic_id
            for t in request.topic_states
            for p in t.partition_states
        }
        strays: list[TopicPartition] = []
        for the_log in self.partitions.log_manager.logs():
            tp = the_log.topic_partition
            if tp not in named:
                reason = "not in the controller's full LeaderAndIsr"
            elif the_log.topic_id and named[tp] and the_log.topic_id != named[tp]:
                reason = f"log of topic id {the_log.topic_id}, the topic is now {named[tp]}"
            else:
                continue
            log.warning("deleting stray partition", topic_partition=str(tp), reason=reason)
            self.fetchers.remove_partitions([tp])
            try:
                self.partitions.stop(tp, delete=True)
            except Exception as exc:  # the next FULL request tries again
                _storage_error(tp, exc)
                continue
            self.on_partition_change(tp)
            strays.append(tp)
        return strays

    def _check_partition(self, change: PartitionChange) -> ErrorCode:
        partition = self.partitions.get(change.tp)
        log_topic_id = None
        if partition is not None:
            log_topic_id = partition.state.topic_id or partition.log.topic_id
        else:
            existing = self.partitions.log_manager.get_log(change.tp)
            log_topic_id = existing.topic_id if existing is not None else None
        if log_topic_id and change.topic_id and log_topic_id != change.topic_id:
            log.error(
                "LeaderAndIsr for another topic id",
                topic_partition=str(change.tp),
                log_topic_id=log_topic_id,
                request_topic_id=change.topic_id,
            )
            return ErrorCode.INCONSISTENT_TOPIC_ID
        if partition is not None and not partition.state.is_newer(change):
            return ErrorCode.STALE_CONTROLLER_EPOCH
        return ErrorCode.NONE

    def _make_leader(self, change: PartitionChange) -> int:
        try:
            self.fetchers.remove_partitions([change.tp])
            self.partitions.become(change)
        except Exception as exc:
            return _storage_error(change.tp, exc)
        self.on_partition_change(change.tp)
        return 0

    def _make_follower(self, change: PartitionChange, live: dict[int, SourceBroker]) -> int:
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
                log.info(
                    "follower without a live leader; not fetching",
                    topic_partition=str(change.tp),
                    leader=change.leader,
                )
        except Exception as exc:
            return _storage_error(change.tp, exc)
        self.on_partition_change(change.tp)
        return 0

    # -- StopReplica -------------------------------------------------------------------------

    def stop_replica(self, request: StopReplicaRequest) -> StopReplicaResponse:
        stale = self._fence(request.controller_id, request.controller_epoch, request.broker_epoch)
        if stale is not None:
            code = self._fence_code(request.controller_epoch)
            log.warning("StopReplica refused", error=code.name, reason=stale)
            return StopReplicaResponse(error_code=int(code), error_message=stale)
        results = []
        deleted = stopped = 0
        for topic in request.topic_states:
            for p in topic.partition_states:
                tp = TopicPartition(topic.topic_name, p.partition_index)
                code = self._stop(tp, topic.topic_id, p.leader_epoch, p.delete_partition)
                if code == ErrorCode.NONE:
                    if p.delete_partition:
                        deleted += 1
                    else:
                        stopped += 1
                results.append(
                    StopReplicaPartitionError(
                        topic_name=topic.topic_name,
                        partition_index=p.partition_index,
                        error_code=int(code),
                    )
                )
        log.info("applied StopReplica", stopped=stopped, deleted=deleted)
        return StopReplicaResponse(partition_errors=tuple(results))

    def _stop(
        self, tp: TopicPartition, topic_id: str, leader_epoch: int, delete: bool
    ) -> ErrorCode:
        partition = self.partitions.get(tp)
        if (
            partition is not None
            and leader_epoch not in (NO_EPOCH, EPOCH_DURING_DELETE)
            and leader_epoch < partition.state.leader_epoch
        ):
            return ErrorCode.FENCED_LEADER_EPOCH
        existing = partition.log if partition is not None else None
        if existing is None:
            existing = self.partitions.log_manager.get_log(tp)
        if (
            delete
            and topic_id
            and existing is not None
            and existing.topic_id
            and existing.topic_id != topic_id
        ):
            log.warning(
                "StopReplica for another topic id; keeping the log",
                topic_partition=str(tp),
                log_topic_id=existing.topic_id,
                request_topic_id=topic_id,
            )
            return ErrorCode.INCONSISTENT_TOPIC_ID
        self.fetchers.remove_partitions([tp])
        try:
            self.partitions.stop(tp, delete=delete)
        except Exception as exc:
            return ErrorCode(_storage_error(tp, exc))
        self.on_partition_change(tp)
        return ErrorCode.NONE

    # -- UpdateMetadata ----------------------------------------------------------------------

    def update_metadata(self, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
        stale = self._fence(request.controller_id, request.controller_epoch, request.broker_epoch)
        if stale is not None:
            code = self._fence_code(request.controller_epoch)
            log.warning("UpdateMetadata refused", error=code.name, reason=stale)
            return UpdateMetadataResponse(error_code=int(code), error_message=stale)
        self.publisher.replace_image(apply_update_metadata(self.publisher.image, request))
        self._update_ineligible()
        return UpdateMetadataResponse()

    def _update_ineligible(self) -> None:
        """Brokers not live may not join an ISR (Kafka checks this on expansion)."""
        live = frozenset(self.publisher.image.cluster.brokers)
        for partition in self.partitions.partitions.values():
            state = partition.state
            if state.is_leader:
                state.ineligible_replicas = frozenset(r for r in state.replicas if r not in live)


def _truncate(partition: Partition, offset: int) -> None:
    log.info(
        "truncating on becoming follower",
        topic_partition=str(partition.tp),
        log_end_offset=partition.log.log_end_offset,
        truncate_to=offset,
    )
    truncate_log(partition, offset)


def _storage_error(tp: TopicPartition, exc: Exception) -> int:
    log.warning("partition change failed", topic_partition=str(tp), error=str(exc))
    code = getattr(exc, "code", None)
    if isinstance(code, ErrorCode):
        return int(code)
    return int(ErrorCode.KAFKA_STORAGE_ERROR)
