"""Produce (Kafka's KafkaApis.handleProduceRequest + ReplicaManager.appendRecords) and
InitProducerId: appends to the partitions this broker leads; acks=all answers once the HW
passed every append (broker.purgatory.await_replication)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

import structlog

from broker.handlers.errors import partition_error
from broker.handlers.leader_hints import LeaderHints
from broker.handlers.router import Handler
from broker.metrics import BrokerTopicMetrics
from broker.partitions import Partition, PartitionManager
from broker.ports import Failpoints
from broker.producer_ids import ProducerIdManager, init_producer_id
from broker.purgatory import FetchPurgatory, await_replication
from broker.server import ConnectionInfo
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiKey, Response
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.produce import (
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)
from protocol.names import TopicPartition, is_internal
from storage.log_append import validate_client_records

log = structlog.get_logger("broker.handlers.produce")

Waiting = dict[TopicPartition, tuple[Partition, int]]
"""acks=all appends still to be replicated: (partition appended to, offset after the append)."""


_NOT_LEADER = int(ErrorCode.NOT_LEADER_OR_FOLLOWER)


class ProduceHandler:
    def __init__(
        self,
        *,
        partitions: PartitionManager,
        fetch_purgatory: FetchPurgatory,
        produce_purgatory: FetchPurgatory,
        topic_metrics: BrokerTopicMetrics | None = None,
        failpoints: Failpoints | None = None,
        leader_hints: LeaderHints | None = None,
    ) -> None:
        self.partitions = partitions
        self.leader_hints = leader_hints
        """KIP-951: partitions answered NOT_LEADER_OR_FOLLOWER name the leader."""
        self.failpoints = failpoints
        self.fetch_purgatory = fetch_purgatory
        """Woken at every append: followers read up to the LEO."""
        self.produce_purgatory = produce_purgatory
        """Where acks=all produces wait for the HW."""
        self.topic_metrics = topic_metrics
        """BytesIn/MessagesIn per append; Total/FailedProduceRequests per partition appended
        to or refused by the append (not those of an invalid acks, as Kafka's)."""

    def handlers(self) -> Mapping[ApiKey, Handler]:
        return {ApiKey.PRODUCE: self.produce}

    def _failpoint(self, name: str) -> bool:
        return self.failpoints is not None and self.failpoints.eval(name) is not None

    async def produce(self, request: ProduceRequest, conn: ConnectionInfo) -> Response | None:
        topics, waiting = self._append_all(request)
        if request.acks == 0:
            return None
        if waiting:
            errors = await await_replication(
                self.produce_purgatory, self.partitions.get, waiting, request.timeout_ms
            )
            if not errors and self._failpoint("broker.produce.exit_before_response"):
                # Replicated (the HW passed it) but never acknowledged: the client retries it
                # at the next leader, which must answer it as a duplicate.
                log.warning("failpoint: exiting before the produce response", waiting=len(waiting))
                os._exit(1)
            topics = [
                replace(
                    t,
                    partitions=tuple(
                        _with_error(p, errors.get(TopicPartition(t.name, p.index)))
                        for p in t.partitions
                    ),
                )
                for t in topics
            ]
        if self.leader_hints is not None:
            return self._with_leader_hints(topics, conn.listener)
        return ProduceResponse(topics=tuple(topics))

    def _with_leader_hints(
        self, topics: list[ProduceTopicResponse], listener: str
    ) -> ProduceResponse:
        """Name the current leader in each partition answered NOT_LEADER_OR_FOLLOWER (KIP-951),
        with those leaders' endpoints."""
        hints = self.leader_hints
        assert hints is not None
        leaders: set[int] = set()

        def hinted(
            t: ProduceTopicResponse, p: ProducePartitionResponse
        ) -> ProducePartitionResponse:
            if p.error_code != _NOT_LEADER:
                return p
            leader = hints.current_leader(TopicPartition(t.name, p.index))
            leaders.add(leader.leader_id)
            return replace(p, current_leader=leader)

        if not any(p.error_code == _NOT_LEADER for t in topics for p in t.partitions):
            return ProduceResponse(topics=tuple(topics))
        hinted_topics = tuple(
            replace(t, partitions=tuple(hinted(t, p) for p in t.partitions)) for t in topics
        )
        return ProduceResponse(
            topics=hinted_topics, node_endpoints=hints.endpoints(leaders, listener)
        )

    def _append_all(self, request: ProduceRequest) -> tuple[list[ProduceTopicResponse], Waiting]:
        """Every partition's append and its answer, and the acks=all ones to wait for."""
        acks = request.acks
        topics = []
        waiting: Waiting = {}
        for topic in request.topics:
            results = []
            for part in topic.partitions:
                if acks not in (0, 1, -1):
                    results.append(
                        ProducePartitionResponse(
                            index=part.index,
                            error_code=int(ErrorCode.INVALID_REQUIRED_ACKS),
                            error_message=f"acks must be 0, 1 or -1 (all), got {acks}",
                        )
                    )
                    continue
                tp = TopicPartition(topic.name, part.index)
                result, end = self._append(tp, part.records, acks)
                if acks == -1 and end is not None:
                    waiting[tp] = end
                results.append(result)
            topics.append(ProduceTopicResponse(name=topic.name, partitions=tuple(results)))
        return topics, waiting

    def _append(
        self, tp: TopicPartition, records: bytes, acks: int = 1
    ) -> tuple[ProducePartitionResponse, tuple[Partition, int] | None]:
        """The append's response, and (partition, offset after the append) when it worked."""
        try:
            if is_internal(tp.topic):
                raise KafkaError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"cannot produce to internal topic {tp.topic}",
                )
            if not records:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"no record batch for {tp}")
            partition = self.partitions.leader(tp)
            partition.state.check_append(acks)
            compacted = "compact" in partition.log.config.cleanup_policy
            validate_client_records(records, tp, compacted=compacted)
            info = partition.log.append_as_leader(records, partition.state.leader_epoch)
        except Exception as exc:
            code, message = partition_error(exc)
            if code == ErrorCode.KAFKA_STORAGE_ERROR:
                log.warning("append failed", topic_partition=str(tp), error=message)
            elif code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("append failed", topic_partition=str(tp))
            if self.topic_metrics is not None:
                self.topic_metrics.produced(tp.topic, code)
            return ProducePartitionResponse(
                index=tp.partition, error_code=code, error_message=message
            ), None
        if self.topic_metrics is not None:
            self.topic_metrics.appended(tp.topic, len(records), info.num_records)
            # A duplicate answered without offsets (below) was appended before: no failure.
            self.topic_metrics.produced(tp.topic, 0)
        if partition.state.update_local_leo(partition.log.log_end_offset):
            self.produce_purgatory.notify(tp)
        # Followers read to the LEO: every append may complete their long polls.
        self.fetch_purgatory.notify(tp)
        response = ProducePartitionResponse(
            index=tp.partition,
            error_code=0,
            base_offset=info.first_offset,
            log_start_offset=partition.log.log_start_offset,
        )
        if info.first_offset < 0:
            response = _offsets_unknown(response, tp)
        return response, (partition, info.last_offset + 1)


class ProducerIdHandler:
    """InitProducerId (idempotent producers: ids from blocks the controller allocates)."""

    def __init__(self, producer_ids: ProducerIdManager) -> None:
        self.producer_ids = producer_ids

    def handlers(self) -> Mapping[ApiKey, Handler]:
        return {ApiKey.INIT_PRODUCER_ID: self.init_producer_id}

    async def init_producer_id(
        self, request: InitProducerIdRequest, conn: ConnectionInfo
    ) -> InitProducerIdResponse:
        return await init_producer_id(self.producer_ids, request)


def _offsets_unknown(
    response: ProducePartitionResponse, tp: TopicPartition
) -> ProducePartitionResponse:
    # Kafka's DUPLICATE_SEQUENCE_NUMBER: written (or already there), only the offsets are
    # unknown; with acks=all it is still answered only once replicated.
    return replace(
        response,
        error_code=int(ErrorCode.DUPLICATE_SEQUENCE_NUMBER),
        error_message=f"{tp}: every batch is in the log, some from an earlier attempt, but not "
        "one after the other: no base offset can be given",
    )


def _with_error(
    response: ProducePartitionResponse, error: tuple[ErrorCode, str] | None
) -> ProducePartitionResponse:
    if error is None:
        return response
    return replace(response, error_code=int(error[0]), error_message=error[1])
