"""The authorizer at work on a broker (Kafka's AuthHelper in KafkaApis): which resources each
request names, checked with `broker.authorizer`'s decision over the ACLs of this broker's
metadata image, before the request's handler runs.

As Kafka, with one simplification: a request naming a topic or group the principal may not use
is refused as a whole (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
CLUSTER_AUTHORIZATION_FAILED, naming what was refused), where Kafka answers the other topics
of a multi-topic request. Listings are trimmed as Kafka trims them: a Metadata request for all
topics answers only the topics the principal may DESCRIBE, ListGroups only such groups. A
request another broker forwarded was checked by that broker (Kafka's envelope). ApiVersions and
the SASL exchange are never checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

from broker.authorizer import API_RULES, Authorizer
from broker.config import BrokerConfig, ListenerSecurity
from broker.server import ConnectionInfo
from protocol.acls import CLUSTER_NAME, AclOperation, ResourceType
from protocol.codec import RequestEnvelope
from protocol.errors import ErrorCode
from protocol.messages import ApiKey, Response, error_response
from protocol.messages.configs import ResourceType as ConfigResourceType
from protocol.messages.find_coordinator import CoordinatorType
from protocol.messages.group_offsets import OffsetFetchResponse
from protocol.messages.groups import ListGroupsResponse
from protocol.messages.metadata import MetadataResponse, MetadataTopic
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


def _config_resources(body: Any, operation: AclOperation) -> list[Names]:
    topics = tuple(
        r.resource_name for r in body.resources if r.resource_type == ConfigResourceType.TOPIC
    )
    checks: list[Names] = [(ResourceType.TOPIC, operation, topics)]
    if any(r.resource_type == ConfigResourceType.BROKER for r in body.resources):
        checks.append((ResourceType.CLUSTER, operation, (CLUSTER_NAME,)))
    return checks


def _named(api: ApiKey, body: Any) -> list[Names] | None:
    """The resources a request names with the operation each needs; None: the API's rule as
    it stands (one CLUSTER check)."""
    rule = API_RULES[api]
    assert rule is not None
    op = rule.operation
    match api:
        case ApiKey.CREATE_TOPICS:  # CREATE on the cluster was not given: on each topic then
            assert rule.alternative is not None
            kind, alternative = rule.alternative
            return [(kind, alternative, _topics(body))]
        case ApiKey.METADATA:
            return []  # per topic: `narrow` and `trim`
        case ApiKey.DELETE_TOPICS:
            return [(ResourceType.TOPIC, op, tuple(body.topic_names))]
        case ApiKey.DESCRIBE_CONFIGS | ApiKey.INCREMENTAL_ALTER_CONFIGS:
            return _config_resources(body, op)
        case ApiKey.OFFSET_COMMIT:
            return [(ResourceType.GROUP, op, (body.group_id,)),
                    (ResourceType.TOPIC, AclOperation.READ, _topics(body))]  # fmt: skip
        case ApiKey.OFFSET_FETCH:
            return [(ResourceType.GROUP, op, (body.group_id,)),
                    (ResourceType.TOPIC, AclOperation.DESCRIBE, _topics(body))]  # fmt: skip
        case ApiKey.DESCRIBE_GROUPS:
            return [(ResourceType.GROUP, op, tuple(body.groups))]
        case ApiKey.FIND_COORDINATOR:
            kind = (ResourceType.GROUP if body.key_type == CoordinatorType.GROUP
                    else ResourceType.TRANSACTIONAL_ID)  # fmt: skip
            return [(kind, op, (body.key,))]
    if rule.resource_type is ResourceType.GROUP:
        return [(ResourceType.GROUP, op, (body.group_id,))]
    if rule.resource_type is ResourceType.TOPIC:
        return [(ResourceType.TOPIC, op, _topics(body))]
    return None


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
        """The refusal of a request the principal may not make; None: go ahead."""
        api, body = request.api_key, request.body
        rule = API_RULES.get(api)
        if rule is None:
            return None
        auth = self.authorizer()
        host = _host(conn.peer)

        def allowed(kind: ResourceType, op: AclOperation, name: str) -> bool:
            return auth.authorize(conn.principal, host, op, kind, name)

        if api is ApiKey.FETCH and getattr(body, "replica_id", -1) >= 0:
            checks: list[Names] | None = [
                (ResourceType.CLUSTER, AclOperation.CLUSTER_ACTION, (CLUSTER_NAME,))
            ]
        elif api is ApiKey.CREATE_TOPICS and allowed(ResourceType.CLUSTER, rule.operation,
                                                     CLUSTER_NAME):  # fmt: skip
            return None
        elif api is ApiKey.OFFSET_FOR_LEADER_EPOCH and allowed(
            ResourceType.CLUSTER, AclOperation.CLUSTER_ACTION, CLUSTER_NAME
        ):
            return None  # a follower's truncation check, as Kafka: CLUSTER_ACTION or DESCRIBE
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

    def narrow(self, request: RequestEnvelope, conn: ConnectionInfo) -> RequestEnvelope:
        """A Metadata request naming topics asks only for those the principal may DESCRIBE
        (`trim` answers the others TOPIC_AUTHORIZATION_FAILED), and creates them only with
        CREATE on the cluster or on each."""
        body = request.body
        if request.api_key is not ApiKey.METADATA or body.topics is None:
            return request
        keep = self._visible(conn, ResourceType.TOPIC, body.topics)
        topics = tuple(t for t in body.topics if t in keep)
        auto = body.allow_auto_topic_creation and self._may_create(conn, topics)
        narrowed = dataclasses.replace(body, topics=topics, allow_auto_topic_creation=auto)
        return dataclasses.replace(request, body=narrowed)

    def _may_create(self, conn: ConnectionInfo, topics: tuple[str, ...]) -> bool:
        auth, host = self.authorizer(), _host(conn.peer)
        if auth.authorize(conn.principal, host, AclOperation.CREATE, ResourceType.CLUSTER,
                          CLUSTER_NAME):  # fmt: skip
            return True
        return all(auth.authorize(conn.principal, host, AclOperation.CREATE, ResourceType.TOPIC,
                                  t) for t in topics)  # fmt: skip

    def trim(self, request: RequestEnvelope, conn: ConnectionInfo, response: Response) -> Response:
        """A listing with only what the principal may DESCRIBE; a Metadata answer with
        TOPIC_AUTHORIZATION_FAILED for each named topic it may not."""
        api = request.api_key
        if api is ApiKey.METADATA and isinstance(response, MetadataResponse):
            return self._trim_metadata(request.body.topics, conn, response)
        if api is ApiKey.LIST_GROUPS and isinstance(response, ListGroupsResponse):
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
            keep = self._visible(conn, ResourceType.TOPIC, (t.name for t in response.topics))
            return dataclasses.replace(
                response, topics=tuple(t for t in response.topics if t.name in keep)
            )
        return response

    def _trim_metadata(
        self, named: tuple[str, ...] | None, conn: ConnectionInfo, response: MetadataResponse
    ) -> MetadataResponse:
        if named is None:
            keep = self._visible(conn, ResourceType.TOPIC, (t.name for t in response.topics))
            return dataclasses.replace(
                response, topics=tuple(t for t in response.topics if t.name in keep)
            )
        refused = [n for n in dict.fromkeys(named)
                   if n not in self._visible(conn, ResourceType.TOPIC, (n,))]  # fmt: skip
        if not refused:
            return response
        errors = tuple(
            MetadataTopic(name=n, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                          error_message=f"Not authorized to access topics: [{n}]")
            for n in refused
        )  # fmt: skip
        return dataclasses.replace(response, topics=response.topics + errors)

    def _visible(self, conn: ConnectionInfo, kind: ResourceType, names: Iterable[str]) -> set[str]:
        auth, host = self.authorizer(), _host(conn.peer)
        return {n for n in names
                if auth.authorize(conn.principal, host, AclOperation.DESCRIBE, kind, n)}  # fmt: skip


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


def _refusal(request_type: type, kind: ResourceType, denied: list[str]) -> Response:
    if kind is ResourceType.CLUSTER:
        message = "Cluster authorization failed."
    else:
        what = {ResourceType.TOPIC: "topics", ResourceType.GROUP: "group"}.get(kind, kind.name)
        message = f"Not authorized to access {what}: [{', '.join(denied)}]"
    return error_response(request_type, _REFUSED[kind], message)
