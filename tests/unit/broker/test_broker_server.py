"""broker.server in-process: pipelining order, limits, bad input, idle reaping, drain."""

from __future__ import annotations

import struct

import msgpack
import trio
import trio.testing
from structlog.testing import capture_logs

from broker.config import Listener
from broker.metrics import awaiting_remote
from broker.server import (
    BAD_INPUT_LOGS_PER_S,
    MAX_LOGGED_TEXT,
    BrokerServer,
    ConnectionInfo,
    LogBudget,
    ServerLimits,
    _Connection,
)
from protocol.codec import RequestEnvelope, api_versions_response
from protocol.errors import ErrorCode
from protocol.messages import Response
from protocol.messages.api_versions import ApiVersionsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.topics import DeleteTopicsRequest, DeleteTopicsResponse
from tests.support.waiting import wait_until
from tests.support.wire import WireClient


class SlowFirst:
    """Answers Metadata; DeleteTopics waits until released, so later requests finish first."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.active = 0
        self.max_active = 0
        self.fail = False

    async def handle(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if isinstance(request.body, DeleteTopicsRequest):
                await self.release.wait()
                return DeleteTopicsResponse()
            if isinstance(request.body, MetadataRequest):
                if self.fail:
                    raise RuntimeError("boom")
                return MetadataResponse(cluster_id=f"c{request.correlation_id}")
            return api_versions_response()
        finally:
            self.active -= 1


async def start(nursery: trio.Nursery, handler: SlowFirst, **limits: int) -> BrokerServer:
    server = BrokerServer(handler, [Listener("PLAINTEXT", "127.0.0.1", 0)], ServerLimits(**limits))
    await nursery.start(server.serve)
    return server


async def test_pipelined_responses_come_back_in_request_order() -> None:
    handler = SlowFirst()
    async with trio.open_nursery() as nursery:
        server = await start(nursery, handler)
        async with await WireClient.connect("127.0.0.1", server.bound[0].port) as c:
            first = await c.send(DeleteTopicsRequest(topic_names=()))
            second = await c.send(MetadataRequest())
            third = await c.send(MetadataRequest())
            # Let the later two finish while the first is still waiting.
            await trio.testing.wait_all_tasks_blocked(0.05)
            assert handler.active == 1
            handler.release.set()
            assert (await c.receive(DeleteTopicsResponse))[0] == first
            assert (await c.receive(MetadataResponse))[0] == second
            assert (await c.receive(MetadataResponse))[0] == third
        nursery.cancel_scope.cancel()


async def test_in_flight_limit_per_connection() -> None:
    handler = SlowFirst()
    async with trio.open_nursery() as nursery:
        server = await start(nursery, handler, max_inflight_per_connection=2)
        async with await WireClient.connect("127.0.0.1", server.bound[0].port) as c:
            for _ in range(5):
                await c.send(DeleteTopicsRequest(topic_names=()))
            # Everything that can run is parked: the reader waits for a window slot.
            await trio.testing.wait_all_tasks_blocked(0.05)
            assert handler.max_active == 2
            handler.release.set()
            for _ in range(5):
                await c.receive(DeleteTopicsResponse)
        nursery.cancel_scope.cancel()


async def test_oversized_frame_refused_from_prefix_other_connections_fine() -> None:
    handler = SlowFirst()
    async with trio.open_nursery() as nursery:
        server = await start(nursery, handler, max_request_bytes=1000)
        port = server.bound[0].port
        async with await WireClient.connect("127.0.0.1", port) as other:
            async with await WireClient.connect("127.0.0.1", port) as c:
                await c.send_raw(struct.pack(">i", 1001))  # the body never comes
                assert await c.wait_closed(5)
            resp = await other.request(MetadataRequest())
            assert resp.error_code == 0
        nursery.cancel_scope.cancel()


async def test_bad_body_gets_invalid_request_naming_the_field() -> None:
    handler = SlowFirst()
    async with trio.open_nursery() as nursery:
        server = await start(nursery, handler)
        async with await WireClient.connect("127.0.0.1", server.bound[0].port) as c:
            payload = msgpack.packb([3, 0, 77, "t", ["not-a-list"]])
            await c.send_raw(struct.pack(">i", len(payload)) + payload)
            corr, resp = await c.receive(MetadataResponse)
            assert corr == 77
            assert resp.error_code == ErrorCode.INVALID_REQUEST
            assert "topics" in (resp.error_message or "")
            # Unknown API key: UNSUPPORTED_VERSION with what is supported.
            payload = msgpack.packb([9999, 0, 78, "t", []])
            await c.send_raw(struct.pack(">i", len(payload)) + payload)
            corr, av = await c.receive(ApiVersionsResponse)
            assert (corr, av.error_code) == (78, ErrorCode.UNSUPPORTED_VERSION)
            # Known API, unsupported version.
            payload = msgpack.packb([3, 99, 79, "t", []])
            await c.send_raw(struct.pack(">i", len(payload)) + payload)
            corr, md = await c.receive(MetadataResponse)
            assert (corr, md.error_code) == (79, ErrorCode.UNSUPPORTED_VERSION)
            # A handler bug: UNKNOWN_SERVER_ERROR, connection stays usable.
            handler.fail = True
            resp = await c.request(MetadataRequest())
            assert resp.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
            handler.fail = False
            assert (await c.request(MetadataRequest())).error_code == 0
            # Unparsable payload: connection closed.
            await c.send_raw(struct.pack(">i", 3) + b"\xc1\xc1\xc1")
            assert await c.wait_closed(5)
        nursery.cancel_scope.cancel()


async def test_idle_connections_are_reaped() -> None:
    handler = SlowFirst()
    async with trio.open_nursery() as nursery:
        server = await start(nursery, handler, connections_max_idle_ms=100)
        async with await WireClient.connect("127.0.0.1", server.bound[0].port) as c:
            assert (await c.request(MetadataRequest())).error_code == 0
            assert await c.wait_closed(10)
        nursery.cancel_scope.cancel()


async def test_drain_answers_in_flight_then_closes() -> None:
    handler = SlowFirst()
    async with trio.open_nursery() as nursery:
        server = await start(nursery, handler)
        async with await WireClient.connect("127.0.0.1", server.bound[0].port) as c:
            corr = await c.send(DeleteTopicsRequest(topic_names=()))
            await trio.testing.wait_all_tasks_blocked(0.05)
            assert handler.active == 1
            nursery.start_soon(server.drain)
            handler.release.set()
            assert (await c.receive(DeleteTopicsResponse))[0] == corr
            assert await c.wait_closed(5)


async def test_drain_ends_when_a_connection_registers_after_it_began() -> None:
    """A connection accepted just before drain() stopped accepting can register after drain()
    began waiting (a follower's fetcher reconnecting during a shutdown): it reads nothing, and
    drain() still ends when the last connection closes, not at its timeout."""
    handler = SlowFirst()
    async with trio.open_nursery() as nursery:
        server = await start(nursery, handler)
        async with await WireClient.connect("127.0.0.1", server.bound[0].port) as c:
            await c.send(DeleteTopicsRequest(topic_names=()))
            await trio.testing.wait_all_tasks_blocked(0.05)
            drained = trio.Event()

            async def drain() -> None:
                await server.drain(timeout_s=60)
                drained.set()

            nursery.start_soon(drain)
            await trio.testing.wait_all_tasks_blocked(0.05)
            # The late connection: a TCP stream handed to the server as its accept loop would.
            side = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
            port = side.socket.getsockname()[1]
            client = await trio.open_tcp_stream("127.0.0.1", port)
            accepted = await side.accept()
            nursery.start_soon(server._serve_connection, server.listeners[0], accepted)
            await trio.testing.wait_all_tasks_blocked(0.05)
            handler.release.set()
            with trio.fail_after(5):
                await drained.wait()
            assert server.connection_count == 0
            await client.aclose()
            await side.aclose()


async def test_several_listening_sockets_serve_and_stop_accepting_together() -> None:
    # Two listeners here; an empty host (all interfaces) likewise opens an IPv4 and an IPv6
    # socket. Each socket has its own accept loop, and stop_accepting() ends them all.
    server = BrokerServer(
        SlowFirst(),
        [Listener("PLAINTEXT", "127.0.0.1", 0), Listener("INTERNAL", "127.0.0.1", 0)],
        ServerLimits(),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        for bound in server.bound:
            async with await WireClient.connect("127.0.0.1", bound.port) as c:
                await c.send(MetadataRequest())
                assert (await c.receive(MetadataResponse))[1].error_code == 0
        with trio.fail_after(5):
            await server.drain()


class LongPolls:
    """DeleteTopics parks (awaiting_remote(), as a long-poll Fetch does) until released or
    cancelled; Metadata answers at once."""

    def __init__(self) -> None:
        self.release = trio.Event()
        self.parked = 0
        self.cancelled = 0

    async def handle(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        if isinstance(request.body, DeleteTopicsRequest):
            awaiting_remote()
            self.parked += 1
            try:
                await self.release.wait()
            except trio.Cancelled:
                self.cancelled += 1
                raise
            finally:
                self.parked -= 1
            return DeleteTopicsResponse()
        return MetadataResponse(cluster_id="c")


async def test_parked_requests_do_not_fill_the_broker_wide_queue() -> None:
    """An independent probe: 500 long-poll Fetches (max_wait_ms 60000) filled
    queued.max.requests and the broker answered nobody until they expired, even after the
    client had gone. A parked request now gives its broker-wide token back (Kafka's request
    queue holds only requests waiting for a handler), and a closed peer's parked requests are
    cancelled."""
    handler = LongPolls()
    async with trio.open_nursery() as nursery:
        server = await start(nursery, handler, queued_max_requests=4, max_inflight_per_connection=3)
        port = server.bound[0].port
        pollers = [await WireClient.connect("127.0.0.1", port) for _ in range(3)]
        for poller in pollers:
            for _ in range(3):
                await poller.send(DeleteTopicsRequest(topic_names=()))
        await wait_until(lambda: handler.parked == 9, within=10)
        async with await WireClient.connect("127.0.0.1", port) as other:
            with trio.fail_after(10):
                await other.request(MetadataRequest())
        for poller in pollers:
            await poller.aclose()
        await wait_until(lambda: handler.parked == 0, within=10)
        assert handler.cancelled == 9
        # Every token back, none twice (the semaphores' max_value would raise).
        await wait_until(lambda: server.connection_count == 0, within=10)
        assert server.queue.value == 4
        nursery.cancel_scope.cancel()


def test_the_bad_input_log_budget_counts_what_it_does_not_log() -> None:
    now = [0.0]
    budget = LogBudget(3, lambda: now[0])
    assert [budget.take() for _ in range(5)] == [0, 0, 0, None, None]
    now[0] = 0.5  # 1.5 tokens back
    assert budget.take() == 2  # the two suppressed ride on the next one logged
    assert budget.take() is None
    now[0] = 10.0
    assert [budget.take() for _ in range(4)] == [1, 0, 0, None]
    assert budget.suppressed_total == 4


async def test_a_flood_of_bad_requests_is_logged_within_the_budget() -> None:
    """An independent probe: every bad frame was logged in full, and garbage filled the log
    topics. 300 refused requests on one connection: the budget's worth are logged, texts
    cut short, the rest counted."""
    handler = SlowFirst()
    with capture_logs() as logs:
        async with trio.open_nursery() as nursery:
            server = await start(nursery, handler)
            async with await WireClient.connect("127.0.0.1", server.bound[0].port) as c:
                for corr in range(300):
                    payload = msgpack.packb([3, 0, corr, "t", ["x" * 5000]])
                    await c.send_raw(struct.pack(">i", len(payload)) + payload)
                    await c.receive(MetadataResponse)
            nursery.cancel_scope.cancel()
    refused = [e for e in logs if e["event"] == "refused request"]
    assert len(refused) <= BAD_INPUT_LOGS_PER_S + 5, len(refused)
    assert all(len(e["reason"]) <= MAX_LOGGED_TEXT + 3 for e in refused)
    assert server.bad_input_logs.suppressed_total >= 300 - len(refused) - 5


class NeverClosing(trio.abc.Stream):
    """A peer at EOF whose close never completes (a TLS close_notify it does not read)."""

    def __init__(self) -> None:
        self.forced = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return b""

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        pass

    async def wait_send_all_might_not_block(self) -> None:
        pass

    async def aclose(self) -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.forced = True
            raise


async def test_a_close_that_never_completes_does_not_hold_the_connection() -> None:
    server = BrokerServer(SlowFirst(), [Listener("PLAINTEXT", "127.0.0.1", 0)])
    stream = NeverClosing()
    connection = _Connection(server, stream, ConnectionInfo("127.0.0.1:9", "PLAINTEXT"))
    with trio.fail_after(5):
        await connection.run()
    assert stream.forced
