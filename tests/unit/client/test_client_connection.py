from __future__ import annotations

import pytest
import trio
import trio.testing

from client.connection import BrokerConnection, open_stream
from client.errors import KafkaConnectionError, KafkaTimeoutError
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from tests.unit.client.fake_broker import FakeBroker, wait_for


async def connect(broker: FakeBroker, nursery: trio.Nursery, **kwargs: object) -> BrokerConnection:
    stream = await open_stream("127.0.0.1", broker.port, 5000)
    conn = BrokerConnection(stream, address=f"127.0.0.1:{broker.port}", **kwargs)  # type: ignore[arg-type]
    await nursery.start(conn.reader)
    return conn


async def test_pipelined_requests_get_their_own_responses(
    fake_broker: FakeBroker, nursery: trio.Nursery
) -> None:
    fake_broker.create("a", 2)
    fake_broker.create("b", 3)
    conn = await connect(fake_broker, nursery, max_in_flight=5)
    results: dict[str, object] = {}

    async def ask(topic: str) -> None:
        results[topic] = await conn.request(MetadataRequest(topics=(topic,)))

    fake_broker.held = trio.Event()
    async with trio.open_nursery() as inner:
        inner.start_soon(ask, "a")
        inner.start_soon(ask, "b")
        inner.start_soon(ask, "missing")
        await wait_for(lambda: len(fake_broker.requests) >= 3)
        assert conn.in_flight == 3  # all three were sent before any answer came back
        fake_broker.held.set()
    fake_broker.held = None
    a, b, missing = results["a"], results["b"], results["missing"]
    assert isinstance(a, MetadataResponse) and len(a.topics[0].partitions) == 2
    assert isinstance(b, MetadataResponse) and len(b.topics[0].partitions) == 3
    assert isinstance(missing, MetadataResponse) and missing.topics[0].error_code == 3


async def test_in_flight_requests_are_bounded(
    fake_broker: FakeBroker, nursery: trio.Nursery
) -> None:
    conn = await connect(fake_broker, nursery, max_in_flight=2)
    fake_broker.held = trio.Event()
    async with trio.open_nursery() as inner:
        for _ in range(4):
            inner.start_soon(conn.request, ApiVersionsRequest())
        await wait_for(lambda: len(fake_broker.requests) >= 2)
        await trio.testing.wait_all_tasks_blocked()
        assert len(fake_broker.requests) == 2 and not conn.can_send
        fake_broker.held.set()
    assert len(fake_broker.requests) == 4


async def test_request_timeout_fails_the_request_and_closes_the_connection(
    fake_broker: FakeBroker, nursery: trio.Nursery
) -> None:
    conn = await connect(fake_broker, nursery, request_timeout_ms=50)
    fake_broker.held = trio.Event()
    with pytest.raises(KafkaTimeoutError, match=r"request\.timeout\.ms"):
        await conn.request(ApiVersionsRequest())
    assert conn.closed
    with pytest.raises(KafkaConnectionError):
        await conn.request(ApiVersionsRequest())
    fake_broker.held.set()


async def test_a_broker_that_hangs_up_fails_pending_requests(nursery: trio.Nursery) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def hang_up(stream: trio.SocketStream) -> None:
        await stream.receive_some(100)
        await stream.aclose()

    nursery.start_soon(trio.serve_listeners, hang_up, listeners)
    stream = await open_stream("127.0.0.1", port, 5000)
    conn = BrokerConnection(stream, address=f"127.0.0.1:{port}")
    await nursery.start(conn.reader)
    with pytest.raises(KafkaConnectionError, match="closed the connection"):
        await conn.request(ApiVersionsRequest())


async def test_unreachable_broker_error_names_the_address() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()  # nothing listens there now
    with pytest.raises(KafkaConnectionError, match=f"cannot connect to broker 127.0.0.1:{port}"):
        await open_stream("127.0.0.1", port, 5000)


async def test_api_versions_round_trip(fake_broker: FakeBroker, nursery: trio.Nursery) -> None:
    conn = await connect(fake_broker, nursery)
    response = await conn.request(ApiVersionsRequest(client_software_name="trioka"))
    assert isinstance(response, ApiVersionsResponse)
    await conn.aclose()


async def test_a_request_cancelled_by_its_caller_leaves_the_connection_usable(
    fake_broker: FakeBroker, nursery: trio.Nursery
) -> None:
    """A caller's own deadline (a cancel scope around `request`) must not put the stream out of
    step: the abandoned request's late answer is dropped and the next request gets its own."""
    fake_broker.create("a", 2)
    conn = await connect(fake_broker, nursery)
    fake_broker.held = trio.Event()
    with trio.move_on_after(0.05) as scope:
        await conn.request(ApiVersionsRequest())
    assert scope.cancelled_caught and not conn.closed
    fake_broker.held.set()
    fake_broker.held = None
    answer = await conn.request(MetadataRequest(topics=("a",)))
    assert isinstance(answer, MetadataResponse) and len(answer.topics[0].partitions) == 2
    assert not conn.closed
