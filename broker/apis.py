"""Request dispatch (Kafka's KafkaApis): one method per API this broker serves.

Data-path APIs (Produce, Fetch, ListOffsets) work on the local partitions; Metadata and
DescribeConfigs read the broker's metadata image; CreateTopics, DeleteTopics and
IncrementalAlterConfigs are forwarded to the controller through `ControllerChannel`, and the
broker answers only once its own image has the result, so a client that creates a topic can
produce to it with its next request.
"""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import structlog
import trio

from broker.config import BROKER_CONFIGS, BrokerConfig
from broker.metadata_publisher import MetadataPublisher
from broker.partitions import Partition, PartitionManager
from broker.ports import ControllerChannel, MetadataSource
from broker.purgatory import FetchPurgatory
from broker.server import BoundListener, ConnectionInfo
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
from protocol.messages.fetch import (
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FetchTopicResponse,
)
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
from protocol.messages.produce import (
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)
from protocol.messages.topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from protocol.metadata.describe import describe_topic_config_entries
from protocol.names import TopicPartition, is_internal, topic_name_problem
from protocol.record_batch import iter_batches

log = structlog.get_logger("broker.apis")

Handler = Callable[[Any, ConnectionInfo], Any]


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
        metadata_source: MetadataSource,
        controller: ControllerChannel,
        purgatory: FetchPurgatory,
        cluster_id: str,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.partitions = partitions
        self.publisher = publisher
        self.metadata_source = metadata_source
        self.controller = controller
        self.purgatory = purgatory
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
        }

    async def handle(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        handler = self._handlers.get(request.api_key)
        if handler is None:
            return error_response(
                type(request.body),
                ErrorCode.UNSUPPORTED_VERSION,
                f"{request.api_key.name} is not served by this broker",
            )
        return await handler(request.body, conn)

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
                results.append(self._append(TopicPartition(topic.name, part.index), part.records))
            topics.append(ProduceTopicResponse(name=topic.name, partitions=tuple(results)))
        if acks == 0:
            return None
        return ProduceResponse(topics=tuple(topics))

    def _append(self, tp: TopicPartition, records: bytes) -> ProducePartitionResponse:
        try:
            if is_internal(tp.topic):
                raise KafkaError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"cannot produce to internal topic {tp.topic}",
                )
            if not records:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"no record batch for {tp}")
            partition = self.partitions.leader(tp)
            info = partition.log.append_as_leader(records, partition.state.leader_epoch)
        except Exception as exc:
            code, message = _error(exc)
            if code == ErrorCode.KAFKA_STORAGE_ERROR:
                log.warning("append failed", topic_partition=str(tp), error=message)
            elif code == ErrorCode.UNKNOWN_SERVER_ERROR:
                log.exception("append failed", topic_partition=str(tp))
            return ProducePartitionResponse(
                index=tp.partition, error_code=code, error_message=message
            )
        if partition.state.update_local_leo(partition.log.log_end_offset):
            self.purgatory.notify(tp)
        return ProducePartitionResponse(
            index=tp.partition,
            error_code=0,
            base_offset=info.first_offset,
            log_start_offset=partition.log.log_start_offset,
        )

    # -- Fetch ----------------------------------------------------------------------------

    async def fetch(self, request: FetchRequest, conn: ConnectionInfo) -> FetchResponse:
        deadline = trio.current_time() + max(request.max_wait_ms, 0) / 1000
        tps = [TopicPartition(t.name, p.index) for t in request.topics for p in t.partitions]
        while True:
            response, total, errors = self._read_fetch(request)
            if (
                total >= request.min_bytes
                or errors
                or request.max_wait_ms <= 0
                or trio.current_time() >= deadline
            ):
                return response
            event = self.purgatory.watch(tps)
            try:
                with trio.move_on_at(deadline):
                    await event.wait()
            finally:
                self.purgatory.unwatch(tps, event)

    def _read_fetch(self, request: FetchRequest) -> tuple[FetchResponse, int, bool]:
        budget = min(request.max_bytes, int(self.config["fetch.max.bytes"]))
        total = 0
        errors = False
        topics = []
        for topic in request.topics:
            results = []
            for part in topic.partitions:
                tp = TopicPartition(topic.name, part.index)
                result = self._read_partition(
                    tp,
                    part.fetch_offset,
                    min(part.partition_max_bytes, budget - total),
                    min_one=total == 0,
                    replica=request.replica_id >= 0,
                )
                total += len(result.records)
                errors = errors or result.error_code != 0
                results.append(result)
            topics.append(FetchTopicResponse(name=topic.name, partitions=tuple(results)))
        return FetchResponse(topics=tuple(topics)), total, errors

    def _read_partition(
        self, tp: TopicPartition, offset: int, max_bytes: int, *, min_one: bool, replica: bool
    ) -> FetchPartitionResponse:
        try:
            partition = self.partitions.leader(tp)
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

    def _advertised(self, listener: str) -> tuple[str, int]:
        """This broker's advertised address for `listener` (bound port when 0 was asked)."""
        bound = {b.name: b for b in self.bound}
        for adv in self.config.advertised_listeners:
            if adv.name == listener:
                port = adv.port or (bound[listener].port if listener in bound else 0)
                return adv.host or socket.getfqdn(), port
        b = bound.get(listener)
        if b is None:
            return socket.getfqdn(), 0
        host = b.host if b.host not in ("", "0.0.0.0", "::") else socket.getfqdn()
        return host, b.port

    def _brokers(self, listener: str) -> tuple[MetadataBroker, ...]:
        host, port = self._advertised(listener)
        rack = self.config["broker.rack"] or None
        brokers = {
            self.node_id: MetadataBroker(node_id=self.node_id, host=host, port=port, rack=rack)
        }
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

    def _topic_metadata(self, name: str) -> MetadataTopic | None:
        topic = self.publisher.image.topics.get_topic(name)
        if topic is None:
            return None
        parts = []
        for pid in sorted(topic.partitions):
            reg = topic.partitions[pid]
            parts.append(
                MetadataPartition(
                    error_code=0 if reg.leader >= 0 else int(ErrorCode.LEADER_NOT_AVAILABLE),
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
            described = self._topic_metadata(name)
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
            brokers=self._brokers(conn.listener),
            cluster_id=self.publisher.image.cluster_id or self.cluster_id,
            controller_id=self.node_id,
            topics=tuple(topics),
        )

    # -- Forwarded to the controller --------------------------------------------------------

    async def _forward(self, request: Request) -> Response:
        """Send to the controller, then wait until this broker's image has the result."""
        response = await self.controller.submit(request)
        await self.publisher.wait_for(self.metadata_source.committed_offset())
        return response

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
