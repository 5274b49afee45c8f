"""broker.authorization: which resources each request names and the refusals, per-item
narrowing and trimmed listings the ACLs of the image give, before any handler runs (the
per-item answers through the router: test_broker_authorization_items.py)."""

from __future__ import annotations

from typing import Any

from broker.authorization import RequestAuthorization
from broker.handlers.router import FORWARDED_CLIENT_ID, ApiRouter
from broker.server import ConnectionInfo
from protocol.acls import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from protocol.codec import RequestEnvelope
from protocol.errors import ErrorCode
from protocol.messages import ApiKey, Request
from protocol.messages.configs import DescribeConfigsRequest, DescribeConfigsResource
from protocol.messages.describe_cluster import DescribeClusterRequest
from protocol.messages.fetch import FetchRequest, FetchTopic
from protocol.messages.group_offsets import (
    OffsetCommitRequest,
    OffsetCommitTopic,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopicResponse,
)
from protocol.messages.groups import ListedGroup, ListGroupsRequest, ListGroupsResponse
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.metadata import MetadataRequest, MetadataResponse, MetadataTopic
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderTopic,
)
from protocol.messages.produce import ProducePartition, ProduceRequest, ProduceTopic
from protocol.messages.topics import (
    CreatableTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import AccessControlEntryRecord

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ALICE = ConnectionInfo("10.0.0.7:5000", "CLIENTS", principal="User:alice")


def image_with(*acls: AclBinding) -> MetadataImage:
    records = [
        AccessControlEntryRecord(
            id=f"a{i}",
            resource_type=int(a.resource_type),
            resource_name=a.resource_name,
            pattern_type=int(a.pattern_type),
            principal=a.principal,
            host=a.host,
            operation=int(a.operation),
            permission_type=int(a.permission),
        )
        for i, a in enumerate(acls)
    ]
    return MetadataDelta(MetadataImage.empty()).replay_all(records).apply()


def allow(kind: ResourceType, name: str, op: AclOperation, *, pattern=PatternType.LITERAL,
          principal: str = "User:alice", host: str = "*") -> AclBinding:  # fmt: skip
    return AclBinding(kind, name, pattern, principal, host, op, AclPermissionType.ALLOW)


def deny(kind: ResourceType, name: str, op: AclOperation) -> AclBinding:
    return AclBinding(
        kind, name, PatternType.LITERAL, "User:alice", "*", op, AclPermissionType.DENY
    )


def envelope(body: Request, client_id: str = "c") -> RequestEnvelope:
    return RequestEnvelope(type(body).API_KEY, 0, 1, client_id, body)


def refusal(auth: RequestAuthorization, body: Request, conn=ALICE) -> tuple[ErrorCode, str] | None:
    refused: Any = auth.refuse(envelope(body), conn)
    if refused is None:
        return None
    return ErrorCode(refused.error_code), refused.error_message


def refused(auth: RequestAuthorization, body: Request, conn=ALICE) -> dict[Any, ResourceType]:
    """The items `narrow` takes out of the request, each with the kind of resource refused."""
    return dict(auth.narrow(envelope(body), conn).refused)


def produce(*topics: str) -> ProduceRequest:
    return ProduceRequest(
        acks=-1, timeout_ms=1000, topics=tuple(ProduceTopic(name=t, partitions=()) for t in topics)
    )


def test_topic_requests_are_narrowed_to_the_allowed_topics() -> None:
    image = image_with(allow(T, "orders", AclOperation.WRITE), allow(T, "pay", AclOperation.WRITE,
                       pattern=PatternType.PREFIXED), deny(T, "payroll", AclOperation.ALL))  # fmt: skip
    auth = RequestAuthorization(lambda: image)
    assert refusal(auth, produce("orders", "pay-eu")) is None
    assert refused(auth, produce("orders", "pay-eu")) == {}
    # Before, the whole Produce was refused; now only the topics alice may not write.
    assert refusal(auth, produce("orders", "payroll", "x")) is None
    narrowed = auth.narrow(envelope(produce("orders", "payroll", "x")), ALICE)
    assert [t.name for t in narrowed.request.body.topics] == ["orders"]
    assert dict(narrowed.refused) == {"payroll": T, "x": T} and narrowed.left
    # WRITE implies DESCRIBE: a Metadata request naming the topic is fine.
    assert refusal(auth, MetadataRequest(topics=("orders",))) is None
    delete = auth.narrow(envelope(DeleteTopicsRequest(topic_names=("orders",))), ALICE)
    assert dict(delete.refused) == {"orders": T} and not delete.left  # no handler runs


def test_cluster_rules_follower_fetches_and_create_topics() -> None:
    image = image_with(allow(T, "new", AclOperation.CREATE))
    auth = RequestAuthorization(lambda: image)
    follower = FetchRequest(max_wait_ms=0, min_bytes=0, topics=(), replica_id=2)
    assert refusal(auth, follower) == (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        "Cluster authorization failed.",
    )
    topic = CreatableTopic(name="new", num_partitions=1, replication_factor=1)
    assert refused(auth, CreateTopicsRequest(topics=(topic,))) == {}  # CREATE on the topic
    other = CreatableTopic(name="other", num_partitions=1, replication_factor=1)
    assert refusal(auth, CreateTopicsRequest(topics=(topic, other))) is None
    assert refused(auth, CreateTopicsRequest(topics=(topic, other))) == {"other": T}
    cluster_create = image_with(allow(C, CLUSTER_NAME, AclOperation.CREATE))
    assert refused(RequestAuthorization(lambda: cluster_create),
                   CreateTopicsRequest(topics=(other,))) == {}  # fmt: skip
    broker_configs = DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type=4, resource_name="1"),)
    )
    assert refused(auth, broker_configs) == {(4, "1"): C}


def test_groups_and_their_topics() -> None:
    image = image_with(allow(G, "g", AclOperation.READ), allow(T, "orders", AclOperation.READ))
    auth = RequestAuthorization(lambda: image)

    def commit(group: str, topic: str) -> OffsetCommitRequest:
        return OffsetCommitRequest(group_id=group, generation_id=1, member_id="m",
                                   topics=(OffsetCommitTopic(name=topic, partitions=()),))  # fmt: skip

    assert refusal(auth, commit("g", "orders")) is None
    assert refusal(auth, commit("h", "orders")) == (
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        "Not authorized to access group: [h]",
    )
    # The group is checked whole first, then READ per topic (`narrow`).
    assert refusal(auth, commit("g", "x")) is None
    assert refused(auth, commit("g", "x")) == {"x": T}
    assert refused(auth, commit("g", "orders")) == {}


def test_super_users_hosts_and_no_acl() -> None:
    image = image_with(allow(T, "orders", AclOperation.READ, host="10.0.0.8"))
    auth = RequestAuthorization(lambda: image, super_users=frozenset({"User:admin"}))
    # alice's ACL is for another host (a consumer's Fetch: per partition by its handler)
    fetch = FetchRequest(
        max_wait_ms=0, min_bytes=0, topics=(FetchTopic(name="orders", partitions=()),)
    )
    assert refusal(auth, fetch) is None
    assert auth.denied_reads(ALICE, ["orders"]) == ["orders"]
    admin = ConnectionInfo("10.0.0.9:1", "CLIENTS", principal="User:admin")
    assert refused(auth, produce("anything"), admin) == {}
    open_ = RequestAuthorization(lambda: image, allow_everyone_if_no_acl_found=True)
    assert refused(open_, produce("unnamed")) == {}
    assert refused(open_, produce("orders")) == {"orders": T}  # an ACL names it


def test_idempotent_producers_need_write_somewhere() -> None:
    request = InitProducerIdRequest()
    assert refusal(RequestAuthorization(image_with), request)[0] is (
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    )
    writer = image_with(allow(T, "orders", AclOperation.WRITE))
    assert refusal(RequestAuthorization(lambda: writer), request) is None


def test_listings_show_only_what_may_be_described() -> None:
    image = image_with(allow(T, "orders", AclOperation.READ), allow(G, "g", AclOperation.DESCRIBE))
    auth = RequestAuthorization(lambda: image)
    every = envelope(MetadataRequest(topics=None))
    assert auth.refuse(every, ALICE) is None
    listed = MetadataResponse(
        topics=tuple(MetadataTopic(name=n, error_code=0) for n in ("orders", "secret"))
    )
    assert [t.name for t in auth.trim(every, ALICE, listed).topics] == ["orders"]
    groups = ListGroupsResponse(groups=tuple(
        ListedGroup(group_id=g, protocol_type="consumer", group_state="Stable") for g in "gh"
    ))  # fmt: skip
    trimmed = auth.trim(envelope(ListGroupsRequest()), ALICE, groups)
    assert [g.group_id for g in trimmed.groups] == ["g"]


def test_the_authorizer_is_rebuilt_only_when_the_acls_change() -> None:
    images = [image_with(allow(T, "a", AclOperation.READ))]
    auth = RequestAuthorization(lambda: images[-1])
    first = auth.authorizer()
    assert auth.authorizer() is first
    images.append(image_with(allow(T, "b", AclOperation.READ)))
    assert auth.authorizer() is not first


def test_metadata_naming_topics_answers_each_refused_one() -> None:
    image = image_with(allow(T, "orders", AclOperation.READ))
    auth = RequestAuthorization(lambda: image)
    asked = envelope(MetadataRequest(topics=("orders", "secret"), allow_auto_topic_creation=True))
    assert auth.refuse(asked, ALICE) is None
    narrowed = auth.narrow(asked, ALICE).request.body
    assert narrowed.topics == ("orders",)
    assert narrowed.allow_auto_topic_creation is False  # no CREATE anywhere
    answer = MetadataResponse(topics=(MetadataTopic(name="orders", error_code=0),))
    trimmed = auth.trim(asked, ALICE, answer)
    assert [(t.name, ErrorCode(t.error_code)) for t in trimmed.topics] == [
        ("orders", ErrorCode.NONE),
        ("secret", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ]


async def test_a_client_naming_the_forwarding_client_id_is_still_checked() -> None:
    """Before, any client naming `trioka-forwarded` skipped every ACL."""
    image = image_with(allow(C, CLUSTER_NAME, AclOperation.CLUSTER_ACTION, principal="User:node"))
    router = ApiRouter(authorization=RequestAuthorization(lambda: image))
    served: list[str] = []

    async def handler(body: Any, conn: ConnectionInfo) -> Any:
        served.append(conn.principal)
        return DeleteTopicsResponse()

    def topic_error(response: Any) -> ErrorCode:
        (topic,) = response.topics
        return ErrorCode(topic.partitions[0].error_code)

    router.add_handlers({ApiKey.PRODUCE: handler, ApiKey.DELETE_TOPICS: handler})
    one_partition = ProduceRequest(acks=-1, timeout_ms=1000, topics=(
        ProduceTopic(name="orders", partitions=(ProducePartition(index=0, records=b"r"),)),
    ))  # fmt: skip
    produce_request = envelope(one_partition, client_id=FORWARDED_CLIENT_ID)
    assert topic_error(await router.handle(produce_request, ALICE)) is (
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    )
    delete = envelope(DeleteTopicsRequest(topic_names=("orders",)), client_id=FORWARDED_CLIENT_ID)
    (deleted,) = (await router.handle(delete, ALICE)).responses
    assert deleted.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    node = ConnectionInfo("10.0.0.2:1", "INTERNAL", principal="User:node")
    assert (await router.handle(delete, node)).error_code == 0  # a broker's forwarded request
    # ... but not for an API brokers do not forward.
    node_produce = await router.handle(produce_request, node)
    assert topic_error(node_produce) is ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert served == ["User:node"]


def test_open_apis_and_trimmed_listings() -> None:
    image = image_with(allow(T, "orders", AclOperation.DESCRIBE), allow(G, "g", AclOperation.READ))
    auth = RequestAuthorization(lambda: image)
    assert refusal(auth, DescribeClusterRequest()) is None
    assert refusal(auth, ListGroupsRequest()) is None
    groups = ListGroupsResponse(groups=tuple(
        ListedGroup(group_id=g, protocol_type="consumer", group_state="Stable") for g in "gh"
    ))  # fmt: skip
    everyone = image_with(allow(C, CLUSTER_NAME, AclOperation.DESCRIBE))
    assert len(RequestAuthorization(lambda: everyone).trim(
        envelope(ListGroupsRequest()), ALICE, groups).groups) == 2  # fmt: skip
    offsets = OffsetFetchResponse(topics=tuple(
        OffsetFetchTopicResponse(name=n, partitions=()) for n in ("orders", "secret")
    ))  # fmt: skip
    all_topics = envelope(OffsetFetchRequest(group_id="g", topics=None))
    assert refusal(auth, all_topics.body) is None
    assert [t.name for t in auth.trim(all_topics, ALICE, offsets).topics] == ["orders"]


def test_an_empty_topic_name_is_refused_not_a_crash() -> None:
    """Before, `name or topic` read a ProduceTopic's missing `topic` for the name ''."""
    auth = RequestAuthorization(image_with)
    assert refused(auth, produce("")) == {"": T}


def test_a_revoked_read_stops_a_fetch_session() -> None:
    image = [image_with(allow(T, "orders", AclOperation.READ))]
    auth = RequestAuthorization(lambda: image[-1])
    assert auth.denied_reads(ALICE, ["orders"]) == []
    image.append(image_with())
    assert auth.denied_reads(ALICE, ["orders"]) == ["orders"]


def test_offset_for_leader_epoch_takes_cluster_action_or_describe() -> None:
    request = OffsetForLeaderEpochRequest(
        replica_id=2, topics=(OffsetForLeaderTopic(topic="orders", partitions=()),)
    )
    assert refused(RequestAuthorization(image_with), request) == {"orders": T}
    node = image_with(allow(C, CLUSTER_NAME, AclOperation.CLUSTER_ACTION))
    assert refused(RequestAuthorization(lambda: node), request) == {}
    reader = image_with(allow(T, "orders", AclOperation.DESCRIBE))
    assert refused(RequestAuthorization(lambda: reader), request) == {}
