"""The authorizer at work on a broker (Kafka's AuthHelper in KafkaApis): which resources each
request names, checked with `broker.authorizer`'s decision over the ACLs of this broker's
metadata image, before the request's handler runs.

As Kafka, a request naming several topics (or groups, or config resources) is answered per
item: `narrow` takes the items the principal may not use out of the request, the handler
answers the rest, and `trim` puts an answer for each refused item back into the response, in
the request's order: TOPIC_AUTHORIZATION_FAILED (GROUP_AUTHORIZATION_FAILED for a group,
CLUSTER_AUTHORIZATION_FAILED for a broker's configs). When no item is left no handler runs
(`refusals`). The APIs answered so (`_ITEMS`): Produce, ListOffsets, OffsetForLeaderEpoch
(CLUSTER_ACTION allows every topic), OffsetCommit and OffsetFetch (the group is checked whole
first), CreateTopics (CREATE on the cluster allows every topic), DeleteTopics,
CreatePartitions, DescribeConfigs, IncrementalAlterConfigs and DescribeGroups. A consumer's
Fetch is answered per partition by its handler, over the whole fetch session (`denied_reads`);
a follower's needs CLUSTER_ACTION, whole. A request for one resource (a group's JoinGroup, a
cluster API) is refused whole (`refuse`). Listings are trimmed as Kafka trims them: a Metadata
request for all topics answers only the topics the principal may DESCRIBE, ListGroups only such
groups, an OffsetFetch of all topics only such topics. A request another broker forwarded was
checked by that broker (Kafka's envelope). ApiVersions and the SASL exchange are never checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from broker.authorizer import API_RULES, Authorizer
from broker.config import BrokerConfig, ListenerSecurity
from broker.server import ConnectionInfo
from protocol.acls import CLUSTER_NAME, AclOperation, ResourceType
from protocol.codec import RequestEnvelope
from protocol.errors import ErrorCode
from protocol.messages import ApiKey, Response, error_response
from protocol.messages.configs import AlterConfigsResourceResponse, DescribeConfigsResult
from protocol.messages.configs import ResourceType as ConfigResourceType
from protocol.messages.create_partitions import CreatePartitionsTopicResult
from protocol.messages.find_coordinator import CoordinatorType
from protocol.messages.group_offsets import (
    OffsetCommitPartitionResponse,
    OffsetCommitTopicResponse,
    OffsetFetchPartitionResponse,
    OffsetFetchResponse,
    OffsetFetchTopicResponse,
)
from protocol.messages.groups import DescribedGroup, ListGroupsResponse
from protocol.messages.list_offsets import ListOffsetsPartitionResponse, ListOffsetsTopicResponse
from protocol.messages.metadata import MetadataResponse, MetadataTopic
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderPartitionResult,
    OffsetForLeaderTopicResult,
)
from protocol.messages.produce import ProducePartitionResponse, ProduceTopicResponse
from protocol.messages.topics import CreatableTopicResult, DeletableTopicResult
from protocol.metadata.image import AclsImage, MetadataImage

Names = tuple[ResourceType, AclOperation, tuple[str, ...]]

FORWARDED_APIS = frozenset({
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_PARTITION, ApiKey.CONTROLLED_SHUTDOWN,
})  # fmt: skip
"""What a ZK-mode broker forwards to the controller broker (broker.handlers.forwarding)."""

_REFUSED = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
}


def _topics(body: Any) -> tuple[str, ...]:
    topics = getattr(body, "topics", None) or ()
    return tuple(t if isinstance(t, str) else t.name if hasattr(t, "name") else t.topic
                 for t in topics)  # fmt: skip


def _config_resource(r: Any) -> tuple[ResourceType, str] | None:
    """What a config resource is checked as: a topic's, or (a broker's) the cluster's; None:
    a type the handler refuses itself."""
    if r.resource_type == ConfigResourceType.TOPIC:
        return ResourceType.TOPIC, r.resource_name
    if r.resource_type in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER):
        return ResourceType.CLUSTER, CLUSTER_NAME
    return None


Refuse = Callable[[Any, int, str], Any]
"""(a request's item, error code, message) -> that item's answer."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Items:
    """How an API answers per item (Kafka's partitionSeqByAuthorized in each handler)."""

    asked: str
    """The request's field listing the items."""
    answered: str
    """The response's field listing their answers."""
    key: Callable[[Any], Hashable]
    """A request item's key; its answer's is `answer_key`."""
    answer_key: Callable[[Any], Hashable]
    resource: Callable[[Any], tuple[ResourceType, str] | None]
    """The resource an item needs the operation on; None: not checked here."""
    refused: Refuse
    operation: AclOperation | None = None
    """None: the API's rule's."""
    cluster_operation: AclOperation | None = None
    """An operation on the cluster that allows every item (CreateTopics: CREATE)."""
    once_per_key: bool = False
    """One answer per distinct key (the admin APIs), not per item."""
    ask_when_none_left: bool = False
    """Run the handler even with every item refused (OffsetFetch: the group's own errors)."""


def _topic(t: Any) -> tuple[ResourceType, str]:
    return ResourceType.TOPIC, t if isinstance(t, str) else t.name


def _name(t: Any) -> str:
    return t.name


def _produce_refused(t: Any, code: int, message: str) -> ProduceTopicResponse:
    return ProduceTopicResponse(name=t.name, partitions=tuple(
        ProducePartitionResponse(index=p.index, error_code=code, error_message=message)
        for p in t.partitions
    ))  # fmt: skip


def _list_offsets_refused(t: Any, code: int, message: str) -> ListOffsetsTopicResponse:
    return ListOffsetsTopicResponse(name=t.name, partitions=tuple(
        ListOffsetsPartitionResponse(index=p.index, error_code=code, error_message=message)
        for p in t.partitions
    ))  # fmt: skip


def _epoch_refused(t: Any, code: int, message: str) -> OffsetForLeaderTopicResult:
    return OffsetForLeaderTopicResult(topic=t.topic, partitions=tuple(
        OffsetForLeaderPartitionResult(error_code=code, partition=p.partition)
        for p in t.partitions
    ))  # fmt: skip


def _commit_refused(t: Any, code: int, message: str) -> OffsetCommitTopicResponse:
    return OffsetCommitTopicResponse(name=t.name, partitions=tuple(
        OffsetCommitPartitionResponse(partition_index=p.partition_index, error_code=code,
                                      error_message=message)
        for p in t.partitions
    ))  # fmt: skip


def _offset_fetch_refused(t: Any, code: int, message: str) -> OffsetFetchTopicResponse:
    return OffsetFetchTopicResponse(name=t.name, partitions=tuple(
        OffsetFetchPartitionResponse(partition_index=i, committed_offset=-1, error_code=code,
                                     error_message=message)
        for i in t.partition_indexes
    ))  # fmt: skip


def _describe_configs_refused(r: Any, code: int, message: str) -> DescribeConfigsResult:
    return DescribeConfigsResult(error_code=code, resource_type=r.resource_type,
                                 resource_name=r.resource_name, error_message=message)  # fmt: skip


def _alter_configs_refused(r: Any, code: int, message: str) -> AlterConfigsResourceResponse:
    return AlterConfigsResourceResponse(error_code=code, resource_type=r.resource_type,
                                        resource_name=r.resource_name, error_message=message)  # fmt: skip


def _group_refused(g: str, code: int, message: str) -> DescribedGroup:
    return DescribedGroup(group_id=g, error_code=code, group_state="", protocol_type="",
                          protocol_data="", error_message=message)  # fmt: skip


def _config_key(r: Any) -> Hashable:
    return r.resource_type, r.resource_name


_ITEMS: dict[ApiKey, _Items] = {
    ApiKey.PRODUCE: _Items("topics", "topics", _name, _name, _topic, _produce_refused),
    ApiKey.LIST_OFFSETS: _Items("topics", "topics", _name, _name, _topic, _list_offsets_refused),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _Items(
        "topics", "topics", lambda t: t.topic, lambda t: t.topic,
        lambda t: (ResourceType.TOPIC, t.topic), _epoch_refused,
        cluster_operation=AclOperation.CLUSTER_ACTION,  # a follower's truncation check
    ),
    ApiKey.OFFSET_COMMIT: _Items(
        "topics", "topics", _name, _name, _topic, _commit_refused, operation=AclOperation.READ
    ),
    ApiKey.OFFSET_FETCH: _Items(
        "topics", "topics", _name, _name, _topic, _offset_fetch_refused,
        operation=AclOperation.DESCRIBE, ask_when_none_left=True,
    ),
    ApiKey.CREATE_TOPICS: _Items(
        "topics", "topics", _name, _name, _topic,
        lambda t, code, message: CreatableTopicResult(name=t.name, error_code=code,
                                                      error_message=message),
        operation=AclOperation.CREATE, cluster_operation=AclOperation.CREATE, once_per_key=True,
    ),
    ApiKey.DELETE_TOPICS: _Items(
        "topic_names", "responses", lambda n: n, _name, _topic,
        lambda n, code, message: DeletableTopicResult(name=n, error_code=code,
                                                      error_message=message),
        once_per_key=True,
    ),
    ApiKey.CREATE_PARTITIONS: _Items(
        "topics", "results", _name, _name, _topic,
        lambda t, code, message: CreatePartitionsTopicResult(name=t.name, error_code=code,
                                                             error_message=message),
        once_per_key=True,
    ),
    ApiKey.DESCRIBE_CONFIGS: _Items(
        "resources", "results", _config_key, _config_key, _config_resource,
        _describe_configs_refused,
    ),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _Items(
        "resources", "responses", _config_key, _config_key, _config_resource,
        _alter_configs_refused,
    ),
    ApiKey.DESCRIBE_GROUPS: _Items(
        "groups", "groups", lambda g: g, lambda g: g.group_id,
        lambda g: (ResourceType.GROUP, g), _group_refused,
    ),
}  # fmt: skip
"""The APIs answered per item, and how."""


def _named(api: ApiKey, body: Any) -> list[Names] | None:
    """The resources a request is refused whole without, with the operation each needs;
    None: the API's rule as it stands (one CLUSTER check)."""
    rule = API_RULES[api]
    assert rule is not None
    op = rule.operation
    match api:
        case ApiKey.OFFSET_COMMIT | ApiKey.OFFSET_FETCH:
            return [(ResourceType.GROUP, op, (body.group_id,))]  # then per topic: `narrow`
        case ApiKey.FIND_COORDINATOR:
            kind = (ResourceType.GROUP if body.key_type == CoordinatorType.GROUP
                    else ResourceType.TRANSACTIONAL_ID)  # fmt: skip
            return [(kind, op, (body.key,))]
    if api in _ITEMS or api is ApiKey.METADATA:
        return []  # per item: `narrow` and `trim`
    if rule.resource_type is ResourceType.GROUP:
        return [(ResourceType.GROUP, op, (body.group_id,))]
    if rule.resource_type is ResourceType.TOPIC:
        return [(ResourceType.TOPIC, op, _topics(body))]
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Narrowed:
    """A request cut down to what its principal may ask (`narrow`)."""

    request: RequestEnvelope
    """What the handler is given: the request without the refused items."""
    refused: Mapping[Hashable, ResourceType] = dataclasses.field(default_factory=dict)
    """The refused items' keys (topic names; (resource type, name) of configs), each with
    the kind of resource refused: `trim` answers them."""
    left: bool = True
    """False: every item was refused, so no handler runs (`refusals` answers)."""


@dataclasses.dataclass(slots=True)
class RequestAuthorization:
    image: Callable[[], MetadataImage]
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    _memo: tuple[AclsImage, Authorizer] | None = None

    def authorizer(self) -> Authorizer:
        acls = self.image().acls
        if self._memo is None or self._memo[0] is not acls:
            made = Authorizer.of(
                acls.bindings(), self.super_users, self.allow_everyone_if_no_acl_found
            )
            self._memo = (acls, made)
        return self._memo[1]

    def denied_reads(self, conn: ConnectionInfo, topics: list[str]) -> list[str]:
        """The topics of `topics` the connection's principal may not READ."""
        auth, host = self.authorizer(), _host(conn.peer)
        return [t for t in topics
                if not auth.authorize(conn.principal, host, AclOperation.READ,
                                      ResourceType.TOPIC, t)]  # fmt: skip

    def trusts_forwarding(self, request: RequestEnvelope, conn: ConnectionInfo) -> bool:
        """Whether a request naming the forwarding client id is another broker's, checked
        there: an API brokers forward, from a principal with CLUSTER_ACTION on the cluster."""
        if request.api_key not in FORWARDED_APIS:
            return False
        return self.authorizer().authorize(
            conn.principal, _host(conn.peer), AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
            CLUSTER_NAME,
        )  # fmt: skip

    def refuse(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        """The refusal of a request the principal may not make at all; None: go ahead (to
        `narrow`)."""
        api, body = request.api_key, request.body
        rule = API_RULES.get(api)
        if rule is None:
            return None
        auth = self.authorizer()
        host = _host(conn.peer)

        def allowed(kind: ResourceType, op: AclOperation, name: str) -> bool:
            return auth.authorize(conn.principal, host, op, kind, name)

        if api is ApiKey.FETCH:
            if getattr(body, "replica_id", -1) < 0:
                return None  # a consumer's: per partition of its session, by the handler
            checks: list[Names] | None = [
                (ResourceType.CLUSTER, AclOperation.CLUSTER_ACTION, (CLUSTER_NAME,))
            ]
        elif api is ApiKey.INIT_PRODUCER_ID and auth.allows_any(conn.principal, host,
                                                               AclOperation.WRITE,
                                                               ResourceType.TOPIC):  # fmt: skip
            return None  # KIP-679: WRITE on some topic implies IDEMPOTENT_WRITE
        else:
            checks = _named(api, body)
        if checks is None:
            checks = [(rule.resource_type, rule.operation, (CLUSTER_NAME,))]
        for kind, op, names in checks:
            denied = [n for n in dict.fromkeys(names) if not allowed(kind, op, n)]
            if denied:
                return _refusal(type(body), kind, denied)
        return None

    def narrow(self, request: RequestEnvelope, conn: ConnectionInfo) -> Narrowed:
        """The request without the items its principal may not use (`_ITEMS`; `trim` answers
        them). A Metadata request naming topics asks only for those the principal may
        DESCRIBE, and creates them only with CREATE on the cluster or on each."""
        api, body = request.api_key, request.body
        if api is ApiKey.METADATA:
            return self._narrow_metadata(request, conn)
        items = _ITEMS.get(api)
        if items is None or getattr(body, items.asked) is None:
            return Narrowed(request)  # OffsetFetch of every topic: `trim`
        auth, host = self.authorizer(), _host(conn.peer)
        rule = API_RULES[api]
        assert rule is not None
        op = items.operation or rule.operation
        cluster_op = items.cluster_operation
        if cluster_op is not None and auth.authorize(
            conn.principal, host, cluster_op, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            return Narrowed(request)
        decided: dict[tuple[ResourceType, str], bool] = {}
        refused: dict[Hashable, ResourceType] = {}
        asked: Sequence[Any] = getattr(body, items.asked)
        for item in asked:
            resource = items.resource(item)
            if resource is None:
                continue
            if resource not in decided:
                decided[resource] = auth.authorize(
                    conn.principal, host, op, resource[0], resource[1]
                )
            if not decided[resource]:
                refused[items.key(item)] = resource[0]
        if not refused:
            return Narrowed(request)
        kept = tuple(i for i in asked if items.key(i) not in refused)
        narrowed = dataclasses.replace(body, **{items.asked: kept})
        return Narrowed(
            dataclasses.replace(request, body=narrowed),
            refused,
            left=bool(kept) or items.ask_when_none_left,
        )

    def _narrow_metadata(self, request: RequestEnvelope, conn: ConnectionInfo) -> Narrowed:
        body = request.body
        if body.topics is None:
            return Narrowed(request)  # every topic: `trim`
        keep = self._visible(conn, ResourceType.TOPIC, body.topics)
        topics = tuple(t for t in body.topics if t in keep)
        auto = body.allow_auto_topic_creation and self._may_create(conn, topics)
        narrowed = dataclasses.replace(body, topics=topics, allow_auto_topic_creation=auto)
        refused = {t: ResourceType.TOPIC for t in body.topics if t not in keep}
        return Narrowed(dataclasses.replace(request, body=narrowed), refused)

    def _may_create(self, conn: ConnectionInfo, topics: tuple[str, ...]) -> bool:
        auth, host = self.authorizer(), _host(conn.peer)
        if auth.authorize(conn.principal, host, AclOperation.CREATE, ResourceType.CLUSTER,
                          CLUSTER_NAME):  # fmt: skip
            return True
        return all(auth.authorize(conn.principal, host, AclOperation.CREATE, ResourceType.TOPIC,
                                  t) for t in topics)  # fmt: skip

    def refusals(self, request: RequestEnvelope, narrowed: Narrowed) -> Response | None:
        """The answer to a request whose every item was refused (`narrowed.left` is False):
        the refusals alone, as Kafka answers without asking the log or the controller; None
        for an acks=0 Produce, which gets no answer."""
        if request.api_key is ApiKey.PRODUCE and request.body.acks == 0:
            return None
        return self.trim(request, None, type(request.body).RESPONSE(), narrowed)

    def trim(
        self,
        request: RequestEnvelope,
        conn: ConnectionInfo | None,
        response: Response,
        narrowed: Narrowed | None = None,
    ) -> Response:
        """The answer to `request` (as asked, before `narrow`) with each item `narrowed`
        refused answered in its place in the request's order (`narrowed` None: narrowed
        again), and a listing with only what the principal may DESCRIBE."""
        api = request.api_key
        if narrowed is None:
            assert conn is not None
            narrowed = self.narrow(request, conn)
        items = _ITEMS.get(api)
        if narrowed.refused and items is not None:
            return _merge(request.body, response, items, narrowed.refused)
        if api is ApiKey.METADATA and isinstance(response, MetadataResponse):
            if request.body.topics is not None:
                return _answer_refused_topics(response, narrowed.refused)
            assert conn is not None
            keep = self._visible(conn, ResourceType.TOPIC, (t.name for t in response.topics))
            return dataclasses.replace(
                response, topics=tuple(t for t in response.topics if t.name in keep)
            )
        if api is ApiKey.LIST_GROUPS and isinstance(response, ListGroupsResponse):
            assert conn is not None
            if self._visible(conn, ResourceType.CLUSTER, (CLUSTER_NAME,)):
                return response  # DESCRIBE on the cluster: every group, as Kafka
            keep = self._visible(conn, ResourceType.GROUP, (g.group_id for g in response.groups))
            return dataclasses.replace(
                response, groups=tuple(g for g in response.groups if g.group_id in keep)
            )
        if (
            api is ApiKey.OFFSET_FETCH
            and request.body.topics is None
            and isinstance(response, OffsetFetchResponse)
        ):
            assert conn is not None
            keep = self._visible(conn, ResourceType.TOPIC, (t.name for t in response.topics))
            return dataclasses.replace(
                response, topics=tuple(t for t in response.topics if t.name in keep)
            )
        return response

    def _visible(self, conn: ConnectionInfo, kind: ResourceType, names: Iterable[str]) -> set[str]:
        auth, host = self.authorizer(), _host(conn.peer)
        return {n for n in names
                if auth.authorize(conn.principal, host, AclOperation.DESCRIBE, kind, n)}  # fmt: skip


def _answer_refused_topics(
    response: MetadataResponse, refused: Mapping[Hashable, ResourceType]
) -> MetadataResponse:
    if not refused:
        return response
    errors = tuple(
        MetadataTopic(name=str(n), error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                      error_message=_message(ResourceType.TOPIC, str(n)))
        for n in refused
    )  # fmt: skip
    return dataclasses.replace(response, topics=response.topics + errors)


def _merge(
    body: Any, response: Response, items: _Items, refused: Mapping[Hashable, ResourceType]
) -> Response:
    """`response` (the handler's answer to the items not refused) with the refused items'
    answers, all in the order the request names them (Kafka appends them)."""
    if isinstance(response, OffsetFetchResponse) and response.error_code:
        return response  # the group's error, as Kafka's: no per-topic answers
    refusals: dict[Hashable, list[Any]] = {}
    for item in getattr(body, items.asked):
        key = items.key(item)
        kind = refused.get(key)
        if kind is None or (items.once_per_key and key in refusals):
            continue
        resource = items.resource(item)
        assert resource is not None
        answer = items.refused(item, int(_REFUSED[kind]), _message(kind, resource[1]))
        refusals.setdefault(key, []).append(answer)
    answered: dict[Hashable, list[Any]] = {}
    for answer in getattr(response, items.answered):
        answered.setdefault(items.answer_key(answer), []).append(answer)
    merged: list[Any] = []
    for key in dict.fromkeys(items.key(i) for i in getattr(body, items.asked)):
        merged += refusals[key] if key in refusals else answered.pop(key, ())
    for rest in answered.values():  # answers to what the request did not name: kept
        merged += rest
    return dataclasses.replace(response, **{items.answered: tuple(merged)})


def request_authorization(
    config: BrokerConfig, image: Callable[[], MetadataImage]
) -> RequestAuthorization | None:
    """What `authorizer.class.name`, `super.users` and `allow.everyone.if.no.acl.found` ask
    for; None without an authorizer."""
    if not config["authorizer.class.name"]:
        return None
    everything = super_users(config)
    return RequestAuthorization(image, everything, bool(config["allow.everyone.if.no.acl.found"]))


def super_users(config: ListenerSecurity) -> frozenset[str]:
    """`super.users`: principals separated by ';' (Kafka's format)."""
    return frozenset(u.strip() for u in str(config["super.users"]).split(";") if u.strip())


def _host(peer: str) -> str:
    return peer.rsplit(":", 1)[0]


def _message(kind: ResourceType, name: str) -> str:
    if kind is ResourceType.CLUSTER:
        return "Cluster authorization failed."
    what = {ResourceType.TOPIC: "topics", ResourceType.GROUP: "group"}.get(kind, kind.name)
    return f"Not authorized to access {what}: [{name}]"


def _refusal(request_type: type, kind: ResourceType, denied: list[str]) -> Response:
    return error_response(request_type, _REFUSED[kind], _message(kind, ", ".join(denied)))
