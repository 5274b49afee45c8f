"""Kafka's ACL model: resource types, pattern types, operations, permissions (their wire codes)
and an ACL binding. Pure data; `broker.authorizer` decides with it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

WILDCARD = "*"
"""A LITERAL resource name, principal or host that matches every one."""
WILDCARD_PRINCIPAL = "User:*"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
"""The one CLUSTER resource's name."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: `principal` from `host` may (ALLOW) or may not (DENY) do `operation` on the
    resources `pattern_type` and `resource_name` select."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def from_ids(
        cls,
        resource_type: int,
        resource_name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission: int,
    ) -> AclBinding:
        """From Kafka's wire and record ids; ValueError for an id outside the enums."""
        return cls(
            ResourceType(resource_type),
            resource_name,
            PatternType(pattern_type),
            principal,
            host,
            AclOperation(operation),
            AclPermissionType(permission),
        )

    def selects(self, resource_type: ResourceType, name: str) -> bool:
        """Whether this ACL is about that resource (whoever it names)."""
        if resource_type != self.resource_type:
            return False
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: which ACLs DescribeAcls lists and DeleteAcls deletes. ANY
    (and None for the strings) matches every value; pattern type MATCH selects the ACLs that
    would apply to the resource named (its LITERAL name, the `*` wildcard, a PREFIXED prefix)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if not self._matches_pattern(acl):
            return False
        return (
            self.principal in (None, acl.principal)
            and self.host in (None, acl.host)
            and self.operation in (AclOperation.ANY, acl.operation)
            and self.permission in (AclPermissionType.ANY, acl.permission)
        )

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.pattern_type is PatternType.MATCH:
            return self.resource_name is None or acl.selects(acl.resource_type, self.resource_name)
        if self.pattern_type not in (PatternType.ANY, acl.pattern_type):
            return False
        return self.resource_name in (None, acl.resource_name)


def binding_problem(acl: AclBinding) -> str | None:
    """What makes an ACL unfit to store (Kafka's AclControlManager.validateNewAcl), or None."""
    if acl.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return f"Invalid resourceType {acl.resource_type.name}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {acl.pattern_type.name}"
    if acl.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return f"Invalid operation {acl.operation.name}"
    if acl.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {acl.permission.name}"
    if not acl.resource_name:
        return "Resource name must not be empty"
    kind, sep, name = acl.principal.partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal {acl.principal!r}: expected Type:name (User:alice)"
    if not acl.host:
        return "Host must not be empty (* for every host)"
    if acl.resource_type is ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    return None
