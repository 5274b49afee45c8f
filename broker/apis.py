"""Request dispatch (Kafka's KafkaApis): one method per API this broker serves.

Data-path APIs (Produce, Fetch, ListOffsets) work on the local partitions; Metadata and
DescribeConfigs read the broker's metadata image; CreateTopics, DeleteTopics and
IncrementalAlterConfigs are forwarded to the controller through `ControllerChannel`, and the
broker answers only once its own image has the result, so a client that creates a topic can
produce to it with its next request.
"""

from __future__ import annotations

import contextvars
import os
import socket
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import structlog
import trio

from broker.alter_partition import AlterPartitionManager
from broker.config import BROKER_CONFIGS, BrokerConfig
from broker.leader_and_isr import ControllerRequestHandler
from broker.metadata_publisher import MetadataPublisher
from broker.metrics import BrokerTopicMetrics, awaiting_remote
from broker.partitions import IdleFollowerRead, Partition, PartitionManager
from broker.ports import ControllerChannel, MetadataSource
from broker.producer_ids import ProducerIdManager, init_producer_id
from broker.purgatory import FetchPurgatory
from broker.replica.fetch_session import FetchSessionCache, PartitionRequest, PartitionResult
from broker.replica.leader import check_current_leader_epoch
from broker.server import BoundListener, ConnectionInfo
from protocol import failpoints
from protocol.codec import RequestEnvelope, api_versions_response
from protocol.errors import CorruptRecordBatchError, ErrorCode, KafkaError
from protocol.messages import ApiKey, Request, Response, error_response
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.configs import (
    AlterConfigsResourceResponse,
    ConfigSource,
    DescribeConfigsEntry,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ResourceType,
)
from protocol.messages.describe_cluster import (
    DescribeClusterBroker,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from protocol.messages.fetch import (
    EpochEndOffset,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FetchTopicResponse,
)
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from protocol.messages.metadata import (
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
)
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopicResult,
)
from protocol.messages.produce import (
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.metadata.describe import describe_topic_config_entries
from protocol.metadata.image import MetadataImage
from protocol.names import TopicPartition, is_internal, topic_name_problem
from protocol.record_batch import iter_batches
from storage.cleaner import require_keys

log = structlog.get_logger("broker.apis")

Handler = Callable[[Any, ConnectionInfo], Any]

FORWARDED_CLIENT_ID = "trioka-forwarded"
"""The client id of a request one broker forwarded to the controller's broker (one hop only:
the receiver submits it to its own controller, which answers NOT_CONTROLLER if not active)."""

_forwarded: contextvars.ContextVar[bool] = contextvars.ContextVar("forwarded", default=False)
_client_id: contextvars.ContextVar[str] = contextvars.ContextVar("client_id", default="")


def request_client_id() -> str:
    """The client id of the request being handled (DescribeGroups reports members' ids)."""
    return _client_id.get()


def _error(exc: BaseException) -> tuple[int, str]:
    """(error code, message) for an exception raised while serving one partition."""
    if isinstance(exc, KafkaError):
        return int(exc.code), exc.message
    if isinstance(exc, CorruptRecordBatchError):
        return int(ErrorCode.CORRUPT_MESSAGE), str(exc)
    if isinstance(exc, OSError):
        return int(ErrorCode.KAFKA_STORAGE_ERROR), f"disk error: {exc}"
    return int(ErrorCode.UNKNOWN_SERVER_ERROR), f"{type(exc).__name__}: {exc}"


class KafkaApis:
    """The RequestHandler the server calls (see broker.server.RequestHandler)."""

    def __init__(
        self,
        *,
        config: BrokerConfig,
        partitions: PartitionManager,
        publisher: MetadataPublisher,
        metadata_source: MetadataSource | None,
        controller: ControllerChannel,
        purgatory: FetchPurgatory,
        cluster_id: str,
        produce_purgatory: FetchPurgatory | None = None,
        fetch_sessions: FetchSessionCache[TopicPartition] | None = None,
        alter_partition: AlterPartitionManager | None = None,
        controller_requests: ControllerRequestHandler | None = None,
        local_controller: ControllerChannel | None = None,
        controller_id: Callable[[], int] | None = None,
        producer_ids: ProducerIdManager | None = None,
        topic_metrics: BrokerTopicMetrics | None = None,
    ) -> None:
        self.config = config
        self.topic_metrics = topic_metrics
        """BytesIn/MessagesIn per append, BytesOut per consumer fetch, replication bytes out."""
        self.producer_ids = producer_ids
        self._controller_id_fn = controller_id
        """Raft mode: the controller id Metadata / DescribeCluster report."""
        self.node_id = config.node_id
        self.partitions = partitions
        self.publisher = publisher
        self.metadata_source = metadata_source
        self.controller = controller
        self.local_controller = local_controller
        """ZK mode: this broker's own controller service, for requests other brokers forwarded
        (client id FORWARDED_CLIENT_ID); None submits them to `controller` as any other."""
        self.purgatory = purgatory
        self.produce_purgatory = produce_purgatory or FetchPurgatory()
        self.fetch_sessions: FetchSessionCache[TopicPartition] = fetch_sessions or (
            FetchSessionCache(int(config["max.incremental.fetch.session.cache.slots"]))
        )
        self.alter_partition = alter_partition
        self.controller_requests = controller_requests
        self.cluster_id = cluster_id
        self.bound: list[BoundListener] = []
        self._handlers: dict[ApiKey, Handler] = {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.METADATA: self.metadata,
            ApiKey.CREATE_TOPICS: self.create_topics,
            ApiKey.DELETE_TOPICS: self.delete_topics,
            ApiKey.DESCRIBE_CONFIGS: self.describe_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.incremental_alter_configs,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
            ApiKey.DESCRIBE_CLUSTER: self.describe_cluster,
            ApiKey.CREATE_PARTITIONS: self.forward_admin,
            ApiKey.ELECT_LEADERS: self.forward_admin,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS: self.forward_admin,
            ApiKey.LIST_PARTITION_REASSIGNMENTS: self.forward_admin,
        }
        if producer_ids is not None:
            self._handlers[ApiKey.INIT_PRODUCER_ID] = self.init_producer_id
        if controller_requests is not None:
            self._handlers.update(
                {
                    ApiKey.LEADER_AND_ISR: self.leader_and_isr,
                    ApiKey.STOP_REPLICA: self.stop_replica,
                    ApiKey.UPDATE_METADATA: self.update_metadata,
                    # Brokers forward these to the controller's broker (ZK mode).
                    ApiKey.ALTER_PARTITION: self.forward_admin,
                    ApiKey.CONTROLLED_SHUTDOWN: self.forward_admin,
                    ApiKey.ALLOCATE_PRODUCER_IDS: self.forward_admin,
                }
            )

    async def handle(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        handler = self._handlers.get(request.api_key)
        if handler is None:
            return error_response(
                type(request.body),
                ErrorCode.UNSUPPORTED_VERSION,
                f"{request.api_key.name} is not served by this broker",
            )
        token = _forwarded.set(request.client_id == FORWARDED_CLIENT_ID)
        client = _client_id.set(request.client_id or "")
        try:
            return await handler(request.body, conn)
        finally:
            _client_id.reset(client)
            _forwarded.reset(token)

    def add_handlers(self, handlers: Mapping[ApiKey, Handler]) -> None:
        """Serve more APIs (the group coordinator's, wired by broker.node)."""
        self._handlers.update(handlers)

    def image(self) -> MetadataImage:
        return self.publisher.image

    def alive_brokers(self, listener: str) -> tuple[MetadataBroker, ...]:
        """The brokers Metadata would list for a request on `listener`."""
        return self._brokers(listener)

    @property
    def zk_mode(self) -> bool:
        return self.controller_requests is not None

    def notify_partition(self, tp: TopicPartition) -> None:
        """The partition's HW or leadership changed: re-check waiting fetches and produces."""
        self.purgatory.notify(tp)
        self.produce_purgatory.notify(tp)

    def controller_id(self) -> int:
        if self._controller_id_fn is not None:
            return self._controller_id_fn()
        if self.controller_requests is not None:
            return self.controller_requests.controller_id
        return self.node_id

    # -- Controller requests (ZK mode) -------------------------------------------------------

    async def leader_and_isr(self, request: LeaderAndIsrRequest, conn: ConnectionInfo) -> Response:
        assert self.controller_requests is not None
        return self.controller_requests.leader_and_isr(request)

    async def stop_replica(self, request: StopReplicaRequest, conn: ConnectionInfo) -> Response:
        assert self.controller_requests is not None
        return self.controller_requests.stop_replica(request)

    async def update_metadata(
        self, request: UpdateMetadataRequest, conn: ConnectionInfo
    ) -> Response:
        assert self.controller_requests is not None
        return self.controller_requests.update_metadata(request)

    async def init_producer_id(self, request: Any, conn: ConnectionInfo) -> Response:
        assert self.producer_ids is not None
        return await init_producer_id(self.producer_ids, request)

    # -- ApiVersions ----------------------------------------------------------------------

    async def api_versions(
        self, request: ApiVersionsRequest, conn: ConnectionInfo
    ) -> ApiVersionsResponse:
        full = api_versions_response()
        served = tuple(r for r in full.api_keys if r.api_key in self._handlers)
        return replace(full, api_keys=served)

    # -- Produce --------------------------------------------------------------------------

    async def produce(self, request: ProduceRequest, conn: ConnectionInfo) -> Response | None:
        acks = request.acks
        topics = []
        waiting: dict[TopicPartition, tuple[Partition, int]] = {}
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
        if acks == 0:
            return None
        if waiting:
            awaiting_remote()  # RemoteTimeMs: the acks=all purgatory
            errors = await self._await_replication(waiting, request.timeout_ms)
            if not errors and failpoints.eval("broker.produce.exit_before_response") is not None:
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
        return ProduceResponse(topics=tuple(topics))

    async def _await_replication(
        self, waiting: dict[TopicPartition, tuple[Partition, int]], timeout_ms: int
    ) -> dict[TopicPartition, tuple[ErrorCode, str]]:
        """The acks=all purgatory (Kafka's DelayedProduce): wait until the HW passes each
        append, the leadership moves, or the request's timeout; the errors of those that failed.
        """
        errors: dict[TopicPartition, tuple[ErrorCode, str]] = {}
        pending = dict(waiting)
        deadline = trio.current_time() + max(timeout_ms, 0) / 1000
        while True:
            for tp, (partition, required) in list(pending.items()):
                if self.partitions.partitions.get(tp) is not partition:
                    done, code = True, ErrorCode.NOT_LEADER_OR_FOLLOWER
                else:
                    done, code = partition.state.check_enough_replicas_reach_offset(required)
                if done:
                    del pending[tp]
                    if code != ErrorCode.NONE:
                        errors[tp] = (code, _replication_message(code, tp, partition))
            if not pending or trio.current_time() >= deadline or self.produce_purgatory.closed:
                break
            event = self.produce_purgatory.watch(pending)
            try:
                with trio.move_on_at(deadline):
                    await event.wait()
            finally:
                self.produce_purgatory.unwatch(pending, event)
        for tp in pending:
            errors[tp] = (
                ErrorCode.REQUEST_TIMED_OUT,
                f"{tp}: not replicated to the ISR within {timeout_ms} ms (acks=all)",
            )
        return errors

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
            if "compact" in partition.log.config.cleanup_policy:
                require_keys(records, tp)
            info = partition.log.append_as_leader(records, partition.state.leader_epoch)
        except Exception as exc:
            code, message = _error(exc)
            if code == ErrorCode.KAFKA_STORAGE_ERROR:
                log.warning("append failed", topic_partition=str(tp), error=message)
            elif code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("append failed", topic_partition=str(tp))
            return ProducePartitionResponse(
                index=tp.partition, error_code=code, error_message=message
            ), None
        if self.topic_metrics is not None:
            self.topic_metrics.appended(tp.topic, len(records), info.num_records)
        if partition.state.update_local_leo(partition.log.log_end_offset):
            self.produce_purgatory.notify(tp)
        # Followers read to the LEO: every append may complete their long polls.
        self.purgatory.notify(tp)
        response = ProducePartitionResponse(
            index=tp.partition,
            error_code=0,
            base_offset=info.first_offset,
            log_start_offset=partition.log.log_start_offset,
        )
        if info.first_offset < 0:
            response = _offsets_unknown(response, tp)
        return response, (partition, info.last_offset + 1)

    # -- Fetch ----------------------------------------------------------------------------

    async def fetch(self, request: FetchRequest, conn: ConnectionInfo) -> FetchResponse:
        follower = request.replica_id >= 0
        now = _now_ms()
        fetch_data = {
            TopicPartition(t.name, p.index): PartitionRequest(
                fetch_offset=p.fetch_offset,
                max_bytes=p.partition_max_bytes,
                current_leader_epoch=p.current_leader_epoch,
                last_fetched_epoch=p.last_fetched_epoch,
                log_start_offset=p.log_start_offset,
            )
            for t in request.topics
            for p in t.partitions
        }
        forgotten = [
            TopicPartition(f.topic, i) for f in request.forgotten_topics_data for i in f.partitions
        ]
        context = self.fetch_sessions.new_context(
            request.session_id,
            request.session_epoch,
            fetch_data,
            forgotten,
            privileged=follower,
            now_ms=now,
        )
        if context.error_code != ErrorCode.NONE:
            return FetchResponse(
                error_code=int(context.error_code),
                error_message=f"fetch session {request.session_id} at epoch "
                f"{request.session_epoch}: {context.error_code.name}",
            )
        wanted = context.partitions()
        tps = [tp for tp, _ in wanted]
        deadline = trio.current_time() + max(request.max_wait_ms, 0) / 1000
        results, summaries, total, errors = self._read_fetch(request, wanted)
        fired: set[TopicPartition] = set()
        event: trio.Event | None = None
        order: dict[TopicPartition, int] | None = None
        try:
            while not (
                total >= request.min_bytes
                or errors
                or request.max_wait_ms <= 0
                or trio.current_time() >= deadline
                or self.purgatory.closed
            ):
                # Watched once per request, re-armed after each wake-up: walking the ~8,300
                # partitions of a follower session for every append to any of them was O(n).
                if event is None:
                    awaiting_remote()  # RemoteTimeMs: the long poll
                    event = self.purgatory.watch(tps, fired)
                else:
                    event = self.purgatory.rearm(event)
                with trio.move_on_at(deadline):
                    await event.wait()
                # Only partitions an append or a HW move notified can read differently: a
                # follower session of 8,000 partitions was read in full again for each append
                # to any of them (bench/run_failover.py at 25,000 partitions).
                if not fired:
                    continue
                if order is None:  # session order, built at the first wake-up only
                    order = {tp: i for i, tp in enumerate(tps)}
                position = order
                again = [
                    wanted[position[tp]]
                    for tp in sorted(fired & position.keys(), key=position.__getitem__)
                ]
                fired.clear()
                if again:
                    kept = total - sum(len(results[tp].records) for tp, _ in again)
                    more, more_summaries, total, more_errors = self._read_fetch(
                        request, again, used=kept
                    )
                    results.update(more)
                    summaries.update(more_summaries)
                    errors = errors or more_errors
        finally:
            if event is not None:
                self.purgatory.unwatch(tps, event)
        if self.topic_metrics is not None and total:
            self._count_bytes_out(follower, total, results)
        answer = context.complete(summaries, now_ms=_now_ms())
        # Consecutive partitions of one topic share a topic entry (as Kafka's FetchResponse
        # builds it); each entry's tuple is built once (it was re-built per partition).
        topics: list[FetchTopicResponse] = []
        name = ""  # no topic has an empty name
        parts: list[FetchPartitionResponse] = []
        for tp in answer.partitions:
            if tp.topic != name:
                if parts:
                    topics.append(FetchTopicResponse(name=name, partitions=tuple(parts)))
                name, parts = tp.topic, []
            parts.append(results[tp])
        if parts:
            topics.append(FetchTopicResponse(name=name, partitions=tuple(parts)))
        return FetchResponse(
            topics=tuple(topics),
            error_code=int(answer.error_code),
            session_id=answer.session_id,
        )

    def _count_bytes_out(
        self, follower: bool, total: int, results: Mapping[TopicPartition, FetchPartitionResponse]
    ) -> None:
        """ReplicationBytesOutPerSec for a follower (one inc), BytesOutPerSec per topic for a
        consumer (a consumer's fetch names few partitions)."""
        assert self.topic_metrics is not None
        if follower:
            self.topic_metrics.replication_bytes_out.inc(total)
            return
        by_topic: dict[str, int] = {}
        for tp, result in results.items():
            if result.records:
                by_topic[tp.topic] = by_topic.get(tp.topic, 0) + len(result.records)
        for topic, size in by_topic.items():
            self.topic_metrics.sent_to_consumer(topic, size)

    def _read_fetch(
        self,
        request: FetchRequest,
        wanted: list[tuple[TopicPartition, PartitionRequest]],
        used: int = 0,
    ) -> tuple[
        dict[TopicPartition, FetchPartitionResponse],
        dict[TopicPartition, PartitionResult],
        int,
        bool,
    ]:
        """Read `wanted`; `used` bytes of the response budget are taken by partitions read
        before. Returns the results, what the fetch session compares of each, the total bytes
        (with `used`), and whether any failed."""
        budget = min(request.max_bytes, int(self.config["fetch.max.bytes"]))
        total = used
        errors = False
        results: dict[TopicPartition, FetchPartitionResponse] = {}
        summaries: dict[TopicPartition, PartitionResult] = {}
        follower = request.replica_id >= 0
        for tp, part in wanted:
            if follower:
                idle = self._idle_follower_read(tp, request.replica_id, part)
                if idle is not None:
                    # Nothing to read, nothing changed: the same answer as last time.
                    results[tp] = idle.response
                    summaries[tp] = idle.summary
                    continue
                result = self._read_follower(
                    tp, request.replica_id, part, min(part.max_bytes, budget - total), total == 0
                )
            else:
                result = self._read_partition(
                    tp,
                    part.fetch_offset,
                    min(part.max_bytes, budget - total),
                    min_one=total == 0,
                    replica=False,
                    current_leader_epoch=part.current_leader_epoch,
                )
            total += len(result.records)
            errors = errors or result.error_code != 0 or result.diverging_epoch is not None
            results[tp] = result
            summaries[tp] = _summary(result)
        return results, summaries, total, errors

    def _idle_follower_read(
        self, tp: TopicPartition, replica_id: int, part: PartitionRequest
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
            or not state.record_idle_follower_fetch(replica_id, part.fetch_offset, state.clock_ms())
        ):
            return None
        return idle

    def _read_follower(
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
            result = self._read_partition(
                tp, part.fetch_offset, max_bytes, min_one=min_one, replica=True
            )
            if result.error_code != 0:
                return result
            update = state.update_follower_fetch(
                replica_id,
                part.fetch_offset,
                state.clock_ms(),
                the_log.log_end_offset,
                log_start_offset=part.log_start_offset,
            )
            if update.high_watermark_changed:
                self.notify_partition(tp)
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
                # here gets this same answer (`_idle_follower_read`).
                partition.idle_reads[replica_id] = IdleFollowerRead(
                    part, state.leader_epoch, result, _summary(result)
                )
            return result
        except Exception as exc:
            code, message = _error(exc)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("follower read failed", topic_partition=str(tp))
            return FetchPartitionResponse(
                index=tp.partition, error_code=code, error_message=message
            )

    def _read_partition(
        self,
        tp: TopicPartition,
        offset: int,
        max_bytes: int,
        *,
        min_one: bool,
        replica: bool,
        current_leader_epoch: int = -1,
    ) -> FetchPartitionResponse:
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
            code, message = _error(exc)
            if code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("read failed", topic_partition=str(tp))
            return FetchPartitionResponse(
                index=tp.partition, error_code=code, error_message=message
            )

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
                    results.append(
                        self._list_offset(partition, part.timestamp, request.replica_id >= 0)
                    )
                except Exception as exc:
                    code, message = _error(exc)
                    results.append(
                        ListOffsetsPartitionResponse(
                            index=part.index, error_code=code, error_message=message
                        )
                    )
            topics.append(ListOffsetsTopicResponse(name=topic.name, partitions=tuple(results)))
        return ListOffsetsResponse(topics=tuple(topics))

    def _list_offset(
        self, partition: Partition, timestamp: int, replica: bool
    ) -> ListOffsetsPartitionResponse:
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

    # -- Metadata -------------------------------------------------------------------------

    def _advertised(self, listener: str) -> tuple[str, int] | None:
        """This broker's advertised address for `listener` (bound port when 0 was asked), or
        None when advertised.listeners is set without it (Kafka does not advertise it)."""
        bound = {b.name: b for b in self.bound}
        for adv in self.config.effective_advertised_listeners:
            if adv.name == listener:
                port = adv.port or (bound[listener].port if listener in bound else 0)
                host = adv.host if adv.host not in ("", "0.0.0.0", "::") else socket.getfqdn()
                return host, port
        return None

    def _brokers(self, listener: str) -> tuple[MetadataBroker, ...]:
        """The live brokers with an endpoint on `listener` (the one the request arrived on), at
        that endpoint: a client on EXTERNAL learns only EXTERNAL addresses, and a broker
        lacking the listener is left out of the answer, as Kafka's getAliveBrokerNodes."""
        rack = self.config["broker.rack"] or None
        brokers = {}
        own = self._advertised(listener)
        mine = self.publisher.image.cluster.brokers.get(self.node_id)
        if self.config.raft_mode and (mine is None or mine.fenced):
            # Raft mode lists what the image says, this broker included, as KRaft's
            # getAliveBrokerNodes: a broker not yet unfenced is not one the controller places
            # replicas on, so a client (and cluster readiness) must not count it yet.
            own = None
        if own is not None:
            brokers[self.node_id] = MetadataBroker(
                node_id=self.node_id, host=own[0], port=own[1], rack=rack
            )
        for broker_id, reg in self.publisher.image.cluster.brokers.items():
            if broker_id == self.node_id or reg.fenced:
                continue
            endpoint = reg.endpoint(listener)
            if endpoint is not None:
                brokers[broker_id] = MetadataBroker(
                    node_id=broker_id, host=endpoint.host, port=endpoint.port, rack=reg.rack
                )
        return tuple(brokers[k] for k in sorted(brokers))

    def _alive(self, broker_id: int) -> bool:
        return broker_id == self.node_id or self.publisher.image.cluster.is_usable(broker_id)

    def _leader_error(self, leader: int, reachable: set[int]) -> int:
        """Kafka's MetadataCache.getPartitionMetadata: no leader -> LEADER_NOT_AVAILABLE; a live
        leader without the request's listener -> LISTENER_NOT_FOUND."""
        if leader < 0 or not self._alive(leader):
            return int(ErrorCode.LEADER_NOT_AVAILABLE)
        return 0 if leader in reachable else int(ErrorCode.LISTENER_NOT_FOUND)

    def _topic_metadata(self, name: str, reachable: set[int]) -> MetadataTopic | None:
        """`reachable`: the brokers in the answer (those with the request's listener)."""
        topic = self.publisher.image.topics.get_topic(name)
        if topic is None:
            return None
        parts = []
        for pid in sorted(topic.partitions):
            reg = topic.partitions[pid]
            parts.append(
                MetadataPartition(
                    error_code=self._leader_error(reg.leader, reachable),
                    index=pid,
                    leader_id=reg.leader,
                    leader_epoch=reg.leader_epoch,
                    replica_nodes=reg.replicas,
                    isr_nodes=reg.isr,
                    offline_replicas=tuple(r for r in reg.replicas if not self._alive(r)),
                )
            )
        return MetadataTopic(
            error_code=0,
            name=name,
            topic_id=topic.topic_id,
            is_internal=is_internal(name),
            partitions=tuple(parts),
        )

    async def metadata(self, request: MetadataRequest, conn: ConnectionInfo) -> MetadataResponse:
        image = self.publisher.image
        names: Sequence[str]
        names = sorted(image.topics.by_name) if request.topics is None else request.topics
        auto_create = request.allow_auto_topic_creation and bool(
            self.config["auto.create.topics.enable"]
        )
        missing = [
            n
            for n in dict.fromkeys(names)
            if topic_name_problem(n) is None and image.topics.get_topic(n) is None
        ]
        creation_errors: dict[str, CreatableTopicResult] = {}
        if auto_create and missing:
            response = await self.create_topics(
                CreateTopicsRequest(topics=tuple(CreatableTopic(name=n) for n in missing)), conn
            )
            creation_errors = {
                r.name: r
                for r in response.topics
                if r.error_code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS)
            }
        brokers = self._brokers(conn.listener)
        reachable = {b.node_id for b in brokers}
        topics = []
        for name in dict.fromkeys(names):
            problem = topic_name_problem(name)
            if problem is not None:
                topics.append(
                    MetadataTopic(
                        error_code=int(ErrorCode.INVALID_TOPIC_EXCEPTION),
                        name=name,
                        error_message=problem,
                    )
                )
                continue
            described = self._topic_metadata(name, reachable)
            if described is None:
                failed = creation_errors.get(name)
                topics.append(
                    MetadataTopic(
                        error_code=failed.error_code
                        if failed
                        else int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                        name=name,
                        error_message=(failed.error_message if failed else None)
                        or f"topic {name!r} does not exist",
                    )
                )
                continue
            topics.append(described)
        return MetadataResponse(
            brokers=brokers,
            cluster_id=self.publisher.image.cluster_id or self.cluster_id,
            controller_id=self.controller_id(),
            topics=tuple(topics),
        )

    # -- DescribeCluster ------------------------------------------------------------------

    async def describe_cluster(
        self, request: DescribeClusterRequest, conn: ConnectionInfo
    ) -> DescribeClusterResponse:
        return DescribeClusterResponse(
            brokers=tuple(
                DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                for b in self._brokers(conn.listener)
            ),
            cluster_id=self.publisher.image.cluster_id or self.cluster_id,
            controller_id=self.controller_id(),
        )

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
                    code, _message = _error(exc)
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

    # -- Forwarded to the controller --------------------------------------------------------

    def _controller_for_request(self) -> ControllerChannel:
        if _forwarded.get() and self.local_controller is not None:
            return self.local_controller
        return self.controller

    async def _forward(self, request: Request) -> Response:
        """Send to the controller, then wait until this broker's image has the result."""
        awaiting_remote()  # RemoteTimeMs: the controller's answer and its propagation
        response = await self._controller_for_request().submit(request)
        if self.metadata_source is not None:
            await self.publisher.wait_for(self.metadata_source.committed_offset())
        else:
            await self._await_metadata(request, response)
        return response

    async def _await_metadata(self, request: Request, response: Response) -> None:
        """ZK mode: the controller answered once ZooKeeper had the change; wait (bounded)
        until UpdateMetadata brought it here, so that the client's next request finds it, as
        Kafka's DelayedCreatePartitions waits for the leaders."""
        if isinstance(request, CreateTopicsRequest) and isinstance(response, CreateTopicsResponse):
            if request.validate_only:
                return  # nothing was created: there is no effect to wait for
            created = [t.name for t in response.topics if t.error_code == 0]

            def done() -> bool:
                topics = self.publisher.image.topics
                return all(
                    (t := topics.get_topic(n)) is not None
                    and all(p.leader >= 0 for p in t.partitions.values())
                    for n in created
                )
        elif isinstance(request, DeleteTopicsRequest) and isinstance(
            response, DeleteTopicsResponse
        ):
            deleted = [r.name for r in response.responses if r.error_code == 0 and r.name]

            def done() -> bool:
                topics = self.publisher.image.topics
                return all(topics.get_topic(n) is None for n in deleted)
        else:
            return
        timeout_s = int(self.config["request.timeout.ms"]) / 1000
        with trio.move_on_after(timeout_s):
            while not done():
                await self.publisher.changed().wait()

    async def forward_admin(self, request: Request, conn: ConnectionInfo) -> Response:
        """Requests the controller answers as they are (CreatePartitions, ElectLeaders,
        reassignments; in ZK mode also AlterPartition and ControlledShutdown that other brokers
        forward): KafkaError from the channel becomes a request-level error."""
        awaiting_remote()  # RemoteTimeMs: the controller's answer
        try:
            return await self._controller_for_request().submit(request)
        except KafkaError as exc:
            return error_response(type(request), exc.code, exc.message)

    async def create_topics(
        self, request: CreateTopicsRequest, conn: ConnectionInfo
    ) -> CreateTopicsResponse:
        counts = Counter(t.name for t in request.topics)
        results: dict[str, CreatableTopicResult] = {}
        forward = []
        for topic in request.topics:
            if counts[topic.name] > 1:
                results[topic.name] = CreatableTopicResult(
                    name=topic.name,
                    error_code=int(ErrorCode.INVALID_REQUEST),
                    error_message=f"topic {topic.name!r} appears more than once in the request",
                )
                continue
            if not topic.assignments:
                topic = replace(
                    topic,
                    num_partitions=topic.num_partitions
                    if topic.num_partitions != -1
                    else int(self.config["num.partitions"]),
                    replication_factor=topic.replication_factor
                    if topic.replication_factor != -1
                    else int(self.config["default.replication.factor"]),
                )
            forward.append(topic)
        if forward:
            try:
                response = await self._forward(replace(request, topics=tuple(forward)))
                for r in response.topics:  # type: ignore[attr-defined]
                    results[r.name] = r
            except KafkaError as exc:
                for t in forward:
                    results[t.name] = CreatableTopicResult(
                        name=t.name, error_code=int(exc.code), error_message=exc.message
                    )
        ordered = [results[name] for name in dict.fromkeys(t.name for t in request.topics)]
        return CreateTopicsResponse(topics=tuple(ordered))

    async def delete_topics(
        self, request: DeleteTopicsRequest, conn: ConnectionInfo
    ) -> DeleteTopicsResponse:
        if not self.config["delete.topic.enable"]:
            return DeleteTopicsResponse(
                responses=tuple(
                    DeletableTopicResult(
                        name=n,
                        error_code=int(ErrorCode.TOPIC_DELETION_DISABLED),
                        error_message="topic deletion is disabled (delete.topic.enable=false)",
                    )
                    for n in request.topic_names
                )
            )
        try:
            response = await self._forward(request)
        except KafkaError as exc:
            return DeleteTopicsResponse(
                responses=tuple(
                    DeletableTopicResult(
                        name=n, error_code=int(exc.code), error_message=exc.message
                    )
                    for n in request.topic_names
                )
            )
        assert isinstance(response, DeleteTopicsResponse)
        return response

    async def incremental_alter_configs(
        self, request: IncrementalAlterConfigsRequest, conn: ConnectionInfo
    ) -> IncrementalAlterConfigsResponse:
        results: dict[int, AlterConfigsResourceResponse] = {}
        forward = []
        for i, resource in enumerate(request.resources):
            if resource.resource_type == ResourceType.TOPIC:
                forward.append((i, resource))
                continue
            if resource.resource_type == ResourceType.BROKER:
                message = (
                    "dynamic broker configs are not supported yet; set them in the broker's "
                    "config file"
                )
            else:
                message = f"unknown resource type {resource.resource_type}"
            results[i] = AlterConfigsResourceResponse(
                error_code=int(ErrorCode.INVALID_REQUEST),
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                error_message=message,
            )
        if forward:
            sub = replace(request, resources=tuple(r for _, r in forward))
            try:
                response = await self._forward(sub)
                answers = list(response.responses)  # type: ignore[attr-defined]
            except KafkaError as exc:
                answers = [
                    AlterConfigsResourceResponse(
                        error_code=int(exc.code),
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                        error_message=exc.message,
                    )
                    for _, r in forward
                ]
            for (i, _), answer in zip(forward, answers, strict=False):
                results[i] = answer
        return IncrementalAlterConfigsResponse(responses=tuple(results[i] for i in sorted(results)))

    # -- DescribeConfigs ------------------------------------------------------------------

    async def describe_configs(
        self, request: DescribeConfigsRequest, conn: ConnectionInfo
    ) -> DescribeConfigsResponse:
        results = []
        for resource in request.resources:
            try:
                if resource.resource_type == ResourceType.TOPIC:
                    entries = self._describe_topic(resource.resource_name, request)
                elif resource.resource_type == ResourceType.BROKER:
                    entries = self._describe_broker(resource.resource_name, request)
                else:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUEST,
                        f"unknown resource type {resource.resource_type}",
                    )
                wanted = resource.configuration_keys
                if wanted is not None:
                    entries = [e for e in entries if e.name in set(wanted)]
                results.append(
                    DescribeConfigsResult(
                        error_code=0,
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                        configs=tuple(entries),
                    )
                )
            except KafkaError as exc:
                results.append(
                    DescribeConfigsResult(
                        error_code=int(exc.code),
                        resource_type=resource.resource_type,
                        resource_name=resource.resource_name,
                        error_message=exc.message,
                    )
                )
        return DescribeConfigsResponse(results=tuple(results))

    def _describe_topic(
        self, name: str, request: DescribeConfigsRequest
    ) -> list[DescribeConfigsEntry]:
        image = self.publisher.image
        if image.topics.get_topic(name) is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return list(
            describe_topic_config_entries(
                image.configs.topic_configs(name),
                self.config.static_topic_defaults(),
                include_documentation=request.include_documentation,
            )
        )

    def _describe_broker(
        self, name: str, request: DescribeConfigsRequest
    ) -> list[DescribeConfigsEntry]:
        if name not in ("", str(self.node_id)):
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"this is broker {self.node_id}; ask broker {name} for its configs",
            )
        entries = []
        for key, definition in sorted(BROKER_CONFIGS.defs.items()):
            source = (
                ConfigSource.STATIC_BROKER_CONFIG
                if key in self.config.explicit
                else ConfigSource.DEFAULT_CONFIG
            )
            entries.append(
                DescribeConfigsEntry(
                    name=key,
                    value=self.config.describe_value(key),
                    read_only=True,
                    config_source=int(source),
                    documentation=definition.doc if request.include_documentation else None,
                )
            )
        return entries


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


def _summary(result: FetchPartitionResponse) -> PartitionResult:
    """What a fetch session compares of one partition's answer."""
    return PartitionResult(
        high_watermark=result.high_watermark,
        log_start_offset=result.log_start_offset,
        records_size=len(result.records),
        error_code=result.error_code,
        diverging_epoch=result.diverging_epoch is not None,
    )


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


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


def _replication_message(code: ErrorCode, tp: TopicPartition, partition: Partition) -> str:
    state = partition.state
    if code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        return (
            f"{tp}: appended, but the ISR {list(state.maximal_isr)} shrank below the "
            f"{state.effective_min_isr()} in-sync replicas required (min.insync.replicas="
            f"{state.min_insync_replicas})"
        )
    if code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return f"{tp}: this broker stopped leading the partition before the write was replicated"
    return f"{tp}: {code.name}"
