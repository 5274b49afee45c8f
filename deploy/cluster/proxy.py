"""A frame-aware user-space TCP proxy for chaos tests (tc netem is not available here).

`FaultProxy(listen, target, rng=...)` accepts connections on `listen`, opens one upstream
connection to `target` per accepted connection, and relays frames both ways through a
`deploy.cluster.proxy_policy.ConnectionBook` (delays, dropped responses, blackhole). Start it with
`await nursery.start(proxy.serve)`, which returns the bound (host, port). `proxy.policy` may be
mutated or replaced at any time; `proxy.sever()` closes every open connection now.

`ProxySet` puts one FaultProxy in front of each broker and gives the per-broker overrides
(`advertised.listeners` = the proxy) so that clients and followers (which dial the addresses
brokers register, in both metadata modes) all go through the proxies.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import trio

from deploy.cluster.proxy_policy import (
    CLOSE,
    ConnectionBook,
    Direction,
    ProtocolError,
    ProxyCounters,
    ProxyPolicy,
)

Address = tuple[str, int]
_READ_SIZE = 65536


class _Connection:
    """One accepted connection and its upstream: four tasks (read/write per direction)."""

    def __init__(self, proxy: FaultProxy, client: trio.SocketStream) -> None:
        self.proxy = proxy
        self.client = client
        self.book = ConnectionBook(lambda: proxy.policy, proxy.counters, proxy.rng)
        self.scope = trio.CancelScope()
        self._wake = {d: trio.Event() for d in Direction}

    async def run(self) -> None:
        with self.scope:
            if self.proxy.policy.blackhole:
                await self._swallow()
                return
            try:
                upstream = await trio.open_tcp_stream(*self.proxy.target)
            except OSError:
                return  # the broker is down: the client sees its connection closed
            async with upstream, trio.open_nursery() as nursery:
                streams = {Direction.REQUESTS: upstream, Direction.RESPONSES: self.client}
                sources = {Direction.REQUESTS: self.client, Direction.RESPONSES: upstream}
                for d in Direction:
                    nursery.start_soon(self._read, d, sources[d])
                    nursery.start_soon(self._write, d, streams[d])

    async def _swallow(self) -> None:
        # Read and discard until the client gives up: it sees a silent, open connection.
        while await self.client.receive_some(_READ_SIZE):
            pass

    async def _read(self, direction: Direction, source: trio.SocketStream) -> None:
        while True:
            try:
                data = await source.receive_some(_READ_SIZE)
            except trio.BrokenResourceError:
                data = b""
            if not data:
                self.scope.cancel()  # either side closing ends the pair, as a broker would
                return
            try:
                self.book.feed(direction, data, trio.current_time())
            except ProtocolError:
                self.scope.cancel()
                return
            self._wake[direction].set()

    async def _write(self, direction: Direction, sink: trio.SocketStream) -> None:
        while True:
            for entry in self.book.due(direction, trio.current_time()):
                if entry is CLOSE:
                    self.scope.cancel()
                    return
                assert isinstance(entry, bytes)
                try:
                    await sink.send_all(entry)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self.scope.cancel()
                    return
            release = self.book.next_release(direction)
            if release is None:
                await self._wake[direction].wait()
                self._wake[direction] = trio.Event()
            else:
                # Frames arriving meanwhile are released no earlier (order is kept).
                await trio.sleep_until(release)


class FaultProxy:
    def __init__(
        self,
        listen: Address,
        target: Address,
        *,
        rng: random.Random,
        policy: ProxyPolicy | None = None,
    ) -> None:
        self.listen = listen
        self.target = target
        self.rng = rng
        self.policy = policy or ProxyPolicy()
        self.counters = ProxyCounters()
        self.address: Address | None = None
        self._open: set[_Connection] = set()

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        host, port = self.listen
        listeners = await trio.open_tcp_listeners(port, host=host)
        self.address = (host, listeners[0].socket.getsockname()[1])
        async with trio.open_nursery() as nursery:
            task_status.started(self.address)
            await trio.serve_listeners(self._handle, listeners, handler_nursery=nursery)

    async def _handle(self, client: trio.SocketStream) -> None:
        self.counters.connections += 1
        conn = _Connection(self, client)
        self._open.add(conn)
        try:
            async with client:
                await conn.run()
        finally:
            self._open.discard(conn)

    def sever(self) -> int:
        """Close every open connection now (clients reconnect through the proxy). Returns how
        many were open."""
        count = len(self._open)
        for conn in list(self._open):
            conn.scope.cancel()
        self.counters.connections_severed += count
        return count

    @property
    def open_connections(self) -> int:
        return len(self._open)


class ProxySet:
    """One FaultProxy per broker (node id -> proxy), each listening on `host` (the loopback,
    or the host's bridge address in netns mode) on a port of its own; with
    `internal_targets`, a second one per broker in front of its inter-broker listener
    (`internal[node id]`), so replication and the controller's requests cross the faults too."""

    def __init__(
        self,
        targets: Mapping[int, Address],
        *,
        host: str = "127.0.0.1",
        rng: random.Random,
        listener_name: str = "PLAINTEXT",
        internal_targets: Mapping[int, Address] | None = None,
        internal_listener_name: str = "INTERNAL",
    ) -> None:
        self.host = host
        self.listener_name = listener_name
        self.internal_listener_name = internal_listener_name

        # Each proxy has its own rng stream derived from the seed, so one proxy's traffic
        # does not change another's draws.
        def proxies(to: Mapping[int, Address]) -> dict[int, FaultProxy]:
            return {
                node_id: FaultProxy((host, 0), target, rng=random.Random(rng.getrandbits(64)))
                for node_id, target in sorted(to.items())
            }

        self.proxies = proxies(targets)
        self.internal = proxies(internal_targets or {})

    def all(self) -> list[FaultProxy]:
        return [*self.proxies.values(), *self.internal.values()]

    async def start(self, nursery: trio.Nursery) -> dict[int, Address]:
        """Start every proxy; the client-facing proxies' addresses by node id."""
        for proxy in self.internal.values():
            await nursery.start(proxy.serve)
        return {node_id: await nursery.start(p.serve) for node_id, p in self.proxies.items()}

    def __getitem__(self, node_id: int) -> FaultProxy:
        return self.proxies[node_id]

    def set_policy(self, policy: ProxyPolicy) -> None:
        """The same policy object for every proxy (mutating it changes them all)."""
        for proxy in self.all():
            proxy.policy = policy

    def sever(self) -> int:
        return sum(p.sever() for p in self.all())

    def advertised_overrides(self) -> dict[int, dict[str, str]]:
        """Per-broker overrides: advertise the proxies' addresses for `listener_name` (and
        the internal listener's), which ZK registrations and Raft BrokerRegistration publish
        to clients and followers."""
        out = {}
        for node_id, proxy in self.proxies.items():
            named = [(self.listener_name, proxy)]
            if node_id in self.internal:
                named.append((self.internal_listener_name, self.internal[node_id]))
            if any(p.address is None for _, p in named):
                raise RuntimeError(f"proxy for broker {node_id} is not started")
            out[node_id] = {
                "advertised.listeners": ",".join(
                    f"{name}://{p.address[0]}:{p.address[1]}"  # type: ignore[index]
                    for name, p in named
                )
            }
        return out

    def totals(self) -> dict[str, object]:
        out = {str(n): p.counters.as_dict() for n, p in self.proxies.items()}
        out |= {f"{n}-internal": p.counters.as_dict() for n, p in self.internal.items()}
        return out
