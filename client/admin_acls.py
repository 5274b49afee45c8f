"""The Admin client's ACLs (Kafka's Admin.createAcls, describeAcls, deleteAcls)."""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Any, Protocol

from protocol.acls import (
    AclBinding,
    AclBindingFilter,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request
from protocol.messages.acls import (
    AclCreation,
    AclFilter,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from protocol.metadata.acls import binding_of_match


class _Calls(Protocol):
    def _call(
        self, request: Request, *, to_controller: bool = False, deadline: float | None = None
    ) -> Awaitable[Any]: ...


def _wire_filter(f: AclBindingFilter) -> AclFilter:
    return AclFilter(
        resource_type_filter=int(f.resource_type),
        resource_name_filter=f.resource_name,
        pattern_type_filter=int(f.pattern_type),
        principal_filter=f.principal,
        host_filter=f.host,
        operation=int(f.operation),
        permission_type=int(f.permission),
    )


def _raise(code: int, message: str | None) -> None:
    if code:
        error = ErrorCode.from_wire(code)
        raise KafkaError(error, message or error.name)


class AclAdmin:
    """Mixed into Admin: needs `_call`."""

    async def create_acls(self: _Calls, acls: Iterable[AclBinding]) -> None:
        """Create ACLs (those that exist already stay as they are); KafkaError for the first
        one refused."""
        request = CreateAclsRequest(
            creations=tuple(
                AclCreation(
                    resource_type=int(a.resource_type),
                    resource_name=a.resource_name,
                    resource_pattern_type=int(a.pattern_type),
                    principal=a.principal,
                    host=a.host,
                    operation=int(a.operation),
                    permission_type=int(a.permission),
                )
                for a in acls
            )
        )
        response: CreateAclsResponse = await self._call(request, to_controller=True)
        for result in response.results:
            _raise(result.error_code, result.error_message)

    async def describe_acls(
        self: _Calls, acl_filter: AclBindingFilter = AclBindingFilter()
    ) -> list[AclBinding]:
        response: DescribeAclsResponse = await self._call(
            DescribeAclsRequest(filter=_wire_filter(acl_filter))
        )
        return [
            AclBinding.from_ids(
                r.resource_type,
                r.resource_name,
                r.pattern_type,
                a.principal,
                a.host,
                a.operation,
                a.permission_type,
            )
            for r in response.resources
            for a in r.acls
        ]

    async def delete_acls(self: _Calls, filters: Iterable[AclBindingFilter]) -> list[AclBinding]:
        """Delete what the filters match; the ACLs deleted."""
        request = DeleteAclsRequest(filters=tuple(_wire_filter(f) for f in filters))
        response: DeleteAclsResponse = await self._call(request, to_controller=True)
        deleted = []
        for result in response.filter_results:
            _raise(result.error_code, result.error_message)
            deleted += map(binding_of_match, result.matching_acls)
        return deleted
