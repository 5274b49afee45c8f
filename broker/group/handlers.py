"""The group APIs' handlers (Kafka's KafkaApis.handleFindCoordinatorRequest,
handleJoinGroupRequest, ... for the classic protocol): FindCoordinator creates
`__consumer_offsets` on first use and names the leader of the group's partition; the others
go to this broker's coordinator (NOT_COORDINATOR when it does not lead the group's partition).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import structlog
import trio

from broker.group.coordinator import GroupCoordinatorCore
from broker.group.driver import GroupCoordinatorDriver
from broker.group.effects import sync_error
from broker.group.hashing import OFFSETS_TOPIC
from broker.group.records import OffsetKey, OffsetValue
from broker.server import ConnectionInfo
from protocol.errors import ErrorCode
from protocol.messages import ApiKey
from protocol.messages.find_coordinator import (
    CoordinatorType,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from protocol.messages.group_offsets import (
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopicResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopicResponse,
)
from protocol.messages.groups import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMemberResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from protocol.messages.metadata import MetadataBroker
from protocol.messages.topics import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from protocol.metadata.image import MetadataImage
from protocol.names import TopicPartition

log = structlog.get_logger("broker.group")

STATIC_MEMBERSHIP = "static membership (group.instance.id) is not supported"


class ClusterView(Protocol):
    """What FindCoordinator needs of the broker (broker.handlers.metadata.MetadataHandler
    provides it)."""

    def image(self) -> MetadataImage: ...

    def alive_brokers(self, listener: str) -> tuple[MetadataBroker, ...]: ...

    async def create_topics(
        self, request: CreateTopicsRequest, conn: ConnectionInfo
    ) -> CreateTopicsResponse: ...


class GroupApis:
    def __init__(
        self,
        driver: GroupCoordinatorDriver,
        cluster: ClusterView,
        *,
        offsets_topic: CreatableTopic,
        client_id: Callable[[], str] = lambda: "",
    ) -> None:
        self.driver = driver
        self.core: GroupCoordinatorCore = driver.core
        self.cluster = cluster
        self.offsets_topic = offsets_topic
        """How `__consumer_offsets` is created (partitions, replication factor, configs)."""
        self.client_id = client_id
        self._creating: trio.Event | None = None
        self._creation_error: str = ""

    def handlers(self) -> Mapping[ApiKey, Callable[[Any, ConnectionInfo], Awaitable[Any]]]:
        return {
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.JOIN_GROUP: self.join_group,
            ApiKey.SYNC_GROUP: self.sync_group,
            ApiKey.HEARTBEAT: self.heartbeat,
            ApiKey.LEAVE_GROUP: self.leave_group,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.DESCRIBE_GROUPS: self.describe_groups,
            ApiKey.LIST_GROUPS: self.list_groups,
        }

    def now_ms(self) -> int:
        return self.driver.clock_ms()

    # -- FindCoordinator -------------------------------------------------------------------

    async def find_coordinator(
        self, request: FindCoordinatorRequest, conn: ConnectionInfo
    ) -> FindCoordinatorResponse:
        if request.key_type != CoordinatorType.GROUP:
            return _no_coordinator(
                ErrorCode.UNSUPPORTED_VERSION,
                f"coordinator type {request.key_type} is not served (no transactions)",
            )
        if not request.key:
            return _no_coordinator(ErrorCode.INVALID_REQUEST, "the group id must not be empty")
        topic = self.cluster.image().topics.get_topic(OFFSETS_TOPIC)
        if topic is None:
            await self._create_offsets_topic(conn)
            topic = self.cluster.image().topics.get_topic(OFFSETS_TOPIC)
            if topic is None:
                return _no_coordinator(
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    f"{OFFSETS_TOPIC} could not be created yet: {self._creation_error}"
                    if self._creation_error
                    else f"{OFFSETS_TOPIC} is being created; retry",
                )
        index = self.core.partition_of(request.key)
        registration = topic.partitions.get(index)
        leader = registration.leader if registration is not None else -1
        brokers = {b.node_id: b for b in self.cluster.alive_brokers(conn.listener)}
        if leader not in brokers:
            return _no_coordinator(
                ErrorCode.COORDINATOR_NOT_AVAILABLE,
                f"{OFFSETS_TOPIC}-{index}, the partition of group {request.key!r}, has no "
                f"available leader (leader: {leader})",
            )
        found = brokers[leader]
        return FindCoordinatorResponse(node_id=found.node_id, host=found.host, port=found.port)

    async def _create_offsets_topic(self, conn: ConnectionInfo) -> None:
        """Create `__consumer_offsets` once per broker at a time; concurrent callers wait for
        the same attempt (bounded by the creation's own request timeout)."""
        if self._creating is not None:
            await self._creating.wait()
            return
        self._creating = trio.Event()
        try:
            response = await self.cluster.create_topics(
                CreateTopicsRequest(topics=(self.offsets_topic,)), conn
            )
            result = response.topics[0]
            if result.error_code not in (0, ErrorCode.TOPIC_ALREADY_EXISTS):
                self._creation_error = result.error_message or ErrorCode(result.error_code).name
                log.warning("creating the offsets topic failed", error=self._creation_error)
            else:
                self._creation_error = ""
                log.info("offsets topic created", topic=OFFSETS_TOPIC)
        finally:
            self._creating.set()
            self._creating = None

    # -- membership ------------------------------------------------------------------------

    async def join_group(
        self, request: JoinGroupRequest, conn: ConnectionInfo
    ) -> JoinGroupResponse:
        if request.group_instance_id is not None:
            return JoinGroupResponse(
                error_code=int(ErrorCode.INVALID_REQUEST),
                error_message=STATIC_MEMBERSHIP,
                member_id=request.member_id,
            )
        outcome = self.core.join(
            group_id=request.group_id,
            member_id=request.member_id,
            client_id=self.client_id(),
            client_host=conn.peer.rsplit(":", 1)[0],
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=tuple((p.name, p.metadata) for p in request.protocols),
            now_ms=self.now_ms(),
        )
        response = await self.driver.answer(outcome)
        assert isinstance(response, JoinGroupResponse)
        return response

    async def sync_group(
        self, request: SyncGroupRequest, conn: ConnectionInfo
    ) -> SyncGroupResponse:
        if request.group_instance_id is not None:
            return sync_error(ErrorCode.INVALID_REQUEST, STATIC_MEMBERSHIP)
        outcome = self.core.sync(
            group_id=request.group_id,
            member_id=request.member_id,
            generation=request.generation_id,
            protocol_type=request.protocol_type,
            protocol_name=request.protocol_name,
            assignments={a.member_id: a.assignment for a in request.assignments},
            now_ms=self.now_ms(),
        )
        response = await self.driver.answer(outcome)
        assert isinstance(response, SyncGroupResponse)
        return response

    async def heartbeat(self, request: HeartbeatRequest, conn: ConnectionInfo) -> HeartbeatResponse:
        if request.group_instance_id is not None:
            return HeartbeatResponse(
                error_code=int(ErrorCode.INVALID_REQUEST), error_message=STATIC_MEMBERSHIP
            )
        code, message = self.core.heartbeat(
            group_id=request.group_id,
            member_id=request.member_id,
            generation=request.generation_id,
            now_ms=self.now_ms(),
        )
        # No timer wake-up: a heartbeat only moves a deadline later, and the timer looks
        # again when the earlier one passes.
        return HeartbeatResponse(error_code=int(code), error_message=message or None)

    async def leave_group(
        self, request: LeaveGroupRequest, conn: ConnectionInfo
    ) -> LeaveGroupResponse:
        code, message, results, effects = self.core.leave(
            group_id=request.group_id,
            member_ids=[m.member_id for m in request.members],
            now_ms=self.now_ms(),
        )
        self.driver.apply(effects)
        if code != ErrorCode.NONE:
            return LeaveGroupResponse(error_code=int(code), error_message=message)
        return LeaveGroupResponse(
            members=tuple(
                LeaveGroupMemberResponse(
                    member_id=member_id,
                    error_code=int(err),
                    error_message=None
                    if err == ErrorCode.NONE
                    else f"group {request.group_id!r} has no member {member_id!r}",
                )
                for member_id, err in results
            )
        )

    # -- offsets ---------------------------------------------------------------------------

    async def offset_commit(
        self, request: OffsetCommitRequest, conn: ConnectionInfo
    ) -> OffsetCommitResponse:
        if request.group_instance_id is not None:
            code, message = ErrorCode.INVALID_REQUEST, STATIC_MEMBERSHIP
        else:
            code, message = self.core.validate_commit(
                group_id=request.group_id,
                member_id=request.member_id,
                generation=request.generation_id,
                now_ms=self.now_ms(),
            )
        errors, offsets = self._commit_partitions(request, code, message)
        if offsets:
            entries = [
                (OffsetKey(request.group_id, tp.topic, tp.partition), v)
                for tp, v in offsets.items()
            ]
            store_code, store_message = await self.driver.append(
                self.core.partition_of(request.group_id), entries
            )
            if store_code == ErrorCode.NONE:
                self.core.offsets_committed(request.group_id, offsets)
            else:
                errors.update({tp: (store_code, store_message) for tp in offsets})
        return _commit_response(request, errors)

    def _commit_partitions(
        self, request: OffsetCommitRequest, code: ErrorCode, message: str
    ) -> tuple[dict[TopicPartition, tuple[ErrorCode, str]], dict[TopicPartition, OffsetValue]]:
        """(errors, offsets to append): the group's error for every partition, else per
        partition UNKNOWN_TOPIC_OR_PARTITION or OFFSET_METADATA_TOO_LARGE (as Kafka's
        handleOffsetCommitRequest)."""
        errors: dict[TopicPartition, tuple[ErrorCode, str]] = {}
        offsets: dict[TopicPartition, OffsetValue] = {}
        image = self.cluster.image()
        now = self.now_ms()
        for topic in request.topics:
            known = image.topics.get_topic(topic.name)
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                problem = self.core.metadata_problem(p.committed_metadata)
                if code != ErrorCode.NONE:
                    errors[tp] = (code, message)
                elif known is None or p.partition_index not in known.partitions:
                    errors[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} does not exist")
                elif problem is not None:
                    errors[tp] = (ErrorCode.OFFSET_METADATA_TOO_LARGE, problem)
                else:
                    offsets[tp] = OffsetValue(
                        p.committed_offset, p.committed_leader_epoch, p.committed_metadata, now
                    )
        return errors, offsets

    async def offset_fetch(
        self, request: OffsetFetchRequest, conn: ConnectionInfo
    ) -> OffsetFetchResponse:
        code, message = self.core.group_error(request.group_id)
        if code != ErrorCode.NONE:
            return OffsetFetchResponse(error_code=int(code), error_message=message)
        wanted = None
        if request.topics is not None:
            wanted = [
                TopicPartition(t.name, i) for t in request.topics for i in t.partition_indexes
            ]
        found = self.core.fetch_offsets(request.group_id, wanted)
        by_topic: dict[str, list[OffsetFetchPartitionResponse]] = {}
        for tp, value in found.items():
            by_topic.setdefault(tp.topic, []).append(
                OffsetFetchPartitionResponse(partition_index=tp.partition, committed_offset=-1)
                if value is None
                else OffsetFetchPartitionResponse(
                    partition_index=tp.partition,
                    committed_offset=value.offset,
                    committed_leader_epoch=value.leader_epoch,
                    metadata=value.metadata,
                )
            )
        return OffsetFetchResponse(
            topics=tuple(
                OffsetFetchTopicResponse(name=n, partitions=tuple(ps)) for n, ps in by_topic.items()
            )
        )

    # -- DescribeGroups and ListGroups -----------------------------------------------------

    async def describe_groups(
        self, request: DescribeGroupsRequest, conn: ConnectionInfo
    ) -> DescribeGroupsResponse:
        return DescribeGroupsResponse(groups=tuple(self.core.describe(g) for g in request.groups))

    async def list_groups(
        self, request: ListGroupsRequest, conn: ConnectionInfo
    ) -> ListGroupsResponse:
        groups = tuple(self.core.list_groups(request.states_filter))
        if self.core.loading():
            return ListGroupsResponse(
                error_code=int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
                error_message="some offsets partitions are still loading; listed the loaded groups",
                groups=groups,
            )
        return ListGroupsResponse(groups=groups)


def _no_coordinator(code: ErrorCode, message: str) -> FindCoordinatorResponse:
    return FindCoordinatorResponse(error_code=int(code), error_message=message)


def _commit_response(
    request: OffsetCommitRequest, errors: dict[TopicPartition, tuple[ErrorCode, str]]
) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=tuple(
            OffsetCommitTopicResponse(
                name=topic.name,
                partitions=tuple(
                    _commit_result(
                        p.partition_index, errors.get(TopicPartition(topic.name, p.partition_index))
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        )
    )


def _commit_result(
    index: int, error: tuple[ErrorCode, str] | None
) -> OffsetCommitPartitionResponse:
    if error is None:
        return OffsetCommitPartitionResponse(partition_index=index, error_code=0)
    return OffsetCommitPartitionResponse(
        partition_index=index, error_code=int(error[0]), error_message=error[1]
    )


def offsets_topic_spec(
    *, partitions: int, replication_factor: int, segment_bytes: int
) -> CreatableTopic:
    """Kafka's offsets topic: compacted, the producer's compression, its own segment size."""
    return CreatableTopic(
        name=OFFSETS_TOPIC,
        num_partitions=partitions,
        replication_factor=replication_factor,
        configs=(
            CreatableTopicConfig(name="cleanup.policy", value="compact"),
            CreatableTopicConfig(name="compression.type", value="producer"),
            CreatableTopicConfig(name="segment.bytes", value=str(segment_bytes)),
        ),
    )
