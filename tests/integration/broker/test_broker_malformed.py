"""A real broker process facing bad input: it answers or closes that connection, never dies."""

from __future__ import annotations

import struct

import msgpack
import trio

from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from tests.support.broker_process import BrokerProcess
from tests.support.wire import WireClient


def frame(obj: object) -> bytes:
    payload = msgpack.packb(obj)
    return struct.pack(">i", len(payload)) + payload


async def test_oversized_frame_refused_before_body_and_others_unaffected(broker_factory) -> None:
    broker: BrokerProcess = broker_factory({"socket.request.max.bytes": 4096})
    async with await WireClient.connect(broker.host, broker.port) as other:
        async with await WireClient.connect(broker.host, broker.port) as c:
            # Only the prefix: the broker must refuse without waiting for 1 GB of body.
            await c.send_raw(struct.pack(">i", 1 << 30))
            assert await c.wait_closed(10)
        assert (await other.request(ApiVersionsRequest())).error_code == 0
    warning = broker.wait_for_event("request too large, closing connection")
    assert warning["size"] == 1 << 30 and warning["peer"].startswith("127.0.0.1:")
    assert broker.running


async def test_garbage_closes_only_that_connection(broker: BrokerProcess) -> None:
    for junk in (b"\x00\x00\x00\x03\xc1\xc1\xc1", b"\xff\xff\xff\xff", frame("hello"), frame([])):
        async with await WireClient.connect(broker.host, broker.port) as c:
            await c.send_raw(junk)
            assert await c.wait_closed(10), junk
    async with await WireClient.connect(broker.host, broker.port) as c:
        assert (await c.request(ApiVersionsRequest())).error_code == 0
    assert broker.running


async def test_readable_header_bad_body_and_unknown_api(broker: BrokerProcess) -> None:
    async with await WireClient.connect(broker.host, broker.port) as c:
        await c.send_raw(frame([3, 0, 41, "t", [17]]))
        corr, md = await c.receive(MetadataResponse)
        assert corr == 41 and md.error_code == ErrorCode.INVALID_REQUEST
        assert "topics" in md.error_message
        await c.send_raw(frame([12345, 0, 42, "t", []]))
        corr, av = await c.receive(ApiVersionsResponse)
        assert corr == 42 and av.error_code == ErrorCode.UNSUPPORTED_VERSION
        await c.send_raw(frame([3, 7, 43, "t", []]))
        corr, md = await c.receive(MetadataResponse)
        assert corr == 43 and md.error_code == ErrorCode.UNSUPPORTED_VERSION
        # The connection is still good.
        assert (await c.request(ApiVersionsRequest())).error_code == 0


async def test_pipelined_requests_answered_in_order(broker_factory) -> None:
    broker: BrokerProcess = broker_factory({"queued.max.requests.per.connection": 3})
    async with await WireClient.connect(broker.host, broker.port) as c:
        sent = []
        for i in range(60):
            body = ApiVersionsRequest() if i % 2 else MetadataRequest(topics=())
            sent.append((await c.send(body), type(body).RESPONSE))
        for corr, cls in sent:
            got, _ = await c.receive(cls)
            assert got == corr


async def test_idle_connection_reaped(broker_factory) -> None:
    broker: BrokerProcess = broker_factory({"connections.max.idle.ms": 300})
    async with await WireClient.connect(broker.host, broker.port) as c:
        assert (await c.request(ApiVersionsRequest())).error_code == 0
        with trio.fail_after(20):
            assert await c.wait_closed(20)
    broker.wait_for_event("closing idle connection")
