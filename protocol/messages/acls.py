"""CreateAcls, DescribeAcls and DeleteAcls (KIP-140; Kafka's ids for resource types, pattern
types, operations and permissions are in protocol.acls)."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class AclCreation:
    resource_type: int
    """ResourceType: TOPIC, GROUP, CLUSTER, ..."""
    resource_name: str
    """The resource name, `*` for all (LITERAL), or a prefix (PREFIXED)."""
    resource_pattern_type: int
    """PatternType: LITERAL (3) or PREFIXED (4)."""
    principal: str
    """Who: `User:alice`, or `User:*`."""
    host: str
    """From where: an IP address, or `*`."""
    operation: int
    """AclOperation: READ, WRITE, ..."""
    permission_type: int
    """AclPermissionType: DENY (2) or ALLOW (3)."""


@message
class AclCreationResult:
    error_code: int = 0
    """INVALID_REQUEST for an ACL that cannot be stored."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class CreateAclsResponse(Response):
    results: tuple[AclCreationResult, ...] = ()
    """One per creation, in order."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class CreateAclsRequest(Request):
    API_KEY = ApiKey.CREATE_ACLS
    MAX_VERSION = 0
    RESPONSE = CreateAclsResponse

    creations: tuple[AclCreation, ...]
    """The ACLs to create (one that exists already is not made twice)."""


@message
class AclFilter:
    resource_type_filter: int = 1
    """ResourceType, ANY (1) for all."""
    resource_name_filter: str | None = None
    """The resource name; null for all."""
    pattern_type_filter: int = 1
    """PatternType: ANY (1), MATCH (2: the ACLs that apply to the name), LITERAL, PREFIXED."""
    principal_filter: str | None = None
    """The principal; null for all."""
    host_filter: str | None = None
    """The host; null for all."""
    operation: int = 1
    """AclOperation, ANY (1) for all."""
    permission_type: int = 1
    """AclPermissionType, ANY (1) for all."""


@message
class AclDescription:
    principal: str
    """Who."""
    host: str
    """From where."""
    operation: int
    """AclOperation."""
    permission_type: int
    """AclPermissionType."""


@message
class DescribeAclsResource:
    resource_type: int
    """ResourceType."""
    resource_name: str
    """The resource name or prefix."""
    pattern_type: int
    """PatternType: LITERAL or PREFIXED."""
    acls: tuple[AclDescription, ...] = ()
    """The ACLs on that resource pattern."""


@message
class DescribeAclsResponse(Response):
    resources: tuple[DescribeAclsResource, ...] = ()
    """The matching ACLs by resource pattern."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """INVALID_REQUEST for a filter that cannot match (an UNKNOWN value)."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class DescribeAclsRequest(Request):
    API_KEY = ApiKey.DESCRIBE_ACLS
    MAX_VERSION = 0
    RESPONSE = DescribeAclsResponse

    filter: AclFilter = AclFilter()
    """Which ACLs to list (the request's fields, in Kafka's schema, as one filter)."""


@message
class DeleteAclsMatchingAcl:
    resource_type: int
    """ResourceType."""
    resource_name: str
    """The resource name or prefix."""
    pattern_type: int
    """PatternType."""
    principal: str
    """Who."""
    host: str
    """From where."""
    operation: int
    """AclOperation."""
    permission_type: int
    """AclPermissionType."""
    error_code: int = 0
    """Per-ACL error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@message
class DeleteAclsFilterResult:
    error_code: int = 0
    """INVALID_REQUEST for a filter that cannot match."""
    error_message: str | None = None
    """What went wrong, for a person."""
    matching_acls: tuple[DeleteAclsMatchingAcl, ...] = ()
    """The ACLs this filter deleted."""


@message
class DeleteAclsResponse(Response):
    filter_results: tuple[DeleteAclsFilterResult, ...] = ()
    """One per filter, in order."""
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """Request-level error."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class DeleteAclsRequest(Request):
    API_KEY = ApiKey.DELETE_ACLS
    MAX_VERSION = 0
    RESPONSE = DeleteAclsResponse

    filters: tuple[AclFilter, ...]
    """Each deletes the ACLs it matches."""
