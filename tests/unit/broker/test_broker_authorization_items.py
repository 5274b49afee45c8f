"""Requests naming several topics (groups, config resources) answered per item, as Kafka's
KafkaApis answers them: through the router, the handler is asked only for what the principal
may use, and the refused items come back in the answer in the request's order. Before, the
whole request was refused when one item was not allowed."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import trio

from broker.authorization import RequestAuthorization
from broker.handlers.fetch import FetchHandler
from broker.handlers.router import ApiRouter
from broker.purgatory import FetchPurgatory
from broker.replica.fetch_session import FetchSessionCache
from protocol.acls import CLUSTER_NAME, AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import Request, Response
from protocol.messages.configs import (
    AlterableConfig,
    AlterConfigsResource,
    AlterConfigsResourceResponse,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
)
from protocol.messages.fetch import (
    FetchPartition,
    FetchPartitionResponse,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)
from protocol.messages.group_offsets import (
    OffsetCommitPartition,
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetCommitTopicResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopic,
    OffsetFetchTopicResponse,
)
from protocol.messages.groups import DescribedGroup, DescribeGroupsRequest, DescribeGroupsResponse
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    ListOffsetsTopicResponse,
)
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderPartition,
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopic,
    OffsetForLeaderTopicResult,
)
from protocol.messages.produce import (
    ProducePartition,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopic,
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
from protocol.names import TopicPartition
from tests.unit.broker.test_broker_authorization import ALICE, allow, envelope, image_with

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
OK = ErrorCode.NONE
TOPIC_REFUSED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


async def route(
    auth: RequestAuthorization, body: Request, answer: Callable[[Any], Response]
) -> tuple[list[Any], Any]:
    """(the bodies the handler was given, the router's answer) for `body` from alice."""
    asked: list[Any] = []

    async def handler(request: Any, conn: Any) -> Response:
        asked.append(request)
        return answer(request)

    router = ApiRouter(authorization=auth)
    router.add_handlers({type(body).API_KEY: handler})
    return asked, await router.handle(envelope(body), ALICE)


def writes(*topics: str, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=1000, topics=tuple(
        ProduceTopic(name=t, partitions=(ProducePartition(index=0, records=b"r"),
                                         ProducePartition(index=1, records=b"r")))
        for t in topics
    ))  # fmt: skip


def appended(body: ProduceRequest) -> ProduceResponse:
    return ProduceResponse(topics=tuple(
        ProduceTopicResponse(name=t.name, partitions=tuple(
            ProducePartitionResponse(index=p.index, error_code=0, base_offset=7)
            for p in t.partitions
        ))
        for t in body.topics
    ))  # fmt: skip


def partition_errors(response: Any, name: str = "name") -> list[tuple[str, list[ErrorCode]]]:
    return [
        (getattr(t, name), [ErrorCode(p.error_code) for p in t.partitions]) for t in response.topics
    ]


async def test_produce_appends_to_the_allowed_topics_and_refuses_the_others() -> None:
    image = image_with(allow(T, "a", AclOperation.WRITE), allow(T, "c", AclOperation.WRITE))
    auth = RequestAuthorization(lambda: image)
    asked, answer = await route(auth, writes("a", "b", "c"), appended)
    assert [t.name for t in asked[0].topics] == ["a", "c"]
    assert answer.error_code == 0
    assert partition_errors(answer) == [
        ("a", [OK, OK]), ("b", [TOPIC_REFUSED, TOPIC_REFUSED]), ("c", [OK, OK]),
    ]  # fmt: skip
    assert [p.base_offset for p in answer.topics[0].partitions] == [7, 7]
    refused = answer.topics[1].partitions[0]
    assert (refused.base_offset, refused.error_message) == (
        -1,
        "Not authorized to access topics: [b]",
    )
    # No topic left: the log is not asked, the refusals answer alone ...
    asked, answer = await route(auth, writes("b"), appended)
    assert asked == []
    assert partition_errors(answer) == [("b", [TOPIC_REFUSED, TOPIC_REFUSED])]
    # ... and an acks=0 Produce gets no answer, as any acks=0 Produce.
    asked, answer = await route(auth, writes("b", acks=0), appended)
    assert asked == [] and answer is None


async def test_list_offsets_and_offset_for_leader_epoch_answer_per_topic() -> None:
    image = image_with(allow(T, "a", AclOperation.DESCRIBE))
    auth = RequestAuthorization(lambda: image)
    lookup = ListOffsetsRequest(topics=tuple(
        ListOffsetsTopic(name=t, partitions=(ListOffsetsPartition(index=0, timestamp=-1),))
        for t in ("b", "a")
    ))  # fmt: skip

    def offsets(body: ListOffsetsRequest) -> ListOffsetsResponse:
        return ListOffsetsResponse(topics=tuple(
            ListOffsetsTopicResponse(name=t.name, partitions=(
                ListOffsetsPartitionResponse(index=0, error_code=0, offset=42),))
            for t in body.topics
        ))  # fmt: skip

    asked, answer = await route(auth, lookup, offsets)
    assert [t.name for t in asked[0].topics] == ["a"]
    assert partition_errors(answer) == [("b", [TOPIC_REFUSED]), ("a", [OK])]
    assert [t.partitions[0].offset for t in answer.topics] == [-1, 42]

    epochs = OffsetForLeaderEpochRequest(replica_id=-1, topics=tuple(
        OffsetForLeaderTopic(topic=t, partitions=(OffsetForLeaderPartition(partition=0,
                                                                           leader_epoch=3),))
        for t in ("a", "b")
    ))  # fmt: skip

    def ends(body: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
        return OffsetForLeaderEpochResponse(topics=tuple(
            OffsetForLeaderTopicResult(topic=t.topic, partitions=(
                OffsetForLeaderPartitionResult(error_code=0, partition=0, leader_epoch=3,
                                               end_offset=9),))
            for t in body.topics
        ))  # fmt: skip

    asked, answer = await route(auth, epochs, ends)
    assert [t.topic for t in asked[0].topics] == ["a"]
    assert partition_errors(answer, "topic") == [("a", [OK]), ("b", [TOPIC_REFUSED])]
    # CLUSTER_ACTION (a follower's truncation check) allows every topic.
    node = image_with(allow(C, CLUSTER_NAME, AclOperation.CLUSTER_ACTION))
    asked, answer = await route(RequestAuthorization(lambda: node), epochs, ends)
    assert [t.topic for t in asked[0].topics] == ["a", "b"]
    assert partition_errors(answer, "topic") == [("a", [OK]), ("b", [OK])]


async def test_group_offsets_check_the_group_whole_then_each_topic() -> None:
    image = image_with(allow(G, "g", AclOperation.READ), allow(T, "a", AclOperation.READ))
    auth = RequestAuthorization(lambda: image)

    def commit(group: str) -> OffsetCommitRequest:
        return OffsetCommitRequest(group_id=group, generation_id=1, member_id="m", topics=tuple(
            OffsetCommitTopic(name=t, partitions=(OffsetCommitPartition(partition_index=0,
                                                                        committed_offset=5),))
            for t in ("a", "b")
        ))  # fmt: skip

    def committed(body: OffsetCommitRequest) -> OffsetCommitResponse:
        return OffsetCommitResponse(topics=tuple(
            OffsetCommitTopicResponse(name=t.name, partitions=(
                OffsetCommitPartitionResponse(partition_index=0, error_code=0),))
            for t in body.topics
        ))  # fmt: skip

    asked, answer = await route(auth, commit("g"), committed)
    assert [t.name for t in asked[0].topics] == ["a"]
    assert partition_errors(answer) == [("a", [OK]), ("b", [TOPIC_REFUSED])]
    asked, answer = await route(auth, commit("h"), committed)
    assert asked == [] and answer.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED

    describe_group = image_with(allow(G, "g", AclOperation.DESCRIBE),
                                allow(T, "a", AclOperation.DESCRIBE))  # fmt: skip
    auth = RequestAuthorization(lambda: describe_group)
    fetch = OffsetFetchRequest(group_id="g", topics=tuple(
        OffsetFetchTopic(name=t, partition_indexes=(0, 1)) for t in ("b", "a")
    ))  # fmt: skip

    def positions(body: OffsetFetchRequest) -> OffsetFetchResponse:
        return OffsetFetchResponse(topics=tuple(
            OffsetFetchTopicResponse(name=t.name, partitions=tuple(
                OffsetFetchPartitionResponse(partition_index=i, committed_offset=11)
                for i in t.partition_indexes))
            for t in body.topics
        ))  # fmt: skip

    asked, answer = await route(auth, fetch, positions)
    assert [t.name for t in asked[0].topics] == ["a"]
    assert partition_errors(answer) == [("b", [TOPIC_REFUSED] * 2), ("a", [OK, OK])]
    assert [p.committed_offset for t in answer.topics for p in t.partitions] == [-1, -1, 11, 11]
    # Every topic refused: the coordinator is still asked (its group errors come first).
    only_b = OffsetFetchRequest(group_id="g", topics=(OffsetFetchTopic(name="b",
                                                                       partition_indexes=(0,)),))  # fmt: skip

    def not_coordinator(body: OffsetFetchRequest) -> OffsetFetchResponse:
        return OffsetFetchResponse(error_code=int(ErrorCode.NOT_COORDINATOR))

    asked, answer = await route(auth, only_b, not_coordinator)
    assert asked[0].topics == ()
    assert (answer.error_code, answer.topics) == (ErrorCode.NOT_COORDINATOR, ())
    asked, answer = await route(auth, only_b, positions)
    assert partition_errors(answer) == [("b", [TOPIC_REFUSED])]


async def test_topic_admin_requests_answer_per_topic() -> None:
    image = image_with(
        allow(T, "a", AclOperation.CREATE), allow(T, "a", AclOperation.DELETE),
        allow(T, "a", AclOperation.ALTER), allow(T, "c", AclOperation.DELETE),
    )  # fmt: skip
    auth = RequestAuthorization(lambda: image)

    create = CreateTopicsRequest(topics=tuple(
        CreatableTopic(name=t, num_partitions=1, replication_factor=1) for t in ("a", "b")
    ))  # fmt: skip

    def created(body: CreateTopicsRequest) -> CreateTopicsResponse:
        return CreateTopicsResponse(topics=tuple(
            CreatableTopicResult(name=t.name, error_code=0, num_partitions=1) for t in body.topics
        ))  # fmt: skip

    asked, answer = await route(auth, create, created)
    assert [t.name for t in asked[0].topics] == ["a"]
    assert [(t.name, ErrorCode(t.error_code)) for t in answer.topics] == [
        ("a", OK), ("b", TOPIC_REFUSED),
    ]  # fmt: skip
    # CREATE on the cluster allows every topic.
    creator = image_with(allow(C, CLUSTER_NAME, AclOperation.CREATE))
    asked, _ = await route(RequestAuthorization(lambda: creator), create, created)
    assert [t.name for t in asked[0].topics] == ["a", "b"]

    delete = DeleteTopicsRequest(topic_names=("a", "b", "c", "b"))

    def deleted(body: DeleteTopicsRequest) -> DeleteTopicsResponse:
        # A controller answers in any order: the merge goes by name, in the request's order.
        return DeleteTopicsResponse(responses=tuple(
            DeletableTopicResult(name=n, error_code=0) for n in reversed(body.topic_names)
        ))  # fmt: skip

    asked, answer = await route(auth, delete, deleted)
    assert asked[0].topic_names == ("a", "c")
    assert [(r.name, ErrorCode(r.error_code)) for r in answer.responses] == [
        ("a", OK), ("b", TOPIC_REFUSED), ("c", OK),
    ]  # fmt: skip
    asked, answer = await route(auth, DeleteTopicsRequest(topic_names=("b",)), deleted)
    assert asked == []
    assert [(r.name, r.error_message) for r in answer.responses] == [
        ("b", "Not authorized to access topics: [b]")
    ]

    grow = CreatePartitionsRequest(topics=tuple(
        CreatePartitionsTopic(name=t, count=3) for t in ("c", "a")
    ))  # fmt: skip

    def grown(body: CreatePartitionsRequest) -> CreatePartitionsResponse:
        return CreatePartitionsResponse(results=tuple(
            CreatePartitionsTopicResult(name=t.name, error_code=0) for t in body.topics
        ))  # fmt: skip

    asked, answer = await route(auth, grow, grown)
    assert [t.name for t in asked[0].topics] == ["a"]
    assert [(r.name, ErrorCode(r.error_code)) for r in answer.results] == [
        ("c", TOPIC_REFUSED), ("a", OK),
    ]  # fmt: skip


async def test_configs_answer_per_resource() -> None:
    image = image_with(allow(T, "a", AclOperation.ALTER_CONFIGS))  # implies DESCRIBE_CONFIGS
    auth = RequestAuthorization(lambda: image)
    describe = DescribeConfigsRequest(resources=(
        DescribeConfigsResource(resource_type=2, resource_name="a"),
        DescribeConfigsResource(resource_type=4, resource_name="1"),
        DescribeConfigsResource(resource_type=2, resource_name="b"),
        DescribeConfigsResource(resource_type=0, resource_name="?"),  # the handler's to refuse
    ))  # fmt: skip

    def described(body: DescribeConfigsRequest) -> DescribeConfigsResponse:
        return DescribeConfigsResponse(results=tuple(
            DescribeConfigsResult(error_code=0 if r.resource_type else 42,
                                  resource_type=r.resource_type, resource_name=r.resource_name)
            for r in body.resources
        ))  # fmt: skip

    asked, answer = await route(auth, describe, described)
    assert [r.resource_name for r in asked[0].resources] == ["a", "?"]
    assert [(r.resource_name, r.error_code) for r in answer.results] == [
        ("a", 0),
        ("1", ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
        ("b", TOPIC_REFUSED),
        ("?", 42),
    ]
    assert answer.results[1].error_message == "Cluster authorization failed."

    alter = IncrementalAlterConfigsRequest(resources=tuple(
        AlterConfigsResource(resource_type=2, resource_name=t, configs=(
            AlterableConfig(name="retention.ms", config_operation=0, value="1"),))
        for t in ("b", "a")
    ))  # fmt: skip

    def altered(body: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
        return IncrementalAlterConfigsResponse(responses=tuple(
            AlterConfigsResourceResponse(error_code=0, resource_type=r.resource_type,
                                         resource_name=r.resource_name)
            for r in body.resources
        ))  # fmt: skip

    asked, answer = await route(auth, alter, altered)
    assert [r.resource_name for r in asked[0].resources] == ["a"]
    assert [(r.resource_name, r.error_code) for r in answer.responses] == [
        ("b", TOPIC_REFUSED), ("a", 0),
    ]  # fmt: skip


async def test_describe_groups_answers_per_group() -> None:
    image = image_with(allow(G, "g", AclOperation.DESCRIBE))
    auth = RequestAuthorization(lambda: image)

    def described(body: DescribeGroupsRequest) -> DescribeGroupsResponse:
        return DescribeGroupsResponse(groups=tuple(
            DescribedGroup(group_id=g, error_code=0, group_state="Stable",
                           protocol_type="consumer", protocol_data="range")
            for g in body.groups
        ))  # fmt: skip

    asked, answer = await route(auth, DescribeGroupsRequest(groups=("h", "g")), described)
    assert asked[0].groups == ("g",)
    assert [(g.group_id, g.error_code, g.group_state) for g in answer.groups] == [
        ("h", ErrorCode.GROUP_AUTHORIZATION_FAILED, ""), ("g", 0, "Stable"),
    ]  # fmt: skip


class Reader:
    """A PartitionReader whose every partition has 3 bytes of records, HW 5."""

    def __init__(self) -> None:
        self.partitions = SimpleNamespace(clock=SimpleNamespace(monotonic_ms=lambda: 0))
        self.read_from: list[TopicPartition] = []

    def read(self, tp: TopicPartition, offset: int, max_bytes: int, **_: Any) -> Any:
        self.read_from.append(tp)
        return FetchPartitionResponse(
            index=tp.partition, error_code=0, high_watermark=5, log_start_offset=0, records=b"abc"
        )


async def test_a_consumer_fetch_serves_the_readable_partitions_of_its_session() -> None:
    images = [image_with(allow(T, "a", AclOperation.READ))]
    auth = RequestAuthorization(lambda: images[-1])
    reader = Reader()
    handler = FetchHandler(
        reader=reader,  # type: ignore[arg-type]
        purgatory=FetchPurgatory(),
        sessions=FetchSessionCache(),
        fetch_max_bytes=1 << 20,
        denied_reads=auth.denied_reads,
    )
    full = FetchRequest(max_wait_ms=500, min_bytes=1, session_epoch=0, topics=tuple(
        FetchTopic(name=t, partitions=(FetchPartition(index=0, fetch_offset=0),))
        for t in ("b", "a")
    ))  # fmt: skip
    answer: FetchResponse = await handler.fetch(full, ALICE)
    assert answer.error_code == 0 and answer.session_id > 0
    assert partition_errors(answer) == [("b", [TOPIC_REFUSED]), ("a", [OK])]
    assert [t.partitions[0].records for t in answer.topics] == [b"", b"abc"]
    assert reader.read_from == [TopicPartition("a", 0)]
    # The session's incremental fetches name no topic: b is refused again, a still served.
    incremental = FetchRequest(max_wait_ms=0, min_bytes=0, session_id=answer.session_id,
                               session_epoch=1, topics=())  # fmt: skip
    answer = await handler.fetch(incremental, ALICE)
    assert partition_errors(answer) == [("b", [TOPIC_REFUSED]), ("a", [OK])]
    # READ revoked: every partition refused, none read, answered at once.
    images.append(image_with())
    reader.read_from.clear()
    nothing = FetchRequest(max_wait_ms=60_000, min_bytes=1, session_id=answer.session_id,
                           session_epoch=2, topics=())  # fmt: skip
    with trio.fail_after(10):  # not the long poll's minute
        answer = await handler.fetch(nothing, ALICE)
    assert partition_errors(answer) == [("b", [TOPIC_REFUSED]), ("a", [TOPIC_REFUSED])]
    assert reader.read_from == []
