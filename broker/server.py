"""The broker's TCP front end (Kafka's SocketServer + RequestChannel, on trio).

Per connection: a reader task splits the byte stream into frames (protocol.framing, so a length
prefix above `socket.request.max.bytes` is refused before any of the body is buffered), starts
one handler task per request and queues a response slot; a writer task sends the slots' bytes
strictly in request order. Requests of one connection therefore run concurrently (up to
`queued.max.requests.per.connection`) while responses stay ordered, as Kafka clients expect.

Backpressure: a request holds one token of the connection's window and one of the broker-wide
`queued.max.requests` until its response is written; with no token free the reader stops
reading, and TCP pushes back on the client. A request parked in a purgatory (a long-poll
Fetch, an acks=all Produce, a forwarded admin request: `awaiting_remote()`) gives its
broker-wide token back, as Kafka's request queue holds only requests waiting for a handler:
500 long polls of one client filled it and the broker answered nobody. When the peer closes,
its parked requests are cancelled (nobody reads their answers) and the rest finish.

Security per listener: an SSL or SASL_SSL listener's connection first completes its TLS
handshake (broker.tls); a SASL_PLAINTEXT or SASL_SSL listener's then runs the SASL exchange
(broker.sasl), one request at a time, before any other request is read: the principal it proves
is on every request's ConnectionInfo.

Bad input never takes the process down: a peer that speaks another protocol (a Kafka client,
HTTP, TLS on a plaintext port; protocol.foreign tells from its first bytes) gets one warning
saying what it speaks, the answer it understands and a closed connection; an oversized or
unparsable frame closes that connection with a warning naming the peer; a request whose header
is readable but whose body is not gets INVALID_REQUEST naming the field; an unknown API key or
version gets UNSUPPORTED_VERSION; a bug in a handler gets UNKNOWN_SERVER_ERROR and a logged
traceback. Connections with no traffic and nothing in flight for `connections.max.idle.ms` are
closed.

Every decoded request is timed and counted (Kafka's RequestMetrics, broker.metrics.requests):
received when its frame is complete, dequeued when its handler starts, parked when the handler
calls `awaiting_remote()`, its response ready, sent; recorded by the writer after the send.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import ssl
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
import trio

from broker.config import Listener
from broker.metrics.requests import (
    RequestMetrics,
    RequestTiming,
    default_request_metrics,
    error_counts,
    metric_names,
    request_name,
    start_handling,
)
from broker.metrics.socket_server import SocketServerMetrics, default_socket_server_metrics
from broker.sasl import SaslAuthenticator, SaslProtocolError, SaslSettings
from broker.tls import principal_of
from protocol.codec import (
    RequestDecodeError,
    RequestEnvelope,
    api_versions_response,
    decode_request,
    encode_error_response,
    encode_response,
)
from protocol.errors import ErrorCode, FrameTooLargeError, RemoteProtocolError
from protocol.foreign import (
    KAFKA_API_VERSIONS_KEY,
    SNIFF_BYTES,
    TRIOKA_PROTOCOL,
    ForeignProtocol,
    Verdict,
    kafka_api_versions_refusal,
    kafka_request_header,
    sniff,
)
from protocol.framing import NEED_DATA, FrameDecoder
from protocol.messages import ApiKey, Response, error_response
from protocol.messages.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

log = structlog.get_logger("broker.server")

RECEIVE_SIZE = 256 * 1024
BAD_INPUT_LOGS_PER_S = 20
"""Log events about bad input (refused, unreadable, oversized frames) a second, broker-wide."""
CLOSE_TIMEOUT_S = 1.0
"""How long closing a connection may take (a TLS close_notify to a peer that does not read)."""
TLS_HANDSHAKE_TIMEOUT_S = 10.0
"""A TLS listener's connection that has not finished its handshake by then is closed."""
SASL_AUTHENTICATION_TIMEOUT_S = 10.0
"""A SASL listener's connection that has not authenticated by then is closed."""
MAX_LOGGED_TEXT = 300
"""Characters of an error text logged: a bad request's text may quote what the client sent."""
FOREIGN_LINGER_S = 2.0
"""How long a connection that speaks another protocol is kept for its answers (a Kafka
client asks ApiVersions again at version 0; an HTTP client reads the 400 before we close)."""
MAX_KAFKA_ANSWERS = 3
"""ApiVersions requests of a Kafka client answered UNSUPPORTED_VERSION on one connection."""


class LogBudget:
    """At most `per_second` events a second (a token bucket of that size); the ones over it are
    counted, and the count rides on the next event logged as `suppressed`. Every bad frame was
    logged in full, so one client's garbage filled the log topics."""

    def __init__(self, per_second: int, clock: Callable[[], float]) -> None:
        self.per_second = per_second
        self.clock = clock
        self._tokens = float(per_second)
        self._at: float | None = None
        self.suppressed = 0
        self.suppressed_total = 0

    def take(self) -> int | None:
        """None: do not log (counted); else log, with this many suppressed since the last."""
        now = self.clock()
        elapsed = 0.0 if self._at is None else now - self._at
        self._tokens = min(self.per_second, self._tokens + elapsed * self.per_second)
        self._at = now
        if self._tokens < 1:
            self.suppressed += 1
            self.suppressed_total += 1
            return None
        self._tokens -= 1
        count, self.suppressed = self.suppressed, 0
        return count


def _short(text: str) -> str:
    return text if len(text) <= MAX_LOGGED_TEXT else text[:MAX_LOGGED_TEXT] + "..."


@dataclass(frozen=True, slots=True)
class ConnectionInfo:
    """What a handler may know about the connection a request came in on."""

    peer: str
    """`host:port` of the client."""
    listener: str
    """Name of the listener (PLAINTEXT, ...), to answer with the matching advertised address."""
    connection_id: int = 0
    """Unique per server and connection (what `on_connection_closed` is told about)."""
    security_protocol: str = "PLAINTEXT"
    """PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL: how the listener the request came in on is
    secured."""
    principal: str = "User:ANONYMOUS"
    """Who the peer proved to be (SASL: `User:` and the user name; SSL: `User:` and its
    certificate's DN; Kafka's default principal builder), User:ANONYMOUS when it proved
    nothing."""


class RequestHandler(Protocol):
    """What the server calls for each decoded request (broker.handlers.router.ApiRouter)."""

    async def handle(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        """The response body, or None when no response is sent (Produce with acks=0)."""
        ...


@dataclass(frozen=True, slots=True)
class ServerLimits:
    max_request_bytes: int = 104857600
    """socket.request.max.bytes"""
    queued_max_requests: int = 500
    """queued.max.requests: unanswered requests over all connections."""
    max_inflight_per_connection: int = 5
    """queued.max.requests.per.connection: unanswered requests on one connection."""
    connections_max_idle_ms: int = 600000
    """connections.max.idle.ms"""
    sasl_max_receive_bytes: int = 524288
    """sasl.server.max.receive.size: the largest frame before SASL authentication (Kafka's
    answer to CVE-2022-34917: 100 MB frames from anyone were read whole)."""


@dataclass(frozen=True, slots=True)
class BoundListener:
    """A listener actually listening: the port is the real one when 0 was configured."""

    name: str
    host: str
    port: int


@dataclass(slots=True, eq=False)
class _Slot:
    """One request's place in the connection's response order."""

    done: trio.Event = field(default_factory=trio.Event)
    data: bytes | None = None
    close_after: bool = False
    released: bool = False
    queued: bool = True
    """Holds a token of the broker-wide queue (given back when the request parks)."""
    parked: bool = False
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    """The handler's: cancelled when it is parked and the peer is gone."""
    timing: RequestTiming | None = None
    """Set once the request decoded: its RequestMetrics milestones."""
    names: tuple[str, ...] = ()
    """The RequestMetrics `request` labels it is recorded under."""


class _Connection:
    def __init__(
        self,
        server: BrokerServer,
        stream: trio.abc.Stream,
        info: ConnectionInfo,
        authenticator: SaslAuthenticator | None = None,
    ) -> None:
        self.server = server
        self.stream = stream
        self.info = info
        self.authenticator = authenticator
        """A SASL listener's: runs before any other request is read."""
        self.decoder = FrameDecoder(server.limits.max_request_bytes)
        window = server.limits.max_inflight_per_connection
        self.window = trio.Semaphore(window, max_value=window)
        self.pending: deque[_Slot] = deque()
        self.last_activity = trio.current_time()
        self.read_scope = trio.CancelScope()
        self.scope = trio.CancelScope()
        self.idle_closed = False
        self.peer_gone = False
        self.head: bytes | None = b""
        """The connection's first bytes while they do not yet tell whether it speaks trioka's
        protocol (protocol.foreign); None once they did."""

    def release(self, slot: _Slot) -> None:
        if not slot.released:
            slot.released = True
            self.window.release()
            if slot.queued:
                slot.queued = False
                self.server.queue.release()

    def park(self, slot: _Slot) -> None:
        """The request waits for something remote: its broker-wide token goes back, and if
        the peer is gone already nothing will read its answer."""
        slot.parked = True
        if slot.queued and not slot.released:
            slot.queued = False
            self.server.queue.release()
        if self.peer_gone:
            slot.scope.cancel()

    def _bad_input(self, method: Callable[..., Any], event: str, **fields: Any) -> None:
        """Log bad input from the peer within the broker-wide budget."""
        suppressed = self.server.bad_input_logs.take()
        if suppressed is None:
            return
        if suppressed:
            fields["suppressed"] = suppressed
        method(event, peer=self.info.peer, **fields)

    def _peer_closed(self) -> None:
        self.peer_gone = True
        for slot in self.pending:
            if slot.parked:
                slot.scope.cancel()

    async def run(self) -> None:
        send, recv = trio.open_memory_channel[_Slot](math.inf)
        try:
            with self.scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._write, recv)
                    nursery.start_soon(self._reap_idle)
                    async with send:
                        with self.read_scope:
                            await self.server.requests_enabled.wait()
                            if await self._authenticated():
                                await self._read(send, nursery)
                    # Reader done (peer EOF, fatal frame or drain): the writer finishes what
                    # is queued, then the whole connection ends.
        finally:
            for slot in self.pending:
                self.release(slot)
            self.pending.clear()
            with trio.CancelScope(shield=True):
                # A TLS close sends close_notify: a peer that stops reading must not hold the
                # connection (and a drain) forever.
                with trio.move_on_after(CLOSE_TIMEOUT_S) as closing:
                    await self.stream.aclose()
                if closing.cancelled_caught:
                    await trio.aclose_forcefully(self.stream)

    async def _read(self, send: trio.MemorySendChannel[_Slot], nursery: trio.Nursery) -> None:
        while True:
            frame = await self._next_frame()
            if frame is None:
                return
            received = time.perf_counter()
            await self.window.acquire()
            await self.server.queue.acquire()
            slot = _Slot()
            self.pending.append(slot)
            await send.send(slot)
            nursery.start_soon(self._serve, frame, slot, received)

    async def _next_frame(self) -> bytes | None:
        """The next complete frame; None when the connection is to end (peer closed, an
        oversized or unreadable frame: logged, the connection cancelled)."""
        decoder = self.decoder
        while True:
            try:
                frame = decoder.next_frame()
            except FrameTooLargeError as exc:
                self._bad_input(
                    log.warning,
                    "request too large, closing connection",
                    size=exc.size,
                    limit=exc.limit,
                    config="socket.request.max.bytes",
                )
                self.scope.cancel()
                return None
            except RemoteProtocolError as exc:
                self._bad_input(
                    log.warning, "unreadable frame, closing connection", error=_short(str(exc))
                )
                self.scope.cancel()
                return None
            if frame is not NEED_DATA:
                self.head = None
                return frame  # type: ignore[return-value]
            try:
                data = await self.stream.receive_some(RECEIVE_SIZE)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.scope.cancel()
                return None
            if not data:
                if decoder.buffered:
                    self._bad_input(
                        log.info, "peer closed in the middle of a frame", buffered=decoder.buffered
                    )
                self._peer_closed()
                return None
            self.last_activity = trio.current_time()
            if self.head is not None:
                foreign = self._sniff(data)
                if foreign is not None:
                    await self._refuse_foreign(foreign, data)
                    return None
            decoder.feed(data)

    def _sniff(self, data: bytes) -> ForeignProtocol | None:
        """Add `data` to the connection's first bytes; what they speak when it is not trioka's
        protocol (None: trioka's, or not known yet)."""
        assert self.head is not None
        self.head += data[: SNIFF_BYTES - len(self.head)]
        verdict = sniff(self.head, self.decoder.max_frame_bytes)
        if isinstance(verdict, ForeignProtocol):
            return verdict
        if verdict is Verdict.NATIVE:
            self.head = None
        return None

    async def _refuse_foreign(self, foreign: ForeignProtocol, data: bytes) -> None:
        """A peer speaking another protocol (Kafka's, HTTP, TLS): one warning within the
        bad-input budget, the answer it can understand (protocol.foreign), then the connection
        ends. A Kafka client's ApiVersions retries on it are answered the same way."""
        self._bad_input(
            log.warning,
            f"peer speaks another protocol; this port speaks {TRIOKA_PROTOCOL}",
            speaks=foreign.description,
            listener=self.info.listener,
            security_protocol=self.info.security_protocol,
        )
        self.head = None
        try:
            with trio.move_on_after(FOREIGN_LINGER_S):
                if foreign.protocol == "kafka":
                    self.decoder.feed(data)
                    await self._answer_kafka()
                elif (answer := foreign.answer()) is not None and await self._send_raw(answer):
                    await self._linger()
        finally:
            self.scope.cancel()

    async def _answer_kafka(self) -> None:
        for _ in range(MAX_KAFKA_ANSWERS):
            frame = await self._next_frame()
            header = None if frame is None else kafka_request_header(frame)
            if header is None or header[0] != KAFKA_API_VERSIONS_KEY:
                return
            if not await self._send_raw(kafka_api_versions_refusal(header[2])):
                return

    async def _send_raw(self, data: bytes) -> bool:
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False
        return True

    async def _linger(self) -> None:
        """After an answer to a peer that still has bytes on the way: our end of the stream
        closed, read until the peer closes its own, so that closing with unread bytes does
        not reset the connection before the peer read the answer."""
        stream = self.stream
        try:
            if isinstance(stream, trio.abc.HalfCloseableStream):
                await stream.send_eof()
            while await stream.receive_some(RECEIVE_SIZE):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    async def _authenticated(self) -> bool:
        """A SASL listener's exchange, one request at a time, within
        SASL_AUTHENTICATION_TIMEOUT_S: True once the peer proved who it is (its principal is
        then on `info`), False when the connection must end. Nothing else is read before."""
        auth = self.authenticator
        if auth is None:
            return True
        limits = self.server.limits
        self.decoder.max_frame_bytes = min(limits.sasl_max_receive_bytes, limits.max_request_bytes)
        with trio.move_on_after(SASL_AUTHENTICATION_TIMEOUT_S):
            while not auth.complete:
                frame = await self._next_frame()
                if frame is None:
                    return False
                answer = await self._sasl_answer(auth, frame)
                if answer is not None:
                    try:
                        await self.stream.send_all(answer)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return False
                if answer is None or auth.closing:
                    self.scope.cancel()
                    return False
            assert auth.principal is not None
            self.info = dataclasses.replace(self.info, principal=auth.principal)
            self.decoder.max_frame_bytes = limits.max_request_bytes
            return True
        self._bad_input(log.info, "no SASL authentication in time, closing connection",
                        timeout_s=SASL_AUTHENTICATION_TIMEOUT_S)  # fmt: skip
        self.scope.cancel()
        return False

    async def _sasl_answer(self, auth: SaslAuthenticator, frame: bytes) -> bytes | None:
        """The answer to one request of the exchange; None: close without one (a request
        that is unreadable or not allowed before authentication, as Kafka does)."""
        try:
            request = decode_request(frame)
            auth.check_allowed(request.api_key)
        except RequestDecodeError as exc:
            if exc.api_key is ApiKey.API_VERSIONS and exc.correlation_id is not None:
                return encode_error_response(exc)  # KIP-511: the client downgrades and asks again
            self._bad_input(log.warning, "refused before SASL authentication, closing connection",
                            error=_short(str(exc)))  # fmt: skip
            return None
        except SaslProtocolError as exc:
            self._bad_input(log.warning, "refused before SASL authentication, closing connection",
                            error=_short(str(exc)))  # fmt: skip
            return None
        body = request.body
        response: Response | None
        if isinstance(body, SaslHandshakeRequest):
            response = auth.handshake(body)
        elif isinstance(body, SaslAuthenticateRequest):
            response = auth.authenticate(body)
        else:
            response = await self.server.handler.handle(request, self.info)
        if auth.closing:
            self._bad_input(log.info, "SASL authentication failed, closing connection",
                            listener=self.info.listener,
                            error=_short(str(response.error_message)))  # fmt: skip
        self.server.metrics.record_errors(request_name(request.api_key), error_counts(response))
        return None if response is None else encode_response(request.correlation_id, response)

    async def _serve(self, payload: bytes, slot: _Slot, received: float) -> None:
        try:
            with slot.scope:
                slot.data = await self._respond(payload, slot, received)
        finally:
            if slot.timing is not None:
                slot.timing.response_done = time.perf_counter()
            slot.done.set()

    async def _respond(self, payload: bytes, slot: _Slot, received: float) -> bytes | None:
        try:
            request = decode_request(payload)
        except RequestDecodeError as exc:
            return self._refuse(exc, slot)
        # This task serves this request only (trio gave it a copy of the reader's context):
        # whatever it logs says which request it was, and nothing leaks into the next one.
        # Long-lived tasks it starts drop it (protocol.log_context.detached).
        structlog.contextvars.bind_contextvars(
            correlation_id=request.correlation_id,
            client_id=request.client_id,
            api=request.api_key.name.title().replace("_", ""),  # Kafka's: ApiVersions
        )
        slot.timing = RequestTiming(received, on_park=lambda: self.park(slot))
        slot.names = metric_names(request.api_key, request.body)
        start_handling(slot.timing)
        try:
            response = await self.server.handler.handle(request, self.info)
            if response is None:
                return None
            self.server.metrics.record_errors(slot.names[0], error_counts(response))
            return encode_response(request.correlation_id, response)
        except Exception as exc:  # a bug in a handler must not take the connection down
            log.exception(
                "request failed",
                peer=self.info.peer,
                api=request.api_key.name,
                correlation_id=request.correlation_id,
            )
            failed = error_response(
                type(request.body),
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"internal error serving {request.api_key.name}: {type(exc).__name__}: {exc}",
            )
            self.server.metrics.record_errors(slot.names[0], error_counts(failed))
            return encode_response(request.correlation_id, failed)

    def _refuse(self, exc: RequestDecodeError, slot: _Slot) -> bytes | None:
        if exc.correlation_id is None or (
            exc.api_key is None and exc.code != ErrorCode.UNSUPPORTED_VERSION
        ):
            self._bad_input(
                log.warning, "unparsable request, closing connection", error=_short(str(exc))
            )
            slot.close_after = True
            return None
        self._bad_input(
            log.info,
            "refused request",
            correlation_id=exc.correlation_id,
            error=exc.code.name,
            reason=_short(str(exc)),
        )
        if exc.api_key is not None:
            self.server.metrics.record_errors(
                request_name(exc.api_key), collections.Counter({int(exc.code): 1})
            )
        frame = encode_error_response(exc)
        if frame is None:
            # An API key this broker does not serve: answer the way Kafka answers an
            # unsupported ApiVersions, with the error and what is supported.
            frame = encode_response(exc.correlation_id, api_versions_response(exc.code, str(exc)))
        return frame

    async def _write(self, recv: trio.MemoryReceiveChannel[_Slot]) -> None:
        async with recv:
            async for slot in recv:
                await slot.done.wait()
                timing = slot.timing
                if timing is not None:
                    timing.send_start = time.perf_counter()
                try:
                    if slot.data is not None:
                        await self.stream.send_all(slot.data)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.scope.cancel()
                    return
                if timing is not None:
                    timing.sent = time.perf_counter()
                    self.server.metrics.record(slot.names, timing)
                self.pending.popleft()
                self.release(slot)
                self.last_activity = trio.current_time()
                if slot.close_after:
                    self.scope.cancel()
                    return
        # Every queued answer is out and the reader is done: end the connection (and the reaper).
        self.scope.cancel()

    async def _reap_idle(self) -> None:
        idle = self.server.limits.connections_max_idle_ms / 1000
        while True:
            deadline = self.last_activity + idle
            now = trio.current_time()
            if now >= deadline:
                if not self.pending:
                    self.idle_closed = True
                    log.info(
                        "closing idle connection",
                        peer=self.info.peer,
                        idle_ms=self.server.limits.connections_max_idle_ms,
                    )
                    self.scope.cancel()
                    return
                # A request in flight (a long poll) is activity: look again later.
                self.last_activity = now
                continue
            await trio.sleep_until(deadline)


class BrokerServer:
    """Listens on the broker's listeners and serves connections until shut down."""

    def __init__(
        self,
        handler: RequestHandler,
        listeners: Sequence[Listener],
        limits: ServerLimits = ServerLimits(),
        metrics: RequestMetrics | None = None,
        on_connection_closed: Callable[[ConnectionInfo], None] | None = None,
        tls: Mapping[str, ssl.SSLContext] | None = None,
        sasl: Mapping[str, SaslSettings] | None = None,
        hold_requests: bool = False,
        socket_metrics: SocketServerMetrics | None = None,
    ) -> None:
        self.handler = handler
        self.requests_enabled = trio.Event()
        """Kafka's enableRequestProcessing: with `hold_requests`, connections are accepted but
        nothing they send is read (nor their TLS or SASL exchange begun) until
        `enable_requests()`, which the node calls once its metadata (ACLs, SCRAM users) has
        caught up; so a restarted broker never authorizes from what it knew before."""
        if not hold_requests:
            self.requests_enabled.set()
        self.tls = dict(tls or {})
        """Listener name -> the SSLContext its connections are wrapped in (broker.tls)."""
        self.sasl = dict(sasl or {})
        """Listener name -> how its connections authenticate (SASL_PLAINTEXT, SASL_SSL)."""
        self.on_connection_closed = on_connection_closed
        """Told of every connection that ended, whoever closed it (the controller's fast
        fencing watches the connections its brokers' heartbeats came on)."""
        self._connection_ids = itertools.count(1)
        self.metrics = metrics if metrics is not None else default_request_metrics()
        """RequestMetrics of every request served (the process-wide ones by default)."""
        self.listeners = tuple(listeners)
        self.socket_metrics = (
            socket_metrics if socket_metrics is not None else default_socket_server_metrics()
        )
        """Connections open per listener (the process-wide ones by default)."""
        for listener in self.listeners:
            self.socket_metrics.listening(listener.name)
        self.limits = limits
        # max_value: a token given back twice is a bug, not extra room.
        self.queue = trio.Semaphore(
            limits.queued_max_requests, max_value=limits.queued_max_requests
        )
        self.bad_input_logs = LogBudget(BAD_INPUT_LOGS_PER_S, trio.current_time)
        self.bound: list[BoundListener] = []
        self._connections: set[_Connection] = set()
        self._accept_scope = trio.CancelScope()
        self._all_closed = trio.Event()
        self._all_closed.set()
        self._draining = False

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def enable_requests(self) -> None:
        self.requests_enabled.set()

    async def serve(self, *, task_status: trio.TaskStatus[list[BoundListener]]) -> None:
        """Open every listener, report them as started, and accept until `stop_accepting()`.

        Returns once accepting stopped and every connection has closed.
        """
        sockets: list[tuple[Listener, trio.SocketListener]] = []
        try:
            for listener in self.listeners:
                host = listener.host or None
                try:
                    opened = await trio.open_tcp_listeners(listener.port, host=host)
                except OSError as exc:
                    raise OSError(
                        exc.errno,
                        f"listener {listener.name} cannot bind {listener.host or '0.0.0.0'}:"
                        f"{listener.port}: {exc.strerror or exc}",
                    ) from exc
                port = opened[0].socket.getsockname()[1]
                self.bound.append(BoundListener(listener.name, listener.host, port))
                sockets.extend((listener, s) for s in opened)
                log.info(
                    "broker listening",
                    listener=listener.name,
                    host=listener.host or "0.0.0.0",
                    port=port,
                )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._accept_all, sockets, nursery)
                task_status.started(list(self.bound))
        finally:
            for _, sock in sockets:
                with trio.CancelScope(shield=True):
                    await sock.aclose()

    async def _accept_all(
        self, sockets: list[tuple[Listener, trio.SocketListener]], connections: trio.Nursery
    ) -> None:
        """One accept loop per socket (a listener on all interfaces has an IPv4 and an IPv6
        one), all ended together by stop_accepting(); connections live in their own nursery."""
        with self._accept_scope:
            async with trio.open_nursery() as accepting:
                for listener, sock in sockets:
                    accepting.start_soon(self._accept_loop, listener, sock, connections)

    async def _accept_loop(
        self, listener: Listener, sock: trio.SocketListener, connections: trio.Nursery
    ) -> None:
        while True:
            try:
                stream = await sock.accept()
            except OSError as exc:  # EMFILE and friends: log, back off, keep serving
                log.warning("accept failed", listener=listener.name, error=str(exc))
                await trio.sleep(0.1)
                continue
            connections.start_soon(self._serve_connection, listener, stream)

    async def _serve_connection(self, listener: Listener, stream: trio.SocketStream) -> None:
        """Serve one accepted connection, counted open until it ends, however it ends."""
        self.socket_metrics.opened(listener.name)
        try:
            await self._serve_accepted(listener, stream)
        finally:
            self.socket_metrics.closed(listener.name)

    async def _serve_accepted(self, listener: Listener, stream: trio.SocketStream) -> None:
        try:
            peer = stream.socket.getpeername()
            peer_text = f"{peer[0]}:{peer[1]}"
        except OSError:
            peer_text = "unknown"
        info = ConnectionInfo(peer_text, listener.name, next(self._connection_ids))
        served: trio.abc.Stream = stream
        context = self.tls.get(listener.name)
        if context is not None:
            secured = await self._handshake(stream, context, info)
            if secured is None:
                return
            served, info = secured
        settings = self.sasl.get(listener.name)
        if settings is not None:
            protocol = "SASL_SSL" if context is not None else "SASL_PLAINTEXT"
            info = dataclasses.replace(info, security_protocol=protocol)
        authenticator = None if settings is None else settings.authenticator()
        conn = _Connection(self, served, info, authenticator)
        if self._draining:
            # Accepted just before drain() stopped accepting, and scheduled after it cancelled
            # the readers: read nothing (a peer's reconnecting fetcher otherwise held the
            # drain for its whole timeout).
            conn.read_scope.cancel()
        self._connections.add(conn)
        if self._all_closed.is_set():
            # A new event only when the count leaves zero: drain() may be waiting on the
            # current one (replacing it on every connection left drain() waiting on an event
            # nobody would set, for its whole timeout).
            self._all_closed = trio.Event()
        try:
            await conn.run()
        except Exception:
            log.exception("connection failed", peer=peer_text)
        finally:
            self._connections.discard(conn)
            if not self._connections:
                self._all_closed.set()
            if self.on_connection_closed is not None:
                self.on_connection_closed(info)

    async def _handshake(
        self, stream: trio.SocketStream, context: ssl.SSLContext, info: ConnectionInfo
    ) -> tuple[trio.SSLStream[trio.SocketStream], ConnectionInfo] | None:
        """The TLS handshake of an SSL listener's connection, within TLS_HANDSHAKE_TIMEOUT_S;
        None (logged within the bad-input budget, connection closed) when it fails."""
        secured = trio.SSLStream(stream, context, server_side=True)
        reason = None
        with trio.move_on_after(TLS_HANDSHAKE_TIMEOUT_S) as scope:
            try:
                await secured.do_handshake()
            except trio.BrokenResourceError as exc:
                cause = exc.__cause__
                reason = str(cause or exc) or type(cause or exc).__name__
        if scope.cancelled_caught:
            reason = f"no TLS handshake within {TLS_HANDSHAKE_TIMEOUT_S:g} s"
        if reason is not None:
            suppressed = self.bad_input_logs.take()
            if suppressed is not None:
                extra = {"suppressed": suppressed} if suppressed else {}
                log.info("TLS handshake failed", peer=info.peer, listener=info.listener,
                         reason=_short(reason), **extra)  # fmt: skip
            await trio.aclose_forcefully(stream)
            return None
        principal = principal_of(secured.getpeercert())
        return secured, dataclasses.replace(info, security_protocol="SSL", principal=principal)

    def stop_accepting(self) -> None:
        self._accept_scope.cancel()

    async def drain(self, timeout_s: float = 30.0) -> None:
        """Stop accepting, stop reading new requests, send the answers of those in flight, then
        close every connection (forcibly after `timeout_s`)."""
        self._draining = True
        self.stop_accepting()
        for conn in list(self._connections):
            conn.read_scope.cancel()
        with trio.move_on_after(timeout_s):
            await self._all_closed.wait()
        for conn in list(self._connections):
            conn.scope.cancel()
