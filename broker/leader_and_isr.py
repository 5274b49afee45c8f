"""ZK mode: the controller's requests to this broker (Kafka's ReplicaManager.becomeLeaderOrFollower,
stopReplicas and maybeUpdateMetadataCache).

Every request is fenced first: a controller epoch older than the newest this broker has seen
-> STALE_CONTROLLER_EPOCH (a zombie controller changes nothing); a broker epoch older than ours
-> STALE_BROKER_EPOCH (the request was meant for an earlier registration of this broker).

LeaderAndIsr, in Kafka's order: per partition, a topic id other than the local log's ->
INCONSISTENT_TOPIC_ID, a leader epoch not newer than ours (nor, at the same leader epoch, a
newer partition epoch) -> skipped with STALE_CONTROLLER_EPOCH, as Kafka; then makeLeaders and
makeFollowers through `broker.partition_changes.PartitionChangeApplier` (the code Raft mode's
metadata publisher uses too), with the request's live leaders as the fetch sources.

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

import structlog

from broker.fetcher import SourceBroker
from broker.metadata_cache import apply_update_metadata
from broker.metadata_publisher import MetadataPublisher
from broker.partition_changes import PartitionChangeApplier, storage_error
from broker.partitions import PartitionManager
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

log = structlog.get_logger("broker.leader_and_isr")

EPOCH_DURING_DELETE = -2
NO_EPOCH = -1


class ControllerRequestHandler:
    """The controller's requests applied to this broker; `applier` (broker.partition_changes)
    applies partition changes and holds the fetchers, as in Raft mode."""

    def __init__(
        self,
        *,
        node_id: int,
        partitions: PartitionManager,
        publisher: MetadataPublisher,
        applier: PartitionChangeApplier,
        broker_epoch: Callable[[], int],
    ) -> None:
        self.node_id = node_id
        self.partitions = partitions
        self.publisher = publisher
        self.applier = applier
        self.fetchers = applier.fetchers
        self.broker_epoch = broker_epoch
        self.on_partition_change = applier.on_partition_change
        self.controller_epoch = -1
        """The newest controller epoch seen (Kafka's ReplicaManager.controllerEpoch)."""
        self.controller_id = -1
        """The controller of the newest accepted request; Metadata reports it."""
        self._ineligible_live: frozenset[int] | None = None
        """The live brokers the ineligible replicas were last computed from."""
        self._new_leaders: set[TopicPartition] = set()
        """Partitions made leaders here since then (their ineligible replicas are due)."""

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
        # Kafka lets -1 through (controllers older than 2.2); trioka's controller always
        # names the epoch, so once this broker knows its own, -1 is a forgery or a mistake.
        if ours != -1 and broker_epoch < ours:
            return f"broker epoch {broker_epoch} is older than this broker's current one"
        self.controller_epoch = controller_epoch
        self.controller_id = controller_id
        return None

    def _fence_code(self, controller_epoch: int) -> ErrorCode:
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        return ErrorCode.STALE_BROKER_EPOCH

    # -- LeaderAndIsr ------------------------------------------------------------------------

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        received_ms = self.partitions.clock.monotonic_ms()
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
                code = self.applier.check(change)
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
        errors.update(
            self.applier.apply_partition_changes(
                leaders=leaders, followers=followers, live_brokers=live
            )
        )
        self._new_leaders.update(c.tp for c in leaders)
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
                apply_ms=float(self.partitions.clock.monotonic_ms() - received_ms),
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
            if self.applier.delete(tp) == 0:  # else the next FULL request tries again
                strays.append(tp)
        return strays

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
        if self.applier.on_leadership is not None:
            # Kafka's onResignation on StopReplica: a replica no longer hosted coordinates
            # nothing (the partition moved away by reassignment, or its topic was deleted).
            self.applier.on_leadership([], [(tp, None if leader_epoch < 0 else leader_epoch)])
        try:
            self.partitions.stop(tp, delete=delete)
        except Exception as exc:
            return ErrorCode(storage_error(tp, exc))
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
        """Brokers not live may not join an ISR (Kafka checks this on expansion). Every led
        partition when the live brokers changed, else only the leaders made since: a large
        change arrives as several LeaderAndIsr and UpdateMetadata, and walking every
        partition per UpdateMetadata made its cost follow the broker, not the change."""
        live = frozenset(self.publisher.image.cluster.brokers)
        partitions = self.partitions.partitions
        if live != self._ineligible_live:
            chosen = list(partitions.values())
        else:
            chosen = [p for tp in self._new_leaders if (p := partitions.get(tp)) is not None]
        self._ineligible_live = live
        self._new_leaders.clear()
        for partition in chosen:
            state = partition.state
            if state.is_leader:
                state.ineligible_replicas = frozenset(r for r in state.replicas if r not in live)
