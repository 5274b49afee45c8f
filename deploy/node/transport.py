"""PooledTransport: one pipelined connection per broker address, for broker-to-broker requests.

It is the one implementation of the send port the broker (`broker.ports.Transport`) and the
controller (`controller.ports.BrokerSender`) declare:

    async def send(host, port, request, *, timeout_s) -> Response

built on `client.connection` (pipelined requests matched by correlation id). The first send to
an address connects; later sends share that connection, many in flight at once. A connection
that broke, or whose request timed out (the client then closes it: a late answer could be taken
for the next one's), is dropped from the pool and the next send connects again. Failures are
KafkaErrors that name the address: KafkaConnectionError (NETWORK_EXCEPTION) when the broker
cannot be reached or the connection broke, KafkaTimeoutError (REQUEST_TIMED_OUT) when no answer
came within `timeout_s`. The request is not retried here: the caller knows whether it may be
sent again (the controller's channels retry; forwarded admin requests go back to the client).

    async with PooledTransport.open(client_id="trioka-controller") as transport:
        response = await transport.send("10.0.0.2", 9092, request, timeout_s=30)

or `await nursery.start(transport.run)` in a nursery that outlives the sends.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import structlog
import trio

from client.connection import BrokerConnection, open_stream
from client.errors import KafkaConnectionError, KafkaTimeoutError
from client.security import PLAINTEXT, ClientSecurity
from protocol.errors import KafkaError
from protocol.framing import DEFAULT_MAX_FRAME_BYTES
from protocol.log_context import detached
from protocol.messages import Request, Response

log = structlog.get_logger("deploy.node.transport")

DEFAULT_MAX_IN_FLIGHT = 100
"""Requests in flight per connection: brokers answer in order, so more only queue there."""


class TransportClosedError(KafkaConnectionError):
    """The transport was used before `run` started or after it stopped."""


class PooledTransport:
    """Connections by (host, port), shared by every caller. Run `run` in a nursery (it hosts
    the connections' reader tasks) or use `PooledTransport.open(...)`."""

    def __init__(
        self,
        *,
        client_id: str | None = "trioka-broker",
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        connect_timeout_s: float = 10.0,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        on_peer_closed: Callable[[str, int], None] | None = None,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        if max_in_flight <= 0:
            raise ValueError(f"max_in_flight must be positive, got {max_in_flight}")
        if connect_timeout_s <= 0:
            raise ValueError(f"connect_timeout_s must be positive, got {connect_timeout_s}")
        self.client_id = client_id
        self.security = security
        """TLS and SASL of the listener this transport dials (the inter-broker or controller
        listener: deploy.node.security)."""
        self.on_peer_closed = on_peer_closed
        """Told (host, port) when a broker ends a pooled connection (EOF or reset): a ZK-mode
        controller's fast fencing hears of a dead broker from its channel's connection."""
        self._max_in_flight = max_in_flight
        self._connect_timeout_s = connect_timeout_s
        self._max_frame_bytes = max_frame_bytes
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._connecting: dict[tuple[str, int], trio.Lock] = {}
        self._nursery: trio.Nursery | None = None
        self._closed = False

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, **kwargs: Any) -> AsyncIterator[PooledTransport]:
        """`async with PooledTransport.open(...) as transport:`; every connection is closed on
        exit."""
        transport = cls(**kwargs)
        async with trio.open_nursery() as nursery:
            await nursery.start(transport.run)
            try:
                yield transport
            finally:
                nursery.cancel_scope.cancel()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Host the connections until cancelled; then close them all."""
        if self._nursery is not None or self._closed:
            raise RuntimeError("PooledTransport.run can run only once")
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._closed = True
            self._nursery = None
            connections = list(self._connections.values())
            self._connections.clear()
            with trio.CancelScope(shield=True):
                for connection in connections:
                    await connection.aclose()

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """Addresses with an open connection."""
        return sorted(a for a, c in self._connections.items() if not c.closed)

    async def send(
        self,
        host: str,
        port: int,
        request: Request,
        *,
        timeout_s: float,
    ) -> Response:
        """`request`'s response from the broker at host:port (connecting first if needed).
        Raises KafkaConnectionError or KafkaTimeoutError naming the address when no response
        came; the request may have reached the broker anyway."""
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        deadline = trio.current_time() + timeout_s
        connection = await self._connection(host, port, deadline, timeout_s)
        remaining_ms = max((deadline - trio.current_time()) * 1000, 1.0)
        try:
            response: Response = await connection.request(request, timeout_ms=remaining_ms)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._forget((host, port), connection)
            raise
        return response

    async def _connection(
        self, host: str, port: int, deadline: float, timeout_s: float
    ) -> BrokerConnection:
        address = (host, port)
        connection = self._usable(address)
        if connection is not None:
            return connection
        lock = self._connecting.setdefault(address, trio.Lock())
        with trio.move_on_at(deadline) as scope:
            async with lock:
                connection = self._usable(address)
                if connection is not None:
                    return connection
                return await self._connect(host, port, deadline)
        assert scope.cancelled_caught
        raise KafkaTimeoutError(
            f"no connection to broker {host}:{port} within {timeout_s:g} s "
            "(another connection attempt to it was still in progress)"
        )

    def _usable(self, address: tuple[str, int]) -> BrokerConnection | None:
        connection = self._connections.get(address)
        if connection is not None and connection.closed:
            self._forget(address, connection)
            return None
        return connection

    async def _connect(self, host: str, port: int, deadline: float) -> BrokerConnection:
        nursery = self._nursery
        if nursery is None:
            raise TransportClosedError(
                f"cannot send to broker {host}:{port}: the transport is "
                + ("closed" if self._closed else "not running")
            )
        timeout_s = min(self._connect_timeout_s, max(deadline - trio.current_time(), 0.001))
        stream = await open_stream(host, port, timeout_s * 1000, self.security.tls)
        connection = BrokerConnection(
            stream,
            address=f"{host}:{port}",
            client_id=self.client_id,
            max_in_flight=self._max_in_flight,
            request_timeout_ms=math.inf,
            max_frame_bytes=self._max_frame_bytes,
        )
        # Connected on the first send, often while a request is served: the reader outlives it.
        await nursery.start(detached(self._reader), (host, port), connection)
        try:
            await self.security.authenticate(connection)
        except KafkaError as exc:
            # A refused login is retried like a refused connection: the peer's credentials
            # may arrive (a SCRAM user being created), and the callers handle only these.
            if isinstance(exc, KafkaConnectionError):
                raise
            raise KafkaConnectionError(f"broker {host}:{port} refused this node's login: "
                                       f"{exc.message}") from None  # fmt: skip
        self._connections[(host, port)] = connection
        log.debug("connected", address=f"{host}:{port}", client_id=self.client_id)
        return connection

    async def _reader(
        self,
        address: tuple[str, int],
        connection: BrokerConnection,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            await connection.reader(task_status=task_status)
        finally:
            self._forget(address, connection)
            if connection.closed_by_peer and self.on_peer_closed is not None:
                self.on_peer_closed(*address)

    def _forget(self, address: tuple[str, int], connection: BrokerConnection) -> None:
        if self._connections.get(address) is connection:
            del self._connections[address]

    async def close_address(self, host: str, port: int) -> None:
        """Close the connection to host:port, if any (e.g. the broker left the cluster)."""
        connection = self._connections.pop((host, port), None)
        if connection is not None:
            await connection.aclose()


__all__ = ["DEFAULT_MAX_IN_FLIGHT", "PooledTransport", "TransportClosedError"]
