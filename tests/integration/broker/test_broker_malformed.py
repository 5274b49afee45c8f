"""A real broker process facing bad input: it answers or closes that connection, never dies."""

from __future__ import annotations

import struct
from pathlib import Path

import msgpack
import trio

from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.record_batch import (
    CONTROL_FLAG,
    Record,
    build_batch,
    decode_records,
    encode_batch_bytes,
)
from tests.integration.broker.broker_wire import create_topic, fetch, fetch_request, produce
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


async def test_poison_batches_with_valid_crcs_are_refused_and_nothing_is_stored(
    broker: BrokerProcess,
) -> None:
    """An independent probe of 200d5c1 appended these (a valid CRC around garbage records, a
    false record count, the control flag, a claimed 2^31-1 records) and made the partition
    unconsumable or rolled a segment per request. Each is now refused with Kafka's code and
    the partition holds only what was valid."""

    def forged(payload: bytes, count: int, last_delta: int, attributes: int = 0) -> bytes:
        return encode_batch_bytes(
            payload, attributes=attributes, last_offset_delta=last_delta,
            base_timestamp=0, max_timestamp=0, records_count=count,
        )  # fmt: skip

    one = msgpack.packb([[0, 0, 0, b"k", b"v", []]])
    poison = [
        (forged(b"\xc1\xc1\xc1", 1, 0), ErrorCode.CORRUPT_MESSAGE),
        (forged(one, 5, 4), ErrorCode.CORRUPT_MESSAGE),
        (forged(one, 1, 0, CONTROL_FLAG), ErrorCode.INVALID_RECORD),
        (forged(one, 2**31 - 1, 2**31 - 2), ErrorCode.CORRUPT_MESSAGE),
    ]
    async with await WireClient.connect(broker.host, broker.port) as c:
        await create_topic(c, "poison")
        for records, code in poison:
            for _ in range(3):
                answer = await produce(c, "poison", 0, records)
                assert answer.error_code == code, answer
        good = build_batch([Record(value=b"fine", key=b"k")])
        assert (await produce(c, "poison", 0, good)).error_code == 0
        fetched = await fetch(c, "poison", 0, 0)
        assert fetched.error_code == 0 and fetched.high_watermark == 1
        assert [r.value for r in decode_records(fetched.records)] == [b"fine"]
    segments = list((Path(broker.log_dirs[0]) / "poison-0").glob("*.log"))
    assert len(segments) == 1
    assert broker.running


async def test_long_polls_do_not_starve_other_clients(broker_factory) -> None:
    """An independent probe of 200d5c1: 500 long-poll Fetches (max_wait_ms 60000) filled
    queued.max.requests and the broker answered nobody until they expired. Here 4x the queue
    of long polls are parked; another client is answered at once, and the pollers' requests
    go away with their connections."""
    broker: BrokerProcess = broker_factory({"queued.max.requests": 20})
    async with await WireClient.connect(broker.host, broker.port) as c:
        await create_topic(c, "quiet")
    pollers = [await WireClient.connect(broker.host, broker.port) for _ in range(16)]
    try:
        for poller in pollers:
            for _ in range(5):
                await poller.send(fetch_request("quiet", 0, 0, max_wait_ms=60_000, min_bytes=1))
        async with await WireClient.connect(broker.host, broker.port) as c:
            with trio.fail_after(10):
                answer = await produce(c, "quiet", 0, build_batch([Record(value=b"x")]))
            assert answer.error_code == 0
    finally:
        for poller in pollers:
            await poller.aclose()
    assert broker.running
