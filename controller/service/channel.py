"""Per-broker request channels of the active controller (Kafka's ControllerChannelManager).

One queue and one sender task per live broker: requests to a broker go out one at a time, in the
order they were queued (a LeaderAndIsr is never overtaken by a later one), each retried with
backoff while the broker does not answer (no connection, a timeout) until it answers or the
broker leaves the channel. An answer with an error code is an answer: it goes to `on_response`
and is not sent again, as in Kafka (the controller's next event sends what it needs).

Brokers are added and removed as the controller's view of live brokers changes
(`update_brokers(image)`, from the image after each event): a broker that went away has its queue
dropped and its sender task cancelled; one that came back with a new epoch (a new ZooKeeper
registration) or at a new address starts with a fresh queue, since requests stamped with its old
broker epoch would be refused anyway.

    manager = ControllerChannelManager(transport, listener="INTERNAL")
    await nursery.start(manager.run)
    manager.update_brokers(image)
    manager.send_plan(plan_propagation(before, after, identity))
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import structlog
import trio

from controller.ports import BrokerSender
from controller.propagation import BrokerRequests, coalesce
from protocol.errors import KafkaError, ProtocolError
from protocol.messages import Request, Response
from protocol.metadata.image import BrokerRegistration, MetadataImage

log = structlog.get_logger("controller.service.channel")

DEFAULT_REQUEST_TIMEOUT_S = 30.0
"""Kafka's controller.socket.timeout.ms (30000)."""
DEFAULT_RETRY_BACKOFF_S = 0.1
"""The first wait before a request is sent again (Kafka's send thread waits 100 ms)."""
DEFAULT_MAX_RETRY_BACKOFF_S = 1.0
"""Backoff doubles per failed attempt up to this."""

ResponseCallback = Callable[[int, Request, Response], None]
"""`on_response(broker_id, request, response)`, in the channel's task; must not block."""


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """Where the controller reaches one live broker."""

    broker_id: int
    host: str
    port: int
    epoch: int = -1
    """The broker epoch it was added with; another epoch means another run of the broker."""


def broker_addresses(image: MetadataImage, listener: str) -> dict[int, BrokerAddress]:
    """The live (unfenced) brokers of `image`, each at its endpoint on `listener`
    (inter.broker.listener.name), or its first endpoint when it has no such listener; brokers
    without endpoints are left out (nothing can reach them)."""
    out: dict[int, BrokerAddress] = {}
    for broker_id, broker in sorted(image.cluster.brokers.items()):
        if broker.fenced:
            continue
        address = _address(broker, listener)
        if address is not None:
            out[broker_id] = address
    return out


def _address(broker: BrokerRegistration, listener: str) -> BrokerAddress | None:
    endpoint = broker.endpoint(listener) or (broker.endpoints[0] if broker.endpoints else None)
    if endpoint is None:
        return None
    return BrokerAddress(broker.broker_id, endpoint.host, endpoint.port, broker.epoch)


class _BrokerChannel:
    """One broker's queue and the cancel scope of its sender task."""

    def __init__(self, address: BrokerAddress) -> None:
        self.address = address
        self.send, self.receive = trio.open_memory_channel[Request](math.inf)
        self.scope = trio.CancelScope()
        self.pending = 0
        """Requests queued or being sent."""
        self.idle = trio.Event()
        self.idle.set()
        self.sent = 0
        self.failed_attempts = 0

    def put(self, request: Request) -> None:
        self.pending += 1
        self.idle = trio.Event() if self.idle.is_set() else self.idle
        self.send.send_nowait(request)

    def done_one(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            self.idle.set()

    def close(self) -> None:
        self.scope.cancel()
        self.send.close()
        self.pending = 0
        self.idle.set()


class ControllerChannelManager:
    """The active controller's channels to the live brokers. Run `run` in a nursery."""

    def __init__(
        self,
        sender: BrokerSender,
        *,
        listener: str = "PLAINTEXT",
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_S,
        max_retry_backoff_s: float = DEFAULT_MAX_RETRY_BACKOFF_S,
        on_response: ResponseCallback | None = None,
    ) -> None:
        if request_timeout_s <= 0:
            raise ValueError(f"request_timeout_s must be positive, got {request_timeout_s}")
        if retry_backoff_s <= 0 or max_retry_backoff_s < retry_backoff_s:
            raise ValueError(
                f"need 0 < retry_backoff_s ({retry_backoff_s}) <= max_retry_backoff_s "
                f"({max_retry_backoff_s})"
            )
        self._sender = sender
        self.listener = listener
        self._timeout_s = request_timeout_s
        self._backoff_s = retry_backoff_s
        self._max_backoff_s = max_retry_backoff_s
        self._on_response = on_response
        self._channels: dict[int, _BrokerChannel] = {}
        self._nursery: trio.Nursery | None = None
        self._stopped = False

    # -- brokers --------------------------------------------------------------------------------

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self._channels)

    def address(self, broker_id: int) -> BrokerAddress | None:
        channel = self._channels.get(broker_id)
        return None if channel is None else channel.address

    def add_broker(self, address: BrokerAddress) -> None:
        """Start a channel to `address` (replacing one to the same broker at another address or
        epoch; the same address and epoch again is a no-op)."""
        if self._stopped:
            raise RuntimeError("the controller channel manager has stopped")
        current = self._channels.get(address.broker_id)
        if current is not None:
            if current.address == address:
                return
            self.remove_broker(address.broker_id)
        channel = _BrokerChannel(address)
        self._channels[address.broker_id] = channel
        log.info(
            "controller channel added",
            broker_id=address.broker_id,
            address=f"{address.host}:{address.port}",
            broker_epoch=address.epoch,
        )
        if self._nursery is not None:
            self._nursery.start_soon(self._sender_task, channel)

    def remove_broker(self, broker_id: int) -> None:
        """Stop the channel to `broker_id`, dropping whatever it still had to send."""
        channel = self._channels.pop(broker_id, None)
        if channel is not None:
            dropped = channel.pending
            channel.close()
            log.info("controller channel removed", broker_id=broker_id, dropped_requests=dropped)

    def set_brokers(self, addresses: Mapping[int, BrokerAddress] | Iterable[BrokerAddress]) -> None:
        """Make the channels exactly these brokers (added, replaced, removed as needed)."""
        wanted = list(addresses.values()) if isinstance(addresses, Mapping) else list(addresses)
        ids = {a.broker_id for a in wanted}
        for broker_id in [i for i in self._channels if i not in ids]:
            self.remove_broker(broker_id)
        for address in wanted:
            self.add_broker(address)

    def update_brokers(self, image: MetadataImage) -> None:
        """Channels to exactly the live brokers of `image`, on this manager's listener."""
        self.set_brokers(broker_addresses(image, self.listener))

    # -- sending --------------------------------------------------------------------------------

    def send(self, broker_id: int, requests: Iterable[Request]) -> bool:
        """Queue requests for `broker_id`, to go out in this order after what is queued already.
        False (nothing queued) when the manager has no channel to that broker."""
        channel = self._channels.get(broker_id)
        if channel is None:
            log.warning("no controller channel to broker; requests dropped", broker_id=broker_id)
            return False
        for request in requests:
            channel.put(request)
        return True

    def send_plan(self, plans: Mapping[int, BrokerRequests]) -> None:
        """Queue one event's per-broker requests (controller.propagation's plans)."""
        for broker_id in sorted(plans):
            self.send(broker_id, plans[broker_id].requests())

    def queued(self, broker_id: int) -> int:
        """Requests queued for `broker_id` or being sent (0 without a channel)."""
        channel = self._channels.get(broker_id)
        return 0 if channel is None else channel.pending

    async def wait_idle(self) -> None:
        """Return once every channel has sent everything queued (for tests and shutdown)."""
        while True:
            busy = [c for c in self._channels.values() if c.pending]
            if not busy:
                return
            await busy[0].idle.wait()

    # -- tasks ----------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the sender tasks until cancelled; then every channel is closed."""
        if self._nursery is not None or self._stopped:
            raise RuntimeError("ControllerChannelManager.run can run only once")
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for channel in self._channels.values():
                    nursery.start_soon(self._sender_task, channel)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._stopped = True
            self._nursery = None
            for broker_id in list(self._channels):
                self.remove_broker(broker_id)

    async def _sender_task(self, channel: _BrokerChannel) -> None:
        backlog: deque[Request] = deque()
        with channel.scope:
            while True:
                if not backlog:
                    try:
                        backlog.append(await channel.receive.receive())
                    except trio.EndOfChannel:
                        return
                while True:  # what else waits: sent together where it can be
                    try:
                        backlog.append(channel.receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                requests, taken = coalesce(list(backlog))
                for _ in range(taken):
                    backlog.popleft()
                for request in requests:
                    await self._send_one(channel, request)
                for _ in range(taken):
                    channel.done_one()

    async def _send_one(self, channel: _BrokerChannel, request: Request) -> None:
        response = await self._send_until_answered(channel, request)
        if response is None:
            return
        channel.sent += 1
        if self._on_response is not None:
            try:
                self._on_response(channel.address.broker_id, request, response)
            except Exception:
                log.exception("controller channel response callback failed")

    async def _send_until_answered(
        self, channel: _BrokerChannel, request: Request
    ) -> Response | None:
        """The broker's answer, or None when the request cannot be sent at all (a bug)."""
        address = channel.address
        backoff = self._backoff_s
        while True:
            try:
                return await self._sender.send(
                    address.host, address.port, request, timeout_s=self._timeout_s
                )
            except ProtocolError as exc:
                # Our request cannot be encoded or the answer cannot be read: sending it again
                # would fail the same way.
                log.error(
                    "controller request to broker dropped",
                    broker_id=address.broker_id,
                    request=type(request).__name__,
                    error=str(exc),
                )
                return None
            except (KafkaError, OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
                # No answer (connection refused or broken, timeout): the broker may be starting
                # or overloaded; it stays ours until the controller learns it left.
                channel.failed_attempts += 1
                log.warning(
                    "controller request to broker failed; will retry",
                    broker_id=address.broker_id,
                    address=f"{address.host}:{address.port}",
                    request=type(request).__name__,
                    error=str(exc) or repr(exc),
                    retry_in_s=backoff,
                )
            await trio.sleep(backoff)
            backoff = min(max(backoff * 2, self._backoff_s), self._max_backoff_s)


__all__ = [
    "DEFAULT_REQUEST_TIMEOUT_S",
    "BrokerAddress",
    "ControllerChannelManager",
    "ResponseCallback",
    "broker_addresses",
]
