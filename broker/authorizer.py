"""Kafka's StandardAuthorizer decision, sans I/O: given the ACLs, `super.users` and
`allow.everyone.if.no.acl.found`, may this principal from this host do this operation on
this resource?

The rules, as Kafka's:
- a super user may do anything;
- the ACLs that select the resource (its LITERAL name, the LITERAL wildcard `*`, or a
  PREFIXED name it starts with) and name the principal (or `User:*`) and host (or `*`) decide;
- a DENY of the operation (or of ALL) wins over any ALLOW;
- an ALLOW of the operation, of ALL, or of an operation that implies it allows: READ, WRITE,
  DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
- when no ACL at all selects the resource, `allow.everyone.if.no.acl.found` decides (default
  false: denied).

`API_RULES` says what each API is checked for; a test fails when an API key has no rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from protocol.acls import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from protocol.messages import ApiKey

_IMPLIED = {
    AclOperation.DESCRIBE: frozenset(
        {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class Authorizer:
    acls: tuple[AclBinding, ...] = ()
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    _literal: dict[tuple[ResourceType, str], list[AclBinding]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )
    """LITERAL ACLs by resource (the `*` wildcard included): a 25,000-topic Metadata answer
    is one lookup per topic, not a scan of every ACL (Kafka's StandardAuthorizer keeps them
    sorted by resource for the same reason)."""
    _prefixed: dict[ResourceType, list[AclBinding]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        for acl in self.acls:
            if acl.pattern_type is PatternType.PREFIXED:
                self._prefixed.setdefault(acl.resource_type, []).append(acl)
            else:
                self._literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)

    @classmethod
    def of(
        cls,
        acls: Iterable[AclBinding],
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> Authorizer:
        return cls(tuple(acls), frozenset(super_users), allow_everyone_if_no_acl_found)

    def selecting(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """The ACLs about that resource, whoever they name."""
        found = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            found += self._literal.get((resource_type, WILDCARD), ())
        found += (
            a for a in self._prefixed.get(resource_type, ()) if name.startswith(a.resource_name)
        )
        return found

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        selecting = self.selecting(resource_type, name)
        if not selecting:
            return self.allow_everyone_if_no_acl_found
        mine = [
            a
            for a in selecting
            if a.principal in (principal, WILDCARD_PRINCIPAL) and a.host in (host, WILDCARD)
        ]
        if any(
            a.permission is AclPermissionType.DENY and a.operation in (operation, AclOperation.ALL)
            for a in mine
        ):
            return False
        allowing = {operation, AclOperation.ALL} | _IMPLIED.get(operation, frozenset())
        return any(
            a.permission is AclPermissionType.ALLOW and a.operation in allowing for a in mine
        )

    def allows_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type may be the object of `operation` (Kafka's
        authorizeByResourceType, simplified: an ALLOW for the principal and host that no DENY
        of the same pattern cancels)."""
        if principal in self.super_users:
            return True
        mine = [
            a
            for a in self.acls
            if a.resource_type == resource_type
            and a.principal in (principal, WILDCARD_PRINCIPAL)
            and a.host in (host, WILDCARD)
            and a.operation in (operation, AclOperation.ALL)
        ]
        denied = {
            (a.resource_name, a.pattern_type)
            for a in mine
            if a.permission is AclPermissionType.DENY
        }
        return any(
            a.permission is AclPermissionType.ALLOW
            and (a.resource_name, a.pattern_type) not in denied
            for a in mine
        )


@dataclass(frozen=True, slots=True)
class ApiRule:
    """What an API is checked for: `operation` on each named resource of `resource_type`
    (CLUSTER: the one cluster resource), `alternative` when that one is denied (CreateTopics:
    CREATE on the cluster, else on each topic)."""

    resource_type: ResourceType
    operation: AclOperation
    alternative: tuple[ResourceType, AclOperation] | None = None


_CLUSTER_ACTION = ApiRule(ResourceType.CLUSTER, AclOperation.CLUSTER_ACTION)
INTER_BROKER_RULE_OPERATION = frozenset({AclOperation.CLUSTER_ACTION})
"""What the inter-broker APIs need on the cluster."""

API_RULES: dict[ApiKey, ApiRule | None] = {
    ApiKey.PRODUCE: ApiRule(ResourceType.TOPIC, AclOperation.WRITE),
    # A follower's Fetch (replica_id >= 0) is CLUSTER_ACTION on the cluster instead.
    ApiKey.FETCH: ApiRule(ResourceType.TOPIC, AclOperation.READ),
    ApiKey.LIST_OFFSETS: ApiRule(ResourceType.TOPIC, AclOperation.DESCRIBE),
    ApiKey.METADATA: ApiRule(ResourceType.TOPIC, AclOperation.DESCRIBE),
    ApiKey.LEADER_AND_ISR: _CLUSTER_ACTION,
    ApiKey.STOP_REPLICA: _CLUSTER_ACTION,
    ApiKey.UPDATE_METADATA: _CLUSTER_ACTION,
    ApiKey.CONTROLLED_SHUTDOWN: _CLUSTER_ACTION,
    # Also READ on each topic whose offsets are committed or fetched.
    ApiKey.OFFSET_COMMIT: ApiRule(ResourceType.GROUP, AclOperation.READ),
    ApiKey.OFFSET_FETCH: ApiRule(ResourceType.GROUP, AclOperation.DESCRIBE),
    ApiKey.FIND_COORDINATOR: ApiRule(ResourceType.GROUP, AclOperation.DESCRIBE),
    ApiKey.JOIN_GROUP: ApiRule(ResourceType.GROUP, AclOperation.READ),
    ApiKey.HEARTBEAT: ApiRule(ResourceType.GROUP, AclOperation.READ),
    ApiKey.LEAVE_GROUP: ApiRule(ResourceType.GROUP, AclOperation.READ),
    ApiKey.SYNC_GROUP: ApiRule(ResourceType.GROUP, AclOperation.READ),
    ApiKey.DESCRIBE_GROUPS: ApiRule(ResourceType.GROUP, AclOperation.DESCRIBE),
    # Every group with DESCRIBE on the cluster, else those the principal may describe.
    ApiKey.LIST_GROUPS: None,
    ApiKey.API_VERSIONS: None,  # before authentication, as Kafka's
    ApiKey.CREATE_TOPICS: ApiRule(
        ResourceType.CLUSTER,
        AclOperation.CREATE,
        alternative=(ResourceType.TOPIC, AclOperation.CREATE),
    ),
    ApiKey.DELETE_TOPICS: ApiRule(ResourceType.TOPIC, AclOperation.DELETE),
    ApiKey.INIT_PRODUCER_ID: ApiRule(ResourceType.CLUSTER, AclOperation.IDEMPOTENT_WRITE),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: ApiRule(ResourceType.TOPIC, AclOperation.DESCRIBE),
    ApiKey.DESCRIBE_CONFIGS: ApiRule(ResourceType.TOPIC, AclOperation.DESCRIBE_CONFIGS),
    ApiKey.CREATE_PARTITIONS: ApiRule(ResourceType.TOPIC, AclOperation.ALTER),
    ApiKey.ELECT_LEADERS: ApiRule(ResourceType.CLUSTER, AclOperation.ALTER),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: ApiRule(ResourceType.TOPIC, AclOperation.ALTER_CONFIGS),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: ApiRule(ResourceType.CLUSTER, AclOperation.ALTER),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ApiRule(ResourceType.CLUSTER, AclOperation.DESCRIBE),
    ApiKey.VOTE: _CLUSTER_ACTION,
    ApiKey.BEGIN_QUORUM_EPOCH: _CLUSTER_ACTION,
    ApiKey.END_QUORUM_EPOCH: _CLUSTER_ACTION,
    ApiKey.DESCRIBE_QUORUM: ApiRule(ResourceType.CLUSTER, AclOperation.DESCRIBE),
    ApiKey.ALTER_PARTITION: _CLUSTER_ACTION,
    ApiKey.FETCH_SNAPSHOT: _CLUSTER_ACTION,
    ApiKey.DESCRIBE_CLUSTER: None,  # anyone, as Kafka
    ApiKey.BROKER_REGISTRATION: _CLUSTER_ACTION,
    ApiKey.BROKER_HEARTBEAT: _CLUSTER_ACTION,
    ApiKey.UNREGISTER_BROKER: ApiRule(ResourceType.CLUSTER, AclOperation.ALTER),
    ApiKey.ALLOCATE_PRODUCER_IDS: _CLUSTER_ACTION,
    ApiKey.DESCRIBE_ACLS: ApiRule(ResourceType.CLUSTER, AclOperation.DESCRIBE),
    ApiKey.CREATE_ACLS: ApiRule(ResourceType.CLUSTER, AclOperation.ALTER),
    ApiKey.DELETE_ACLS: ApiRule(ResourceType.CLUSTER, AclOperation.ALTER),
    ApiKey.SASL_HANDSHAKE: None,  # authentication itself
    ApiKey.SASL_AUTHENTICATE: None,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ApiRule(ResourceType.CLUSTER, AclOperation.DESCRIBE),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ApiRule(ResourceType.CLUSTER, AclOperation.ALTER),
}
"""Per API, what it is checked for (None: not checked). Kafka's KafkaApis/ControllerApis."""
