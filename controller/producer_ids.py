"""AllocateProducerIds (KIP-730, Kafka's ProducerIdControlManager): the controller hands a
registered broker the next block of PRODUCER_ID_BLOCK_SIZE producer ids as one
ProducerIdsRecord; the image's `producer_ids.next_producer_id` only goes up, so two brokers (or
one broker twice) never get the same id. The record is the whole state: in ZK mode it becomes the
`/latest_producer_id_block` write, in Raft mode it is the log entry.
"""

from __future__ import annotations

from controller.context import ControllerContext
from controller.result import ControllerResult
from controller.state import ControllerState
from protocol.errors import ErrorCode
from protocol.messages.producer_ids import AllocateProducerIdsRequest, AllocateProducerIdsResponse
from protocol.metadata.image import PRODUCER_ID_BLOCK_SIZE
from protocol.metadata.records import ProducerIdsRecord

MAX_PRODUCER_ID = 2**63 - 1
"""Java's Long.MAX_VALUE: producer ids are int64."""


def allocate_producer_ids(
    state: ControllerState, request: AllocateProducerIdsRequest, ctx: ControllerContext
) -> ControllerResult[AllocateProducerIdsResponse]:
    broker = state.image.cluster.broker(request.broker_id)
    if broker is None or broker.epoch != request.broker_epoch:
        registered = "not registered" if broker is None else "registered with another epoch"
        return _error(
            ErrorCode.STALE_BROKER_EPOCH,
            f"broker {request.broker_id} asked with broker epoch {request.broker_epoch} but is "
            f"{registered}",
        )
    block = state.image.producer_ids.next_block(request.broker_id, PRODUCER_ID_BLOCK_SIZE)
    if block.next_block_first_id > MAX_PRODUCER_ID:
        return _error(ErrorCode.UNKNOWN_SERVER_ERROR, "Exhausted all producerIds.")
    record = ProducerIdsRecord(
        broker_id=request.broker_id,
        broker_epoch=request.broker_epoch,
        next_producer_id=block.next_block_first_id,
    )
    return ControllerResult(
        records=(record,),
        response=AllocateProducerIdsResponse(
            producer_id_start=block.first_producer_id, producer_id_len=block.size
        ),
    )


def _error(code: ErrorCode, message: str) -> ControllerResult[AllocateProducerIdsResponse]:
    return ControllerResult(
        records=(),
        response=AllocateProducerIdsResponse(error_code=int(code), error_message=message),
    )
