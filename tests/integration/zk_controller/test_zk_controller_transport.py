"""PooledTransport against fake brokers on loopback: pooling, reconnects, clear errors."""

from __future__ import annotations

import socket

import pytest
import trio

from client.errors import KafkaConnectionError, KafkaTimeoutError
from deploy.node.transport import PooledTransport, TransportClosedError
from protocol.codec import RequestEnvelope
from protocol.errors import ErrorCode
from protocol.messages import Response
from protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from protocol.messages.update_metadata import UpdateMetadataRequest
from tests.integration.zk_controller.fake_broker import FakeBroker
from tests.support.waiting import wait_until


def lai(n: int) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(
        controller_id=1, controller_epoch=n, broker_epoch=1, topic_states=(), live_leaders=()
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_concurrent_sends_share_one_pipelined_connection() -> None:
    def respond(envelope: RequestEnvelope) -> Response | None:
        body = envelope.body
        if isinstance(body, LeaderAndIsrRequest):
            return LeaderAndIsrResponse(
                error_code=0, error_message=f"epoch {body.controller_epoch}"
            )
        return None

    broker = FakeBroker(1, respond=respond)
    results: dict[int, str | None] = {}
    async with trio.open_nursery() as nursery, PooledTransport.open(client_id="ctl") as transport:
        await nursery.start(broker.serve)

        async def one(n: int) -> None:
            response = await transport.send("127.0.0.1", broker.port, lai(n), timeout_s=5)
            assert isinstance(response, LeaderAndIsrResponse)
            results[n] = response.error_message

        async with trio.open_nursery() as senders:
            for n in range(20):
                senders.start_soon(one, n)
        assert results == {n: f"epoch {n}" for n in range(20)}
        assert broker.connections == 1
        assert broker.client_ids() == {"ctl"}
        assert transport.addresses == [("127.0.0.1", broker.port)]
        update = UpdateMetadataRequest(
            controller_id=1, controller_epoch=1, broker_epoch=1, topic_states=(), live_brokers=()
        )
        assert (await transport.send("127.0.0.1", broker.port, update, timeout_s=5)).error_code == 0
        nursery.cancel_scope.cancel()


async def test_unreachable_then_up_and_a_restarted_broker_is_reconnected() -> None:
    port = free_port()
    broker = FakeBroker(1)
    broker.port = port
    async with trio.open_nursery() as nursery, PooledTransport.open() as transport:
        with pytest.raises(KafkaConnectionError, match=f"127.0.0.1:{port}") as info:
            await transport.send("127.0.0.1", port, lai(1), timeout_s=5)
        assert info.value.code is ErrorCode.NETWORK_EXCEPTION
        await nursery.start(broker.serve)
        assert (await transport.send("127.0.0.1", port, lai(2), timeout_s=5)).error_code == 0
        # The broker goes away (its connections close) and comes back on the same port.
        broker.stop()
        await wait_until(lambda: transport.addresses == [])
        await nursery.start(broker.serve)
        assert (await transport.send("127.0.0.1", port, lai(3), timeout_s=5)).error_code == 0
        assert broker.connections == 2
        assert [r.controller_epoch for r in broker.requests(LeaderAndIsrRequest)] == [2, 3]
        nursery.cancel_scope.cancel()


async def test_no_answer_is_a_timeout_naming_the_address_and_the_next_send_reconnects() -> None:
    broker = FakeBroker(1)
    async with trio.open_nursery() as nursery, PooledTransport.open() as transport:
        await nursery.start(broker.serve)
        broker.silent = True
        with pytest.raises(KafkaTimeoutError, match=f"127.0.0.1:{broker.port}") as info:
            await transport.send("127.0.0.1", broker.port, lai(1), timeout_s=0.3)
        assert info.value.code is ErrorCode.REQUEST_TIMED_OUT
        assert transport.addresses == []
        broker.silent = False
        assert (await transport.send("127.0.0.1", broker.port, lai(2), timeout_s=5)).error_code == 0
        assert broker.connections == 2
        nursery.cancel_scope.cancel()


async def test_a_transport_not_running_or_closed_says_so() -> None:
    transport = PooledTransport()
    with pytest.raises(TransportClosedError, match="not running"):
        await transport.send("127.0.0.1", free_port(), lai(1), timeout_s=1)
    with pytest.raises(ValueError, match="timeout_s"):
        await transport.send("127.0.0.1", 1, lai(1), timeout_s=0)
    async with PooledTransport.open() as opened:
        pass
    with pytest.raises(TransportClosedError, match="closed"):
        await opened.send("127.0.0.1", free_port(), lai(1), timeout_s=1)
    with pytest.raises(ValueError, match="max_in_flight"):
        PooledTransport(max_in_flight=0)
