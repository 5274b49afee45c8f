"""Reading one partition for a Fetch (Kafka's Partition.fetchRecords / ReplicaManager.readFromLog):
a consumer reads up to the HW; a follower reads up to the LEO after the epoch and divergence
checks, and its new position may move the HW or propose an ISR expansion."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

import structlog

from broker.alter_partition import AlterPartitionManager
from broker.handlers.errors import partition_error
from broker.partitions import IdleFollowerRead, Partition, PartitionManager
from broker.replica.fetch_session import PartitionRequest, PartitionResult
from broker.replica.leader import SessionClock, check_current_leader_epoch
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.fetch import EpochEndOffset, FetchPartitionResponse
from protocol.names import TopicPartition

log = structlog.get_logger("broker.handlers.partition_reads")


def summary(result: FetchPartitionResponse) -> PartitionResult:
    """What a fetch session compares of one partition's answer."""
    return PartitionResult(
        high_watermark=result.high_watermark,
        log_start_offset=result.log_start_offset,
        records_size=len(result.records),
        error_code=result.error_code,
        diverging_epoch=result.diverging_epoch is not None,
    )


class PartitionReader:
    def __init__(
        self,
        partitions: PartitionManager,
        *,
        on_high_watermark: Callable[[TopicPartition], None],
        alter_partition: AlterPartitionManager | None = None,
    ) -> None:
        self.partitions = partitions
        self.on_high_watermark = on_high_watermark
        """A follower's fetch moved the HW: waiting fetches and produces re-check."""
        self.alter_partition = alter_partition
        """Where a follower that caught up is proposed for the ISR; None: never."""

    def read(
        self,
        tp: TopicPartition,
        offset: int,
        max_bytes: int,
        *,
        min_one: bool,
        replica: bool,
        current_leader_epoch: int = -1,
    ) -> FetchPartitionResponse:
        """Read as the leader, up to the LEO for a `replica`, up to the HW for a consumer;
        `min_one`: the first batch even when larger than `max_bytes`."""
        try:
            partition = self.partitions.leader(tp)
            epoch_error = check_current_leader_epoch(
                partition.state.leader_epoch, current_leader_epoch
            )
            if epoch_error != ErrorCode.NONE:
                raise KafkaError(
                    epoch_error,
                    f"fetch of {tp} in leader epoch {current_leader_epoch}; the leader's is "
                    f"{partition.state.leader_epoch}",
                )
            the_log = partition.log
            hw = partition.state.high_watermark
            limit = the_log.log_end_offset if replica else hw
            if offset < the_log.log_start_offset or offset > the_log.log_end_offset:
                raise KafkaError(
                    ErrorCode.OFFSET_OUT_OF_RANGE,
                    f"fetch offset {offset} is outside [{the_log.log_start_offset}, "
                    f"{the_log.log_end_offset}] of {tp}",
                )
            data = b""
            if offset < limit and (max_bytes > 0 or min_one):
                result = the_log.read(
                    offset, max(max_bytes, 0), max_offset=limit, min_one_batch=min_one
                )
                data = bytes(result.data)
            return FetchPartitionResponse(
                index=tp.partition,
                error_code=0,
                high_watermark=hw,
                last_stable_offset=hw,
                log_start_offset=the_log.log_start_offset,
                records=data,
            )
        except Exception as exc:
            code, message = partition_error(exc)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("read failed", topic_partition=str(tp))
            return FetchPartitionResponse(
                index=tp.partition, error_code=code, error_message=message
            )

    def idle_follower_read(
        self,
        tp: TopicPartition,
        replica_id: int,
        part: PartitionRequest,
        quiet: SessionClock | None = None,
    ) -> IdleFollowerRead | None:
        """The leader's fast path for an idle follower (Kafka's FetchSession keeps per-partition
        state for the same reason): the follower asks with the very request object of its last
        fetch (the session keeps it until the position changes), the partition is in the same
        leader epoch with the same HW and log start, and the follower was and still is at our
        LEO = HW in the ISR. Then the epoch and divergence checks, the read and the follower
        update would all repeat themselves; only the follower's caught-up time moves. At 25,000
        partitions this was ~15 us per partition per fetch, half a core per idle broker."""
        partition = self.partitions.get(tp)
        if partition is None:
            return None
        idle = partition.idle_reads.get(replica_id)
        if idle is None or idle.request is not part:
            return None
        state = partition.state
        response = idle.response
        if (
            state.leader_epoch != idle.leader_epoch
            or state.high_watermark != response.high_watermark
            or partition.log.log_end_offset != part.fetch_offset
            or partition.log.log_start_offset != response.log_start_offset
            or not state.record_idle_follower_fetch(
                replica_id, part.fetch_offset, state.clock_ms(), quiet
            )
        ):
            return None
        return idle

    def fold_quiet(self, tps: Iterable[TopicPartition], replica_id: int) -> None:
        """`replica_id`'s session reads `tps` again: their quiet stretch ends at the session's
        clock as it is now (FollowerState.fold_quiet), before that clock moves on."""
        get = self.partitions.get
        for tp in tps:
            partition = get(tp)
            if partition is not None:
                follower = partition.state.followers.get(replica_id)
                if follower is not None:
                    follower.fold_quiet()

    def read_follower(
        self,
        tp: TopicPartition,
        replica_id: int,
        part: PartitionRequest,
        max_bytes: int,
        min_one: bool,
    ) -> FetchPartitionResponse:
        """The leader's side of a follower fetch (Kafka's Partition.fetchRecords as leader):
        epoch checks, the KIP-595 divergence check, the read up to the LEO, then the follower's
        new position, which may move the HW or propose an ISR expansion."""
        try:
            partition = self.partitions.get(tp)
            if partition is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"this server does not host topic-partition {tp}",
                )
            state = partition.state
            the_log = partition.log
            state.validate_follower_fetch(replica_id, part.current_leader_epoch)
            diverging = state.diverging_epoch_for(
                part.last_fetched_epoch, part.fetch_offset, the_log, the_log.log_start_offset
            )
            if diverging is not None:
                return FetchPartitionResponse(
                    index=tp.partition,
                    error_code=0,
                    high_watermark=state.high_watermark,
                    last_stable_offset=state.high_watermark,
                    log_start_offset=the_log.log_start_offset,
                    diverging_epoch=EpochEndOffset(
                        epoch=diverging.epoch, end_offset=diverging.end_offset
                    ),
                )
            result = self.read(tp, part.fetch_offset, max_bytes, min_one=min_one, replica=True)
            if result.error_code != 0:
                return result
            return self._follower_moved(tp, partition, replica_id, part, result)
        except Exception as exc:
            code, message = partition_error(exc)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("follower read failed", topic_partition=str(tp))
            return FetchPartitionResponse(
                index=tp.partition, error_code=code, error_message=message
            )

    def _follower_moved(
        self,
        tp: TopicPartition,
        partition: Partition,
        replica_id: int,
        part: PartitionRequest,
        result: FetchPartitionResponse,
    ) -> FetchPartitionResponse:
        """The follower fetched from `part.fetch_offset`: record its position (which may move
        the HW or expand the ISR) and answer with the HW after that."""
        state = partition.state
        the_log = partition.log
        update = state.update_follower_fetch(
            replica_id,
            part.fetch_offset,
            state.clock_ms(),
            the_log.log_end_offset,
            log_start_offset=part.log_start_offset,
        )
        if update.high_watermark_changed:
            self.on_high_watermark(tp)
        if update.proposal is not None and self.alter_partition is not None:
            log.info(
                "expanding ISR",
                topic_partition=str(tp),
                isr=list(state.isr),
                new_isr=list(update.proposal.new_isr),
            )
            self.alter_partition.submit(update.proposal)
        if state.high_watermark != result.high_watermark:
            result = replace(
                result,
                high_watermark=state.high_watermark,
                last_stable_offset=state.high_watermark,
            )
        if (
            not result.records
            and part.fetch_offset == the_log.log_end_offset == state.high_watermark
            and replica_id in state.isr
        ):
            # The follower is at our LEO with everything committed: its next fetch from
            # here gets this same answer (`idle_follower_read`).
            partition.idle_reads[replica_id] = IdleFollowerRead(
                part, state.leader_epoch, result, summary(result)
            )
        return result
