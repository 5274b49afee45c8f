"""The Admin client's consumer-group operations (Kafka's Admin listConsumerGroups,
describeConsumerGroups, listConsumerGroupOffsets, alterConsumerGroupOffsets), mixed into
client.admin.Admin.

Group requests go to the group's coordinator, found with FindCoordinator and found again after
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / a broken connection; COORDINATOR_LOAD_IN_PROGRESS
is waited out; all of it within default.api.timeout.ms.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import trio

from client.cluster import ClusterClient, backoff_ms, now_ms
from client.consumer_protocol import decode_assignment
from client.coordinator_lookup import (
    COORDINATOR_ERRORS,
    CoordinatorNode,
    find_coordinator,
    send_to_coordinator,
)
from client.errors import KafkaConnectionError, KafkaTimeoutError
from client.group_offsets import (
    OffsetAndMetadata,
    commit_errors,
    commit_request,
    fetch_request,
    parse_fetch,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.group_offsets import OffsetCommitResponse, OffsetFetchResponse
from protocol.messages.groups import (
    UNKNOWN_GENERATION_ID,
    UNKNOWN_MEMBER_ID,
    DescribedGroup,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from protocol.names import TopicPartition

T = TypeVar("T")

__all__ = ["GroupAdmin", "GroupDescription", "GroupListing", "MemberDescription"]

_RETRY = object()
"""Returned by a coordinator call's handler: ask again (after backoff)."""

_MEMBERS_ACTIVE = frozenset(
    {ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS}
)
"""What the coordinator answers a generation -1 commit while the group has members."""


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str
    coordinator: int
    """The broker that listed it (its coordinator)."""


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    assignment: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    """Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead."""
    protocol_type: str
    assignor: str
    """The generation's protocol (for consumers the assignor) when Stable, else ""."""
    members: tuple[MemberDescription, ...]
    coordinator: int


class GroupAdmin:
    """Mixed into Admin: needs `_client()` and `_api_timeout_ms`."""

    _api_timeout_ms: float

    def _client(self) -> ClusterClient:
        raise NotImplementedError

    async def list_groups(self, states: Iterable[str] = ()) -> list[GroupListing]:
        """Every group of the cluster: ListGroups to every broker (each lists those it
        coordinates), retried per broker until default.api.timeout.ms."""
        cluster = self._client()
        deadline = now_ms() + self._api_timeout_ms
        await cluster.refresh_metadata(())
        request = ListGroupsRequest(states_filter=tuple(states))
        found: dict[int, list[GroupListing]] = {}
        errors: dict[int, str] = {}

        async def ask(node: int) -> None:
            attempt = 0
            while True:
                attempt += 1
                try:
                    response: ListGroupsResponse = await cluster.send(node, request)
                    code = ErrorCode.from_wire(response.error_code)
                    if code is ErrorCode.NONE:
                        found[node] = [
                            GroupListing(g.group_id, g.protocol_type, g.group_state, node)
                            for g in response.groups
                        ]
                        errors.pop(node, None)
                        return
                    errors[node] = response.error_message or code.name
                    if not code.retriable:
                        return
                except KafkaConnectionError as exc:
                    cluster.drop(node)
                    errors[node] = exc.message
                remaining = deadline - now_ms()
                if remaining <= 0:
                    return
                delay = backoff_ms(attempt, cluster.retry_backoff_ms, cluster.retry_backoff_max_ms)
                await trio.sleep(min(delay, remaining) / 1000)

        async with trio.open_nursery() as nursery:
            for node in sorted(cluster.metadata.brokers):
                nursery.start_soon(ask, node)
        if errors:
            named = "; ".join(f"broker {n}: {e}" for n, e in sorted(errors.items()))
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"ListGroups failed: {named}")
        return sorted((g for gs in found.values() for g in gs), key=lambda g: g.group_id)

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """Each group's state and members with their assignments, from its coordinator. A
        group nobody uses is described as state Dead (as Kafka's)."""
        out: dict[str, GroupDescription] = {}
        for group_id in group_ids:
            out[group_id] = await self._coordinator_call(
                group_id,
                DescribeGroupsRequest(groups=(group_id,)),
                lambda response, node, g=group_id: _described(g, response, node),
            )
        return out

    async def list_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (all it committed when `partitions` is None);
        partitions without a commit are left out."""
        wanted = None if partitions is None else [TopicPartition(*tp) for tp in partitions]

        def handle(response: OffsetFetchResponse, node: int) -> Any:
            code = ErrorCode.from_wire(response.error_code)
            if code is not ErrorCode.NONE:
                return _group_error(group_id, code, response.error_message, "OffsetFetch")
            found, errors = parse_fetch(response)
            for tp, error in sorted(errors.items()):
                if error.code.retriable:
                    return _RETRY
                raise KafkaError(error.code, f"OffsetFetch of {tp} for group "
                                             f"{group_id!r}: {error.message}")  # fmt: skip
            return {tp: om for tp, om in found.items() if om is not None}

        return await self._coordinator_call(group_id, fetch_request(group_id, wanted), handle)

    async def alter_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata | int]
    ) -> None:
        """Set the group's committed offsets (OffsetCommit as no member, generation -1). The
        coordinator refuses it while the group has members, as Kafka's: stop the group's
        consumers first."""
        wanted = {
            TopicPartition(*tp): om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(om)
            for tp, om in offsets.items()
        }
        if any(om.offset < 0 for om in wanted.values()):
            raise ValueError("offsets must be >= 0")
        request = commit_request(group_id, UNKNOWN_GENERATION_ID, UNKNOWN_MEMBER_ID, wanted)

        def handle(response: OffsetCommitResponse, node: int) -> Any:
            failed = commit_errors(response, wanted)
            if not failed:
                return None
            tp, error = sorted(failed.items())[0]
            if error.code in _MEMBERS_ACTIVE:
                raise KafkaError(
                    ErrorCode.NON_EMPTY_GROUP,
                    f"group {group_id!r} has active members: offsets can only be altered "
                    f"while the group is empty (stop its consumers first) ({error.message})",
                )
            return _group_error(group_id, error.code, f"{tp}: {error.message}", "OffsetCommit")

        await self._coordinator_call(group_id, request, handle)

    async def _coordinator_call(
        self,
        group_id: str,
        request: Any,
        handle: Callable[[Any, int], Any | Awaitable[Any]],
    ) -> Any:
        """`request` to `group_id`'s coordinator, rediscovering it and retrying until
        default.api.timeout.ms; `handle(response, node)` returns the result or _RETRY."""
        cluster = self._client()
        deadline = now_ms() + self._api_timeout_ms
        node: CoordinatorNode | None = None
        attempt = 0
        last = ""
        while True:
            attempt += 1
            try:
                if node is None:
                    node = await find_coordinator(cluster, group_id, deadline)
                response = await send_to_coordinator(cluster, node, request)
                result = handle(response, node.node_id)
                if result is not _RETRY:
                    return result
                last = "the coordinator asked to retry"
            except KafkaError as exc:
                if not exc.code.retriable:
                    raise
                last = exc.message
                if exc.code in COORDINATOR_ERRORS:
                    node = None
            remaining = deadline - now_ms()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"{type(request).__name__} for group {group_id!r} failed until "
                    f"default.api.timeout.ms: {last}"
                )
            delay = backoff_ms(attempt, cluster.retry_backoff_ms, cluster.retry_backoff_max_ms)
            await trio.sleep(min(delay, remaining) / 1000)


def _group_error(group_id: str, code: ErrorCode, message: str | None, api: str) -> Any:
    """A group-level error: retriable ones raise for _coordinator_call to retry."""
    raise KafkaError(code, f"{api} for group {group_id!r}: {message or code.name}")


def _described(group_id: str, response: DescribeGroupsResponse, node: int) -> GroupDescription:
    code = ErrorCode.from_wire(response.error_code)
    if code is not ErrorCode.NONE:
        _group_error(group_id, code, response.error_message, "DescribeGroups")
    group: DescribedGroup | None = next(
        (g for g in response.groups if g.group_id == group_id), None
    )
    if group is None:
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"DescribeGroups did not answer for "
                                                         f"group {group_id!r}")  # fmt: skip
    code = ErrorCode.from_wire(group.error_code)
    if code is not ErrorCode.NONE:
        _group_error(group_id, code, group.error_message, "DescribeGroups")
    consumer = group.protocol_type == "consumer"
    members = tuple(
        MemberDescription(
            m.member_id,
            m.client_id,
            m.client_host,
            frozenset(decode_assignment(m.member_assignment).partitions)
            if consumer
            else frozenset(),
        )
        for m in group.members
    )
    return GroupDescription(
        group_id, group.group_state, group.protocol_type, group.protocol_data, members, node
    )
