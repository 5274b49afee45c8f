"""One trio TCP connection to a broker: pipelined requests matched by correlation id.

Up to max.in.flight.requests.per.connection requests may be unanswered at once; the broker
answers in order, but responses are matched by correlation id anyway. A request that gets no
answer within request.timeout.ms fails with KafkaTimeoutError and, as in Kafka, the connection
is closed (a late answer would otherwise be taken for the next one's). A caller cancelled from
outside (its own deadline) leaves its request behind as abandoned: its answer is read and dropped.
"""

from __future__ import annotations

import itertools
import math
import os
import ssl
from contextlib import suppress
from typing import Any, TypeVar

import structlog
import trio

from client.errors import KafkaConnectionError, KafkaTimeoutError
from protocol.codec import decode_response_body, decode_response_header, encode_request
from protocol.errors import ProtocolError
from protocol.framing import DEFAULT_MAX_FRAME_BYTES, NEED_DATA, FrameDecoder
from protocol.messages import Request, Response
from protocol.schema import InvalidMessageError

R = TypeVar("R", bound=Response)
log = structlog.get_logger("client.connection")

_RECEIVE_BYTES = 1 << 18


class _Pending:
    __slots__ = ("abandoned", "error", "event", "response", "response_type")

    def __init__(self, response_type: type[Response]) -> None:
        self.response_type = response_type
        self.abandoned = False
        self.event = trio.Event()
        self.response: Any = None
        self.error: BaseException | None = None


async def open_stream(
    host: str, port: int, timeout_ms: float, tls: ssl.SSLContext | None = None
) -> trio.abc.Stream:
    """Connect (and with `tls`, finish the TLS handshake, checking the broker's certificate
    for `host`), or raise KafkaConnectionError saying which address failed and why."""
    try:
        with trio.fail_after(timeout_ms / 1000):
            stream = await trio.open_tcp_stream(host, port)
            if tls is not None:
                return await _handshake(stream, tls, host, port)
    except trio.TooSlowError:
        raise KafkaConnectionError(
            f"cannot connect to broker {host}:{port}: no answer within {timeout_ms:.0f} ms "
            "(socket.connection.setup.timeout.ms)"
        ) from None
    except OSError as exc:
        # trio wraps the per-address failures; the first one says why (refused, unreachable).
        cause: BaseException = exc
        if isinstance(exc.__cause__, BaseExceptionGroup) and exc.__cause__.exceptions:
            cause = exc.__cause__.exceptions[0]
        errno = getattr(cause, "errno", None)
        if isinstance(errno, int) and errno > 0:
            reason = os.strerror(errno)
        else:
            reason = getattr(cause, "strerror", None) or str(cause)
        raise KafkaConnectionError(f"cannot connect to broker {host}:{port}: {reason}") from None
    return stream


async def _handshake(
    stream: trio.SocketStream, tls: ssl.SSLContext, host: str, port: int
) -> trio.SSLStream[trio.SocketStream]:
    secured = trio.SSLStream(stream, tls, server_hostname=host)
    try:
        await secured.do_handshake()
    except BaseException as exc:
        await trio.aclose_forcefully(stream)  # a timeout or a cancel too: no socket left open
        if not isinstance(exc, trio.BrokenResourceError):
            raise
        cause = exc.__cause__ or exc
        verify = getattr(cause, "verify_message", None)
        reason = (
            f"certificate verify failed: {verify}"
            if verify
            else getattr(cause, "reason", None) or str(cause) or type(cause).__name__
        )
        raise KafkaConnectionError(
            f"TLS handshake with broker {host}:{port} failed: {reason}"
        ) from None
    return secured


class BrokerConnection:
    """A connection to one broker. Run `reader()` in a nursery; then call `request()`."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        *,
        address: str,
        node_id: int = -1,
        client_id: str | None = None,
        max_in_flight: int = 5,
        request_timeout_ms: float = 30000,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.address = address
        self.node_id = node_id
        self.client_id = client_id or None
        self.request_timeout_ms = request_timeout_ms
        self.max_in_flight = max_in_flight
        self._stream = stream
        self._decoder = FrameDecoder(max_frame_bytes)
        self._slots = trio.Semaphore(max_in_flight)
        self._send_lock = trio.Lock()
        self._pending: dict[int, _Pending] = {}
        self._correlation = itertools.count(1)
        self._closed: BaseException | None = None
        self.closed_by_peer = False
        """The broker ended the connection (EOF or reset), not this side."""

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def in_flight(self) -> int:
        return self.max_in_flight - self._slots.value

    @property
    def can_send(self) -> bool:
        return self._closed is None and self._slots.value > 0

    async def request(self, body: Request, *, timeout_ms: float | None = None) -> Any:
        """Send `body` and wait for its response (whose error codes the caller inspects)."""
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        async with self._slots:
            self._check_open()
            corr = next(self._correlation) & 0x7FFFFFFF
            pending = _Pending(type(body).RESPONSE)
            self._pending[corr] = pending
            sent = False
            try:
                await self._send(encode_request(corr, self.client_id, body))
                sent = True
                with trio.move_on_after(timeout / 1000 if timeout >= 0 else math.inf):
                    await pending.event.wait()
            finally:
                await self._forget(corr, pending, sent=sent)
            if not pending.event.is_set():
                name = type(body).__name__
                self._fail(KafkaTimeoutError(
                    f"{name} to broker {self.address} got no response within {timeout:.0f} ms "
                    "(request.timeout.ms); connection closed"
                ))  # fmt: skip
                await self.aclose()
                raise self._closed  # type: ignore[misc]
            if pending.error is not None:
                raise pending.error
            return pending.response

    async def _forget(self, corr: int, pending: _Pending, *, sent: bool) -> None:
        """The caller stops waiting for `corr`: answered, timed out, or cancelled from outside."""
        if pending.event.is_set() or self._closed is not None:
            self._pending.pop(corr, None)
        elif not sent:
            # Cancelled in the middle of send_all: part of a frame may be on the wire, so the
            # stream is out of step for the broker; only closing it is safe.
            self._fail(KafkaConnectionError(
                f"connection to broker {self.address} closed: a request was cancelled while "
                "being sent"
            ))  # fmt: skip
            with trio.CancelScope(shield=True):
                await self._stream.aclose()
        else:
            # Cancelled by the caller while the broker still owes the answer: the entry stays
            # (marked abandoned) so the reader drops that answer when it comes, instead of taking
            # it for out of step and failing every other request on the connection.
            pending.abandoned = True

    async def send_only(self, body: Request) -> None:
        """Send a request that gets no response (Produce with acks=0)."""
        async with self._slots:
            self._check_open()
            corr = next(self._correlation) & 0x7FFFFFFF
            await self._send(encode_request(corr, self.client_id, body))

    def _check_open(self) -> None:
        if self._closed is not None:
            raise (
                self._closed
                if isinstance(self._closed, KafkaConnectionError)
                else KafkaConnectionError(f"connection to broker {self.address} is closed")
            )

    async def _send(self, frame: bytes) -> None:
        try:
            async with self._send_lock:
                await self._stream.send_all(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            error = KafkaConnectionError(f"connection to broker {self.address} broke: {exc}")
            self._fail(error)
            raise error from None

    async def reader(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Receive responses until the connection closes; wakes whoever waits on each one."""
        task_status.started()
        try:
            while self._closed is None:
                data = await self._stream.receive_some(_RECEIVE_BYTES)
                if not data:
                    self.closed_by_peer = self._closed is None
                    self._fail(KafkaConnectionError(f"broker {self.address} closed the connection"))
                    break
                self._decoder.feed(data)
                while True:
                    frame = self._decoder.next_frame()
                    if frame is NEED_DATA:
                        break
                    self._dispatch(frame)  # type: ignore[arg-type]
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self.closed_by_peer = self._closed is None and not isinstance(
                exc, trio.ClosedResourceError
            )
            self._fail(KafkaConnectionError(f"connection to broker {self.address} broke: {exc}"))
        except ProtocolError as exc:
            log.warning("bad response from broker", broker=self.address, error=str(exc))
            self._fail(KafkaConnectionError(f"broker {self.address} sent a bad response: {exc}"))
        finally:
            await self._close_stream()

    def _dispatch(self, frame: bytes) -> None:
        corr, raw = decode_response_header(frame)
        pending = self._pending.pop(corr, None)
        if pending is None:
            # A response to a request that timed out is impossible (we close on timeout), so
            # an unknown id means the stream is out of step with us.
            raise InvalidMessageError(f"response for unknown correlation id {corr}")
        if pending.abandoned:
            return
        try:
            pending.response = decode_response_body(pending.response_type, raw)
        except InvalidMessageError as exc:
            pending.error = KafkaConnectionError(
                f"broker {self.address} sent an invalid {pending.response_type.__name__}: {exc}"
            )
        pending.event.set()

    def _fail(self, error: BaseException) -> None:
        if self._closed is None:
            self._closed = error
        for pending in self._pending.values():
            if not pending.event.is_set():
                pending.error = error
                pending.event.set()
        self._pending.clear()

    async def aclose(self) -> None:
        self._fail(KafkaConnectionError(f"connection to broker {self.address} is closed"))
        await self._close_stream()

    async def _close_stream(self) -> None:
        # The reader and aclose() may close a TLS stream at the same time (the broker hung up
        # after refusing a SASL login): its close_notify then finds the socket closed.
        with trio.CancelScope(shield=True), suppress(trio.ClosedResourceError,
                                                     trio.BrokenResourceError):  # fmt: skip
            await self._stream.aclose()
