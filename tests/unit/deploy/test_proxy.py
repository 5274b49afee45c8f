"""FaultProxy over loopback sockets against a tiny in-test server that answers each request
frame with `[correlation_id, body]`: relaying, delay, drop-then-close, hold, sever, blackhole."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import msgpack
import pytest
import trio

from deploy.cluster.proxy import FaultProxy, ProxySet
from deploy.cluster.proxy_policy import Delay, ProxyPolicy
from protocol.framing import NEED_DATA, FrameDecoder, encode_frame
from protocol.messages import ApiKey


async def answer(stream: trio.SocketStream) -> None:
    decoder = FrameDecoder()
    async with stream:
        while data := await stream.receive_some(65536):
            decoder.feed(data)
            for frame in decoder.frames():
                corr = msgpack.unpackb(frame)[2]
                await stream.send_all(encode_frame(msgpack.packb([corr, "ok"])))


@pytest.fixture
async def proxy(nursery: trio.Nursery) -> AsyncIterator[FaultProxy]:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    nursery.start_soon(trio.serve_listeners, answer, listeners)
    p = FaultProxy(("127.0.0.1", 0), ("127.0.0.1", port), rng=random.Random(5))
    await nursery.start(p.serve)
    yield p


class Client:
    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder()

    async def call(self, api: ApiKey, corr: int) -> object:
        await self.stream.send_all(encode_frame(msgpack.packb([int(api), 0, corr, "t", []])))
        return await self.read()

    async def read(self) -> object:
        while (frame := self.decoder.next_frame()) is NEED_DATA:
            self.decoder.feed(await self.stream.receive_some(65536))
        return msgpack.unpackb(frame)  # type: ignore[arg-type]


async def connect(p: FaultProxy) -> Client:
    assert p.address is not None
    return Client(await trio.open_tcp_stream(*p.address))


async def test_frames_are_relayed_both_ways_and_counted(proxy: FaultProxy) -> None:
    client = await connect(proxy)
    for corr in range(3):
        assert await client.call(ApiKey.FETCH, corr) == [corr, "ok"]
    assert proxy.counters.connections == 1
    assert proxy.counters.frames_forwarded == 6
    assert proxy.counters.requests_by_api[int(ApiKey.FETCH)] == 3


async def test_a_delay_is_a_lower_bound_on_the_round_trip(proxy: FaultProxy) -> None:
    proxy.policy = ProxyPolicy(requests=Delay(100), responses=Delay(100))
    client = await connect(proxy)
    start = trio.current_time()
    assert await client.call(ApiKey.PRODUCE, 1) == [1, "ok"]
    assert trio.current_time() - start >= 0.2
    assert proxy.counters.frames_delayed == 2


async def test_a_dropped_response_closes_the_connection(proxy: FaultProxy) -> None:
    proxy.policy = ProxyPolicy(drop_responses=frozenset({int(ApiKey.PRODUCE)}),
                               drop_probability=1.0)  # fmt: skip
    client = await connect(proxy)
    assert await client.call(ApiKey.METADATA, 1) == [1, "ok"]
    await client.stream.send_all(encode_frame(msgpack.packb([0, 0, 2, "t", []])))
    with trio.fail_after(5):
        assert await client.stream.receive_some(65536) == b""
    assert proxy.counters.responses_dropped == 1


async def test_hold_keeps_the_connection_open_and_silent(proxy: FaultProxy) -> None:
    proxy.policy = ProxyPolicy(drop_responses=frozenset({0}), drop_probability=1.0,
                               after_drop="hold")  # fmt: skip
    client = await connect(proxy)
    await client.stream.send_all(encode_frame(msgpack.packb([0, 0, 2, "t", []])))
    with trio.move_on_after(0.5) as waited:
        await client.stream.receive_some(65536)
    assert waited.cancelled_caught
    assert proxy.open_connections == 1


async def test_sever_closes_every_open_connection(proxy: FaultProxy) -> None:
    clients = [await connect(proxy) for _ in range(3)]
    for i, c in enumerate(clients):
        await c.call(ApiKey.FETCH, i)
    assert proxy.sever() == 3
    for c in clients:
        with trio.fail_after(5):
            assert await c.stream.receive_some(65536) == b""
    assert proxy.counters.connections_severed == 3
    again = await connect(proxy)
    assert await again.call(ApiKey.FETCH, 9) == [9, "ok"]


async def test_blackhole_accepts_but_answers_nothing(proxy: FaultProxy) -> None:
    proxy.policy = ProxyPolicy(blackhole=True)
    client = await connect(proxy)
    await client.stream.send_all(encode_frame(msgpack.packb([1, 0, 1, "t", []])))
    with trio.move_on_after(0.5) as waited:
        await client.stream.receive_some(65536)
    assert waited.cancelled_caught


async def test_proxy_set_advertises_each_proxy(nursery: trio.Nursery) -> None:
    proxies = ProxySet({1: ("127.0.0.1", 1), 2: ("127.0.0.1", 2)}, rng=random.Random(1))
    with pytest.raises(RuntimeError, match="not started"):
        proxies.advertised_overrides()
    bound = await proxies.start(nursery)
    overrides = proxies.advertised_overrides()
    assert overrides[2] == {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{bound[2][1]}"}
    assert bound[1] != bound[2]
