"""broker.producer_ids: blocks, the 90% prefetch, retries, and COORDINATOR_NOT_AVAILABLE when
no block comes in time (a fake in-memory ControllerChannel; the real one is tested in
tests/integration/cluster/test_cluster_idempotence.py)."""

from __future__ import annotations

import trio
import trio.testing

from broker.producer_ids import IdBlock, ProducerIdBlocks, ProducerIdManager, init_producer_id
from protocol.errors import ErrorCode
from protocol.messages import Request, Response
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.producer_ids import AllocateProducerIdsResponse


def test_blocks_hand_out_ids_and_prefetch_at_ninety_percent() -> None:
    b = ProducerIdBlocks()
    assert b.take() is None and b.wants_block()
    b.add(IdBlock(1000, 10))
    got = [b.take() for _ in range(8)]
    assert got == list(range(1000, 1008)) and not b.wants_block()
    assert b.take() == 1008 and b.wants_block()  # 9 of 10 used
    b.requested = True
    assert not b.wants_block()  # one request at a time
    b.add(IdBlock(5000, 10))
    assert b.take() == 1009
    assert b.take() == 5000  # the prefetched block takes over
    assert b.take() is not None


class FakeChannel:
    def __init__(self, answers: list[AllocateProducerIdsResponse]) -> None:
        self.answers = answers
        self.requests: list[Request] = []
        self.gate = trio.Event()

    async def submit(self, request: Request) -> Response:
        self.requests.append(request)
        await self.gate.wait()
        return self.answers.pop(0)


def ok(start: int, size: int = 10) -> AllocateProducerIdsResponse:
    return AllocateProducerIdsResponse(producer_id_start=start, producer_id_len=size)


async def test_generate_waits_for_a_block_and_retries_errors(
    autojump_clock: trio.testing.MockClock,
) -> None:
    stale = AllocateProducerIdsResponse(error_code=int(ErrorCode.STALE_BROKER_EPOCH))
    channel = FakeChannel([stale, ok(100), ok(200)])
    channel.gate.set()
    manager = ProducerIdManager(3, channel, lambda: 42, timeout_s=5)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(manager.run)
        ids = [await manager.generate() for _ in range(12)]
        nursery.cancel_scope.cancel()
    assert ids == [*range(100, 110), 200, 201]
    assert [(r.broker_id, r.broker_epoch) for r in channel.requests] == [(3, 42)] * 3  # type: ignore[attr-defined]


async def test_no_block_in_time_is_coordinator_not_available(
    autojump_clock: trio.testing.MockClock,
) -> None:
    channel = FakeChannel([ok(0)])  # the gate never opens: the controller does not answer
    manager = ProducerIdManager(1, channel, lambda: 1, timeout_s=2)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(manager.run)
        response = await init_producer_id(manager, InitProducerIdRequest())
        nursery.cancel_scope.cancel()
    assert response.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert ErrorCode.COORDINATOR_NOT_AVAILABLE.retriable
    assert "no producer id block" in (response.error_message or "")


async def test_transactional_and_reinit_requests_are_refused() -> None:
    manager = ProducerIdManager(1, FakeChannel([]), lambda: 1, timeout_s=1)
    for request in (
        InitProducerIdRequest(transactional_id="tx"),
        InitProducerIdRequest(producer_id=5, producer_epoch=0),
    ):
        response = await init_producer_id(manager, request)
        assert response.error_code == ErrorCode.INVALID_REQUEST and response.error_message
