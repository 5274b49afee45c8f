"""ControllerChannelManager over an in-memory sender: order, retries, brokers coming and going."""

from __future__ import annotations

from collections import defaultdict

import pytest
import trio

from controller.propagation import BrokerRequests
from controller.service.channel import BrokerAddress, ControllerChannelManager, broker_addresses
from protocol.errors import ErrorCode, KafkaError, LocalProtocolError
from protocol.messages import Request, Response
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import (
    BrokerEndpoint,
    FenceBrokerRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
)
from tests.support.waiting import wait_until


class FakeSender:
    """Answers every request unless the address is down; records every attempt."""

    def __init__(self) -> None:
        self.attempts: list[tuple[int, Request]] = []
        self.delivered: dict[int, list[Request]] = defaultdict(list)
        self.down: set[int] = set()
        self.fail_next: dict[int, int] = defaultdict(int)
        self.gate: trio.Event | None = None

    async def send(self, host: str, port: int, request: Request, *, timeout_s: float) -> Response:
        assert timeout_s > 0
        self.attempts.append((port, request))
        if self.gate is not None:
            await self.gate.wait()
        if port in self.down:
            raise KafkaError(ErrorCode.NETWORK_EXCEPTION, f"cannot connect to {host}:{port}")
        if self.fail_next[port] > 0:
            self.fail_next[port] -= 1
            raise OSError("connection reset")
        if getattr(request, "controller_id", 0) == -99:
            raise LocalProtocolError("cannot encode")
        self.delivered[port].append(request)
        return request.RESPONSE()


def lai(n: int, broker_epoch: int = 1) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(
        controller_id=1, controller_epoch=n, broker_epoch=broker_epoch, topic_states=(),
        live_leaders=(),
    )  # fmt: skip


def um(n: int) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        controller_id=1, controller_epoch=n, broker_epoch=1, topic_states=(), live_brokers=()
    )


def addr(broker_id: int, epoch: int = 1, port: int | None = None) -> BrokerAddress:
    return BrokerAddress(broker_id, "127.0.0.1", port or 9000 + broker_id, epoch)


def manager(sender: FakeSender, **kwargs: object) -> ControllerChannelManager:
    return ControllerChannelManager(
        sender,
        retry_backoff_s=0.01,
        max_retry_backoff_s=0.05,
        **kwargs,  # type: ignore[arg-type]
    )


async def test_requests_reach_each_broker_in_queue_order() -> None:
    sender = FakeSender()
    responses: list[tuple[int, str, str]] = []
    channels = manager(
        sender,
        on_response=lambda b, req, resp: responses.append(
            (b, type(req).__name__, type(resp).__name__)
        ),
    )
    channels.add_broker(addr(1))  # before run: started with it
    async with trio.open_nursery() as nursery:
        await nursery.start(channels.run)
        channels.add_broker(addr(2))
        assert channels.send(1, [lai(1), um(2), lai(3)])
        assert channels.send(2, [um(4)])
        channels.send_plan({1: BrokerRequests(1, lai(5), um(6), None), 2: BrokerRequests(2)})
        await channels.wait_idle()
        assert [r.controller_epoch for r in sender.delivered[9001]] == [1, 2, 3, 5, 6]
        assert [r.controller_epoch for r in sender.delivered[9002]] == [4]
        assert (1, "LeaderAndIsrRequest", "LeaderAndIsrResponse") in responses
        assert (2, "UpdateMetadataRequest", "UpdateMetadataResponse") in responses
        assert channels.queued(1) == channels.queued(2) == 0
        nursery.cancel_scope.cancel()
    assert isinstance(LeaderAndIsrResponse(), Response)
    assert isinstance(UpdateMetadataResponse(), Response)


async def test_a_failed_send_is_retried_before_anything_queued_after_it() -> None:
    sender = FakeSender()
    sender.fail_next[9001] = 3
    channels = manager(sender)
    async with trio.open_nursery() as nursery:
        await nursery.start(channels.run)
        channels.add_broker(addr(1))
        channels.send(1, [lai(1), lai(2)])
        await channels.wait_idle()
        assert [r.controller_epoch for _, r in sender.attempts] == [1, 1, 1, 1, 2]
        assert [r.controller_epoch for r in sender.delivered[9001]] == [1, 2]
        nursery.cancel_scope.cancel()


async def test_an_unreachable_broker_does_not_hold_up_the_others() -> None:
    sender = FakeSender()
    sender.down.add(9001)
    channels = manager(sender)
    async with trio.open_nursery() as nursery:
        await nursery.start(channels.run)
        channels.set_brokers([addr(1), addr(2)])
        channels.send(1, [lai(1)])
        channels.send(2, [lai(2)])
        await wait_until(lambda: len(sender.delivered[9002]) == 1)
        await wait_until(lambda: sum(p == 9001 for p, _ in sender.attempts) >= 3)
        assert channels.queued(1) == 1
        # The broker comes up: the retried request gets through.
        sender.down.clear()
        await channels.wait_idle()
        assert [r.controller_epoch for r in sender.delivered[9001]] == [1]
        nursery.cancel_scope.cancel()


async def test_removing_a_broker_stops_its_retries_and_drops_its_queue() -> None:
    sender = FakeSender()
    sender.down.add(9001)
    channels = manager(sender)
    async with trio.open_nursery() as nursery:
        await nursery.start(channels.run)
        channels.add_broker(addr(1))
        channels.send(1, [lai(1), lai(2)])
        await wait_until(lambda: len(sender.attempts) >= 2)
        channels.remove_broker(1)
        assert channels.broker_ids == []
        assert channels.queued(1) == 0
        assert not channels.send(1, [lai(3)])
        attempts = len(sender.attempts)
        sender.down.clear()
        await channels.wait_idle()
        # Its task is gone: a fresh channel to another broker works, broker 1 got nothing.
        channels.add_broker(addr(2))
        channels.send(2, [lai(4)])
        await channels.wait_idle()
        assert len([a for a in sender.attempts[attempts:] if a[0] == 9001]) <= 1
        assert sender.delivered[9001] == []
        nursery.cancel_scope.cancel()


async def test_a_broker_back_with_a_new_epoch_gets_a_fresh_queue() -> None:
    sender = FakeSender()
    sender.gate = trio.Event()
    channels = manager(sender)
    async with trio.open_nursery() as nursery:
        await nursery.start(channels.run)
        channels.add_broker(addr(1, epoch=10))
        channels.send(1, [lai(1, broker_epoch=10), lai(2, broker_epoch=10)])
        await wait_until(lambda: len(sender.attempts) == 1)
        channels.add_broker(addr(1, epoch=10))  # the same registration: nothing changes
        assert channels.queued(1) == 2
        channels.add_broker(addr(1, epoch=20))
        assert channels.address(1) == addr(1, epoch=20)
        assert channels.queued(1) == 0
        channels.send(1, [lai(3, broker_epoch=20)])
        sender.gate.set()
        await channels.wait_idle()
        assert [r.broker_epoch for r in sender.delivered[9001]] == [20]
        nursery.cancel_scope.cancel()


async def test_a_request_that_cannot_be_encoded_is_dropped_not_retried_forever() -> None:
    sender = FakeSender()
    channels = manager(sender)
    bad = LeaderAndIsrRequest(
        controller_id=-99, controller_epoch=1, broker_epoch=1, topic_states=(), live_leaders=()
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(channels.run)
        channels.add_broker(addr(1))
        channels.send(1, [bad, lai(2)])
        await channels.wait_idle()
        assert [r.controller_epoch for r in sender.delivered[9001]] == [2]
        nursery.cancel_scope.cancel()


async def test_the_manager_stops_with_its_nursery_and_cannot_be_reused() -> None:
    sender = FakeSender()
    sender.down.add(9001)
    channels = manager(sender)
    async with trio.open_nursery() as nursery:
        await nursery.start(channels.run)
        channels.add_broker(addr(1))
        channels.send(1, [lai(1)])
        await wait_until(lambda: len(sender.attempts) >= 1)
        nursery.cancel_scope.cancel()
    assert channels.broker_ids == []
    with pytest.raises(RuntimeError, match="stopped"):
        channels.add_broker(addr(2))
    with pytest.raises(RuntimeError, match="only once"):
        await channels.run()


def test_bad_settings_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="request_timeout_s"):
        ControllerChannelManager(FakeSender(), request_timeout_s=0)
    with pytest.raises(ValueError, match="retry_backoff_s"):
        ControllerChannelManager(FakeSender(), retry_backoff_s=2.0, max_retry_backoff_s=1.0)


def test_broker_addresses_take_live_brokers_on_the_inter_broker_listener() -> None:
    delta = MetadataDelta(MetadataImage.empty("c"))
    for broker_id, endpoints, fenced in (
        (
            1,
            (
                BrokerEndpoint(name="EXTERNAL", host="ext", port=19092),
                BrokerEndpoint(name="INTERNAL", host="int1", port=9092),
            ),
            False,
        ),
        (2, (BrokerEndpoint(name="PLAINTEXT", host="plain2", port=9093),), False),
        (3, (BrokerEndpoint(name="INTERNAL", host="int3", port=9094),), True),
        (4, (), False),
    ):
        delta.replay(
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id="AAAAAAAAAAAAAAAAAAAAAg",
                broker_epoch=100 + broker_id,
                endpoints=endpoints,
                fenced=True,
            )
        )
        cls = FenceBrokerRecord if fenced else UnfenceBrokerRecord
        delta.replay(cls(id=broker_id, epoch=100 + broker_id))
    image = delta.apply()
    assert broker_addresses(image, "INTERNAL") == {
        1: BrokerAddress(1, "int1", 9092, 101),
        2: BrokerAddress(2, "plain2", 9093, 102),
    }


async def test_update_brokers_follows_the_image() -> None:
    sender = FakeSender()
    channels = manager(sender, listener="PLAINTEXT")

    def image(*brokers: tuple[int, int]) -> MetadataImage:
        delta = MetadataDelta(MetadataImage.empty("c"))
        for broker_id, epoch in brokers:
            delta.replay(
                RegisterBrokerRecord(
                    broker_id=broker_id,
                    incarnation_id="AAAAAAAAAAAAAAAAAAAAAg",
                    broker_epoch=epoch,
                    endpoints=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9000 + broker_id),),
                    fenced=False,
                )
            )
        return delta.apply()

    async with trio.open_nursery() as nursery:
        await nursery.start(channels.run)
        channels.update_brokers(image((1, 5), (2, 6)))
        assert channels.broker_ids == [1, 2]
        channels.update_brokers(image((2, 6), (3, 7)))
        assert channels.broker_ids == [2, 3]
        assert channels.address(3) == BrokerAddress(3, "h", 9003, 7)
        channels.send(3, [lai(1)])
        await channels.wait_idle()
        assert len(sender.delivered[9003]) == 1
        nursery.cancel_scope.cancel()
