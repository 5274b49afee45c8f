"""A fake broker for controller tests: a trio server on loopback that records what it receives.

    broker = FakeBroker(broker_id=2)
    await nursery.start(broker.serve)          # listens on 127.0.0.1:<free port> (broker.port)
    broker.requests(LeaderAndIsrRequest)       # what arrived, in order
    broker.stop() / await nursery.start(broker.serve)   # down, then up again on the same port

It answers every request with its response type's defaults (no error) unless `respond` says
otherwise; `silent = True` makes it read requests without answering them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import trio

from protocol.codec import RequestEnvelope, decode_request, encode_response
from protocol.framing import NEED_DATA, FrameDecoder
from protocol.messages import Request, Response
from protocol.metadata.records import BrokerEndpoint

R = TypeVar("R", bound=Request)

Responder = Callable[[RequestEnvelope], Response | None]


class FakeBroker:
    def __init__(self, broker_id: int, *, respond: Responder | None = None) -> None:
        self.broker_id = broker_id
        self.port = 0
        self.respond = respond
        self.silent = False
        self.received: list[RequestEnvelope] = []
        self.connections = 0
        self._scope: trio.CancelScope | None = None

    @property
    def endpoint(self) -> BrokerEndpoint:
        return BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=self.port)

    def requests(self, cls: type[R]) -> list[R]:
        return [e.body for e in self.received if isinstance(e.body, cls)]  # type: ignore[misc]

    def client_ids(self) -> set[str | None]:
        return {e.client_id for e in self.received}

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            self._scope = scope
            listeners = await trio.open_tcp_listeners(self.port, host="127.0.0.1")
            self.port = listeners[0].socket.getsockname()[1]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.serve_listeners, self._handle, listeners)
                task_status.started(self.port)

    def stop(self) -> None:
        """Close the listener and every connection (as a killed broker would)."""
        if self._scope is not None:
            self._scope.cancel()

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        decoder = FrameDecoder(1 << 24)
        async with stream:
            while True:
                try:
                    data = await stream.receive_some(1 << 16)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not data:
                    return
                decoder.feed(data)
                while (frame := decoder.next_frame()) is not NEED_DATA:
                    envelope = decode_request(frame)  # type: ignore[arg-type]
                    self.received.append(envelope)
                    if self.silent:
                        continue
                    response: Any = self.respond(envelope) if self.respond else None
                    if response is None:
                        response = type(envelope.body).RESPONSE()
                    try:
                        await stream.send_all(encode_response(envelope.correlation_id, response))
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return
