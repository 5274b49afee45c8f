"""ListOffsets and OffsetForLeaderEpoch: offsets the leader of a partition answers from its log
(by time, earliest, latest; the end offset of a leader epoch for a follower's truncation)."""

from __future__ import annotations

from collections.abc import Mapping

from broker.handlers.errors import partition_error
from broker.handlers.router import Handler
from broker.partitions import Partition, PartitionManager
from broker.replica.leader import check_current_leader_epoch
from broker.server import ConnectionInfo
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopicResult,
)
from protocol.names import TopicPartition
from protocol.record_batch import iter_batches


class OffsetsHandler:
    def __init__(self, partitions: PartitionManager) -> None:
        self.partitions = partitions

    def handlers(self) -> Mapping[ApiKey, Handler]:
        return {
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
        }

    # -- ListOffsets ----------------------------------------------------------------------

    async def list_offsets(
        self, request: ListOffsetsRequest, conn: ConnectionInfo
    ) -> ListOffsetsResponse:
        topics = []
        for topic in request.topics:
            results = []
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.index)
                try:
                    partition = self.partitions.leader(tp)
                    results.append(_list_offset(partition, part.timestamp, request.replica_id >= 0))
                except Exception as exc:
                    code, message = partition_error(exc)
                    results.append(
                        ListOffsetsPartitionResponse(
                            index=part.index, error_code=code, error_message=message
                        )
                    )
            topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=tuple(results)))
        return ListOffsetsResponse(topics=tuple(topics))

    # -- OffsetForLeaderEpoch -------------------------------------------------------------

    async def offset_for_leader_epoch(
        self, request: OffsetForLeaderEpochRequest, conn: ConnectionInfo
    ) -> OffsetForLeaderEpochResponse:
        topics = []
        for topic in request.topics:
            results = []
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition)
                try:
                    results.append(
                        self._offset_for_epoch(tp, part.leader_epoch, part.current_leader_epoch)
                    )
                except Exception as exc:
                    code, _message = partition_error(exc)
                    results.append(
                        OffsetForLeaderPartitionResult(error_code=code, partition=part.partition)
                    )
            topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=tuple(results)))
        return OffsetForLeaderEpochResponse(topics=tuple(topics))

    def _offset_for_epoch(
        self, tp: TopicPartition, leader_epoch: int, current_leader_epoch: int
    ) -> OffsetForLeaderPartitionResult:
        """Kafka's Partition.lastOffsetForLeaderEpoch, answered by the leader."""
        partition = self.partitions.leader(tp)
        state = partition.state
        code = check_current_leader_epoch(state.leader_epoch, current_leader_epoch)
        if code != ErrorCode.NONE:
            return OffsetForLeaderPartitionResult(error_code=int(code), partition=tp.partition)
        the_log = partition.log
        if leader_epoch == state.leader_epoch:
            return OffsetForLeaderPartitionResult(
                error_code=0,
                partition=tp.partition,
                leader_epoch=leader_epoch,
                end_offset=the_log.log_end_offset,
            )
        found = state.end_offset_for_epoch(leader_epoch, the_log)
        if found is None:
            return OffsetForLeaderPartitionResult(error_code=0, partition=tp.partition)
        return OffsetForLeaderPartitionResult(
            error_code=0, partition=tp.partition, leader_epoch=found.epoch, end_offset=found.offset
        )


def _list_offset(
    partition: Partition, timestamp: int, replica: bool
) -> ListOffsetsPartitionResponse:
    """One partition's ListOffsets answer; a `replica` may see up to the LEO, others the HW."""
    the_log = partition.log
    index = partition.tp.partition
    hw = the_log.log_end_offset if replica else partition.state.high_watermark
    epoch = partition.state.leader_epoch
    if timestamp == EARLIEST_TIMESTAMP:
        return ListOffsetsPartitionResponse(
            index=index, error_code=0, offset=the_log.log_start_offset, leader_epoch=epoch
        )
    if timestamp == LATEST_TIMESTAMP:
        return ListOffsetsPartitionResponse(
            index=index, error_code=0, offset=hw, leader_epoch=epoch
        )
    if timestamp == MAX_TIMESTAMP:
        found = _max_timestamp(partition, hw)
        if found is None:
            return ListOffsetsPartitionResponse(index=index, error_code=0)
        return ListOffsetsPartitionResponse(
            index=index, error_code=0, timestamp=found[0], offset=found[1], leader_epoch=epoch
        )
    if timestamp < 0:
        return ListOffsetsPartitionResponse(
            index=index,
            error_code=int(ErrorCode.INVALID_REQUEST),
            error_message=f"timestamp {timestamp} is neither a time nor -1, -2, -3",
        )
    hit = the_log.offset_for_timestamp(timestamp)
    if hit is None or hit.offset >= hw:
        return ListOffsetsPartitionResponse(index=index, error_code=0)
    return ListOffsetsPartitionResponse(
        index=index,
        error_code=0,
        timestamp=hit.timestamp,
        offset=hit.offset,
        leader_epoch=getattr(hit, "leader_epoch", epoch),
    )


def _max_timestamp(partition: Partition, limit: int) -> tuple[int, int] | None:
    """(max timestamp, offset of its batch's last record) below `limit`, by batch headers only.

    Kafka answers MAX_TIMESTAMP with the offset of the record holding the largest timestamp;
    without decoding records the broker knows the batch, and reports its last offset.
    """
    the_log = partition.log
    offset = the_log.log_start_offset
    best: tuple[int, int] | None = None
    while offset < limit:
        data = bytes(the_log.read(offset, 1 << 20, max_offset=limit, min_one_batch=True).data)
        if not data:
            break
        for _pos, header in iter_batches(data, verify_crc=False):
            if header.base_offset >= limit:
                break
            if best is None or header.max_timestamp > best[0]:
                best = (header.max_timestamp, header.last_offset)
            offset = header.next_offset
    return best
