"""ACLs in the metadata: CreateAcls and DeleteAcls turned into records (the controller's, as
Kafka's AclControlManager) and DescribeAcls answered from an image (a broker's).

As Kafka: an ACL that cannot be stored (an ANY or UNKNOWN value, a principal that is not
`Type:name`, a CLUSTER resource not named kafka-cluster) is INVALID_REQUEST for that creation
only; an ACL that exists already is not stored twice (the creation succeeds); a filter with an
UNKNOWN value is INVALID_REQUEST; a filter matching nothing deletes nothing and succeeds.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable
from enum import IntEnum
from typing import TypeVar

from protocol.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_problem,
)
from protocol.errors import ErrorCode
from protocol.messages.acls import (
    AclCreation,
    AclCreationResult,
    AclDescription,
    AclFilter,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from protocol.metadata.image import AclsImage
from protocol.metadata.records import (
    AccessControlEntryRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
)
from protocol.metadata.topic_ids import uuid_to_string

_ACL_ID_NAMESPACE = uuid.UUID("5d0c1a7e-8f3b-4c49-9a55-3b7f0e2a6c11")
"""The uuid5 namespace of `acl_id` (any fixed value; changing it renames every ZK-mode ACL)."""


class _Invalid(ValueError):
    pass


E = TypeVar("E", bound=IntEnum)


def _enum(kind: type[E], value: int, what: str) -> E:
    try:
        return kind(value)
    except ValueError:
        raise _Invalid(f"Unknown {what} {value}") from None


def acl_id(acl: AclBinding) -> str:
    """A Uuid string derived from the ACL itself (a name-based uuid5 of its seven values).

    ZooKeeper stores ACLs without ids (Kafka's AclAuthorizer has none), yet the image keys them
    by id: a ZK-mode controller loading /kafka-acl and a ZK-mode broker reading it must name the
    same ACL alike. A binding is unique in an image, so its id is too."""
    key = json.dumps(
        [
            int(acl.resource_type),
            acl.resource_name,
            int(acl.pattern_type),
            acl.principal,
            acl.host,
            int(acl.operation),
            int(acl.permission),
        ],
        ensure_ascii=False,
    )
    return uuid_to_string(uuid.uuid5(_ACL_ID_NAMESPACE, key).bytes)


def binding_from_creation(creation: AclCreation) -> AclBinding:
    """ValueError saying what is wrong for values outside Kafka's enums."""
    return AclBinding(
        resource_type=_enum(ResourceType, creation.resource_type, "resource type"),
        resource_name=creation.resource_name,
        pattern_type=_enum(PatternType, creation.resource_pattern_type, "pattern type"),
        principal=creation.principal,
        host=creation.host,
        operation=_enum(AclOperation, creation.operation, "operation"),
        permission=_enum(AclPermissionType, creation.permission_type, "permission type"),
    )


def binding_of_match(match: DeleteAclsMatchingAcl) -> AclBinding:
    """The ACL a DeleteAcls answer says it deleted."""
    return AclBinding.from_ids(
        match.resource_type, match.resource_name, match.pattern_type, match.principal,
        match.host, match.operation, match.permission_type,
    )  # fmt: skip


def filter_of(wire: AclFilter) -> AclBindingFilter:
    """ValueError for a filter with an UNKNOWN (or out of range) value."""
    found = AclBindingFilter(
        resource_type=_enum(ResourceType, wire.resource_type_filter, "resource type"),
        resource_name=wire.resource_name_filter,
        pattern_type=_enum(PatternType, wire.pattern_type_filter, "pattern type"),
        principal=wire.principal_filter,
        host=wire.host_filter,
        operation=_enum(AclOperation, wire.operation, "operation"),
        permission=_enum(AclPermissionType, wire.permission_type, "permission type"),
    )
    for value in (found.resource_type, found.pattern_type, found.operation, found.permission):
        if value.name == "UNKNOWN":
            raise _Invalid(f"A filter cannot match an UNKNOWN {type(value).__name__}")
    return found


def create_acls(
    image: AclsImage, request: CreateAclsRequest, new_id: Callable[[], str]
) -> tuple[list[MetadataRecord], CreateAclsResponse]:
    existing = set(image.by_id.values())
    records: list[MetadataRecord] = []
    results = []
    for creation in request.creations:
        try:
            acl = binding_from_creation(creation)
            problem = binding_problem(acl)
        except _Invalid as exc:
            problem = str(exc)
        if problem is not None:
            results.append(
                AclCreationResult(error_code=int(ErrorCode.INVALID_REQUEST), error_message=problem)
            )
            continue
        if acl not in existing:
            existing.add(acl)
            records.append(acl_record(new_id(), acl))
        results.append(AclCreationResult())
    return records, CreateAclsResponse(results=tuple(results))


def acl_record(record_id: str, acl: AclBinding) -> AccessControlEntryRecord:
    """The record that stores `acl` under `record_id`."""
    return AccessControlEntryRecord(
        id=record_id,
        resource_type=int(acl.resource_type),
        resource_name=acl.resource_name,
        pattern_type=int(acl.pattern_type),
        principal=acl.principal,
        host=acl.host,
        operation=int(acl.operation),
        permission_type=int(acl.permission),
    )


def delete_acls(
    image: AclsImage, request: DeleteAclsRequest
) -> tuple[list[MetadataRecord], DeleteAclsResponse]:
    deleted: set[str] = set()
    records: list[MetadataRecord] = []
    results = []
    for wire in request.filters:
        try:
            acl_filter = filter_of(wire)
        except _Invalid as exc:
            results.append(DeleteAclsFilterResult(
                error_code=int(ErrorCode.INVALID_REQUEST), error_message=str(exc)
            ))  # fmt: skip
            continue
        matching = []
        for acl_id, acl in sorted(image.by_id.items()):
            if acl_id in deleted or not acl_filter.matches(acl):
                continue
            deleted.add(acl_id)
            records.append(RemoveAccessControlEntryRecord(id=acl_id))
            matching.append(_matching(acl))
        results.append(DeleteAclsFilterResult(matching_acls=tuple(matching)))
    return records, DeleteAclsResponse(filter_results=tuple(results))


def _matching(acl: AclBinding) -> DeleteAclsMatchingAcl:
    return DeleteAclsMatchingAcl(
        resource_type=int(acl.resource_type),
        resource_name=acl.resource_name,
        pattern_type=int(acl.pattern_type),
        principal=acl.principal,
        host=acl.host,
        operation=int(acl.operation),
        permission_type=int(acl.permission),
    )


def describe_acls(image: AclsImage, request: DescribeAclsRequest) -> DescribeAclsResponse:
    try:
        acl_filter = filter_of(request.filter)
    except _Invalid as exc:
        return DescribeAclsResponse(
            error_code=int(ErrorCode.INVALID_REQUEST), error_message=str(exc)
        )
    return DescribeAclsResponse(resources=tuple(by_resource(image.by_id.values(), acl_filter)))


def by_resource(
    acls: Iterable[AclBinding], acl_filter: AclBindingFilter
) -> list[DescribeAclsResource]:
    """The ACLs the filter matches, grouped by resource pattern, in a stable order."""
    groups: dict[tuple[int, str, int], list[AclDescription]] = {}
    for acl in acls:
        if acl_filter.matches(acl):
            key = (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))
            groups.setdefault(key, []).append(AclDescription(
                principal=acl.principal, host=acl.host, operation=int(acl.operation),
                permission_type=int(acl.permission),
            ))  # fmt: skip
    return [
        DescribeAclsResource(
            resource_type=t,
            resource_name=n,
            pattern_type=p,
            acls=tuple(sorted(groups[t, n, p], key=lambda d: (d.principal, d.host, d.operation))),
        )
        for t, n, p in sorted(groups)
    ]
