"""Producer ids for InitProducerId (Kafka's RPCProducerIdManager): ids come from blocks the
active controller allocates (AllocateProducerIds through the ControllerChannel; the controller
commits each block before answering, so ids are unique across brokers and restarts).

`ProducerIdBlocks` is the pure core: the current block, the prefetched next one, and when to ask
for it (once 90% of the current block is handed out, as Kafka's PID_PREFETCH_THRESHOLD).
`ProducerIdManager` is its trio driver: one task fetches blocks when asked, retrying with
backoff; `generate()` waits for a block at most its timeout, then raises
COORDINATOR_NOT_AVAILABLE (retriable: the client asks again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import structlog
import trio

from broker.ports import ControllerChannel
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.producer_ids import AllocateProducerIdsRequest, AllocateProducerIdsResponse

log = structlog.get_logger("broker.producer_ids")

PREFETCH_THRESHOLD = 0.90
"""Kafka's RPCProducerIdManager.PID_PREFETCH_THRESHOLD."""
RETRY_BACKOFF_S = 0.05
MAX_RETRY_BACKOFF_S = 1.0


class IdBlock(NamedTuple):
    first: int
    size: int

    @property
    def end(self) -> int:
        return self.first + self.size


class ProducerIdBlocks:
    """Pure: hands out ids of the current block and says when the next one is wanted."""

    def __init__(self) -> None:
        self.current: IdBlock | None = None
        self.next_id = 0
        self.prefetched: IdBlock | None = None
        self.requested = False
        """A block request is under way (or wanted): do not ask twice."""

    def take(self) -> int | None:
        """The next id, or None when no block holds one (ask for a block and wait)."""
        if self.current is None or self.next_id >= self.current.end:
            if self.prefetched is None:
                return None
            self.current, self.prefetched = self.prefetched, None
            self.next_id = self.current.first
        pid = self.next_id
        self.next_id += 1
        return pid

    def wants_block(self) -> bool:
        """True when a block request should start now (none under way, none prefetched, and the
        current block is missing, used up or past the prefetch threshold)."""
        if self.requested or self.prefetched is not None:
            return False
        if self.current is None:
            return True
        used = self.next_id - self.current.first
        return used >= self.current.size * PREFETCH_THRESHOLD

    def add(self, block: IdBlock) -> None:
        self.requested = False
        if self.current is None or self.next_id >= self.current.end:
            self.current, self.next_id = block, block.first
        else:
            self.prefetched = block


class ProducerIdManager:
    def __init__(
        self,
        broker_id: int,
        channel: ControllerChannel,
        broker_epoch: Callable[[], int],
        *,
        timeout_s: float,
    ) -> None:
        self.broker_id = broker_id
        self.channel = channel
        self.broker_epoch = broker_epoch
        self.timeout_s = timeout_s
        """How long InitProducerId waits for a block before COORDINATOR_NOT_AVAILABLE."""
        self.blocks = ProducerIdBlocks()
        self._wanted = trio.Event()
        self._arrived = trio.Event()

    async def generate(self) -> int:
        with trio.move_on_after(self.timeout_s):
            while True:
                pid = self.blocks.take()
                self._maybe_prefetch()
                if pid is not None:
                    return pid
                await self._arrived.wait()
        raise KafkaError(
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
            f"broker {self.broker_id} got no producer id block from the controller within "
            f"{self.timeout_s:g} s; retry",
        )

    def _maybe_prefetch(self) -> None:
        if self.blocks.wants_block():
            self.blocks.requested = True
            self._wanted.set()

    async def run(self) -> None:
        """Fetch a block each time one is wanted, until cancelled."""
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            block = await self._fetch_block()
            self.blocks.add(block)
            log.info("producer id block", first=block.first, size=block.size)
            self._arrived.set()
            self._arrived = trio.Event()

    async def _fetch_block(self) -> IdBlock:
        backoff = RETRY_BACKOFF_S
        while True:
            request = AllocateProducerIdsRequest(
                broker_id=self.broker_id, broker_epoch=self.broker_epoch()
            )
            try:
                response = await self.channel.submit(request)
                assert isinstance(response, AllocateProducerIdsResponse)
                if response.error_code == 0 and response.producer_id_len > 0:
                    return IdBlock(response.producer_id_start, response.producer_id_len)
                code = ErrorCode.from_wire(response.error_code)
                problem = f"{code.name}: {response.error_message}"
            except KafkaError as exc:
                problem = f"{exc.code.name}: {exc.message}"
            log.info("producer id block request failed", problem=problem, retry_in_s=backoff)
            await trio.sleep(backoff)
            backoff = min(backoff * 2, MAX_RETRY_BACKOFF_S)


async def init_producer_id(
    manager: ProducerIdManager, request: InitProducerIdRequest
) -> InitProducerIdResponse:
    """The InitProducerId handler (idempotence only: no transactions, no KIP-360 bump)."""
    if request.transactional_id is not None:
        return InitProducerIdResponse(
            error_code=int(ErrorCode.INVALID_REQUEST),
            error_message="transactional ids are not served: trioka has no transactions",
        )
    if request.producer_id != -1 or request.producer_epoch != -1:
        return InitProducerIdResponse(
            error_code=int(ErrorCode.INVALID_REQUEST),
            error_message=(
                f"producer id {request.producer_id} epoch {request.producer_epoch}: "
                "re-initialising an existing producer (KIP-360) is not served; ask with -1, -1"
            ),
        )
    try:
        pid = await manager.generate()
    except KafkaError as exc:
        return InitProducerIdResponse(error_code=int(exc.code), error_message=exc.message)
    return InitProducerIdResponse(producer_id=pid, producer_epoch=0)
