"""InitProducerId: an idempotent producer asks any broker for a producer id and epoch. The broker
hands ids out of blocks the controller allocated (AllocateProducerIds), so ids are unique across
the cluster and across restarts."""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register

__all__ = ["InitProducerIdRequest", "InitProducerIdResponse"]


@message
class InitProducerIdResponse(Response):
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """NONE, COORDINATOR_NOT_AVAILABLE (no id block could be had from the controller: retry),
    INVALID_REQUEST (a transactional id: transactions are not served)."""
    error_message: str | None = None
    """What went wrong, for a person."""
    producer_id: int = -1
    """The producer id given."""
    producer_epoch: int = -1
    """Its epoch (0 for a new id)."""


@register
@message
class InitProducerIdRequest(Request):
    API_KEY = ApiKey.INIT_PRODUCER_ID
    MAX_VERSION = 0
    RESPONSE = InitProducerIdResponse

    transactional_id: str | None = None
    """Must be null: trioka has no transactions."""
    transaction_timeout_ms: int = -1
    """Unused without transactions."""
    producer_id: int = -1
    """-1 for a new producer (KIP-360's re-initialisation is not served)."""
    producer_epoch: int = -1
    """-1 for a new producer."""
