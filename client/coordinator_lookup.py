"""Finding a group's coordinator (Kafka's FindCoordinator lookup), shared by the consumer's
group membership and the Admin client's group operations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog
import trio

from client.cluster import ClusterClient, backoff_ms, now_ms
from client.errors import KafkaConnectionError, KafkaTimeoutError
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

log = structlog.get_logger("client.coordinator")

__all__ = [
    "COORDINATOR_ERRORS",
    "CoordinatorNode",
    "find_coordinator",
    "send_to_coordinator",
]

COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
"""Answers after which the coordinator must be looked up again (Kafka's markCoordinatorUnknown);
COORDINATOR_LOAD_IN_PROGRESS only waits."""

_MAX_INT = 2**31 - 1


@dataclass(frozen=True, slots=True)
class CoordinatorNode:
    node_id: int
    host: str
    port: int

    @property
    def connection_id(self) -> int:
        """Kafka's coordinator connection id: its own connection, apart from fetches."""
        return _MAX_INT - self.node_id


async def find_coordinator(
    cluster: ClusterClient, group_id: str, deadline_ms: float
) -> CoordinatorNode:
    """Ask any broker which broker coordinates `group_id`, retrying COORDINATOR_NOT_AVAILABLE
    (the offsets topic is being created or its partition has no leader) and connection errors
    with backoff until `deadline_ms`."""
    attempt = 0
    last = ""
    while True:
        attempt += 1
        try:
            response: FindCoordinatorResponse = await cluster.send_any(
                FindCoordinatorRequest(key=group_id)
            )
            code = ErrorCode.from_wire(response.error_code)
            if code is ErrorCode.NONE:
                return CoordinatorNode(response.node_id, response.host, response.port)
            last = response.error_message or code.name
            if not code.retriable:
                raise KafkaError(code, f"FindCoordinator for group {group_id!r}: {last}")
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            last = exc.message
        remaining = deadline_ms - now_ms()
        if remaining <= 0:
            raise KafkaTimeoutError(
                f"no coordinator found for group {group_id!r} before the deadline: {last}"
            )
        log.debug("coordinator lookup retry", group=group_id, error=last)
        delay = backoff_ms(attempt, cluster.retry_backoff_ms, cluster.retry_backoff_max_ms)
        await trio.sleep(min(delay, remaining) / 1000)


async def send_to_coordinator(
    cluster: ClusterClient,
    node: CoordinatorNode,
    request: Request,
    *,
    timeout_ms: float | None = None,
) -> Any:
    """`request` on the coordinator's own connection; a broken one is dropped (the caller
    looks the coordinator up again: COORDINATOR_ERRORS holds NETWORK_EXCEPTION)."""
    try:
        return await cluster.send_to(
            node.connection_id, node.host, node.port, request, timeout_ms=timeout_ms
        )
    except KafkaError:
        cluster.drop(node.connection_id)
        raise
