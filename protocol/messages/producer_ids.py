"""AllocateProducerIds (KIP-730): a broker asks the active controller for a block of producer ids
(it hands them out with InitProducerId). The controller commits the block before answering:
`/latest_producer_id_block` in ZK mode, a ProducerIdsRecord in Raft mode, so no id is ever given
twice, across controller failovers too.
"""

from __future__ import annotations

from protocol.messages.base import ApiKey, Request, Response, message, register

__all__ = ["AllocateProducerIdsRequest", "AllocateProducerIdsResponse"]


@message
class AllocateProducerIdsResponse(Response):
    throttle_time_ms: int = 0
    """Always 0."""
    error_code: int = 0
    """NONE, NOT_CONTROLLER, STALE_BROKER_EPOCH, UNKNOWN_SERVER_ERROR (ids exhausted), ..."""
    error_message: str | None = None
    """What went wrong, for a person."""
    producer_id_start: int = -1
    """The first producer id of the block."""
    producer_id_len: int = 0
    """How many ids the block holds."""


@register
@message
class AllocateProducerIdsRequest(Request):
    API_KEY = ApiKey.ALLOCATE_PRODUCER_IDS
    MAX_VERSION = 0
    RESPONSE = AllocateProducerIdsResponse

    broker_id: int
    """The broker asking."""
    broker_epoch: int
    """Its broker epoch; not the registered one -> STALE_BROKER_EPOCH."""
