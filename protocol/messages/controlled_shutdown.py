"""ControlledShutdown: a stopping broker asks the controller to move its leaderships away."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register


@message
class RemainingPartition:
    topic_name: str
    """Topic name."""
    partition_index: int
    """Partition number."""


@message
class ControlledShutdownResponse(Response):
    remaining_partitions: tuple[RemainingPartition, ...] = ()
    """Partitions the broker still leads; the shutdown is complete when this is empty."""
    error_code: int = 0
    """NONE, STALE_BROKER_EPOCH, BROKER_NOT_AVAILABLE, NOT_CONTROLLER, ..."""
    error_message: str | None = None
    """What went wrong, for a person."""


@register
@message
class ControlledShutdownRequest(Request):
    API_KEY = ApiKey.CONTROLLED_SHUTDOWN
    MAX_VERSION = 0
    RESPONSE = ControlledShutdownResponse

    broker_id: int
    """The broker shutting down."""
    broker_epoch: int = -1
    """Its broker epoch; a stale one (an earlier registration) -> STALE_BROKER_EPOCH."""
