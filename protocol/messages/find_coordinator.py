"""FindCoordinator: which broker coordinates a consumer group (the leader of its
`__consumer_offsets` partition). The first request for a group creates `__consumer_offsets`
if it does not exist yet (COORDINATOR_NOT_AVAILABLE until it has leaders)."""

from __future__ import annotations

from enum import IntEnum

from protocol.messages.base import ApiKey, Request, Response, message, register

__all__ = ["CoordinatorType", "FindCoordinatorRequest", "FindCoordinatorResponse"]


class CoordinatorType(IntEnum):
    """Kafka's FindCoordinatorRequest.CoordinatorType."""

    GROUP = 0
    TRANSACTION = 1


@message
class FindCoordinatorResponse(Response):
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """NONE, COORDINATOR_NOT_AVAILABLE (offsets topic not created or partition leaderless yet),
    INVALID_REQUEST (an empty key), UNSUPPORTED_VERSION (key_type TRANSACTION)."""
    error_message: str | None = None
    """What went wrong, for a person."""
    node_id: int = -1
    """The coordinator's broker id."""
    host: str = ""
    """The coordinator's host on the listener the request came in on."""
    port: int = -1
    """The coordinator's port on that listener."""


@register
@message
class FindCoordinatorRequest(Request):
    API_KEY = ApiKey.FIND_COORDINATOR
    MAX_VERSION = 0
    RESPONSE = FindCoordinatorResponse

    key: str
    """The group id (key_type GROUP)."""
    key_type: int = CoordinatorType.GROUP
    """CoordinatorType; only GROUP is served (no transactions)."""
