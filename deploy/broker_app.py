"""The standalone broker process: storage, local metadata log, controller and broker, wired.

    python -m deploy.broker_app --config FILE [--override key=value ...]   (= trioka broker start)

`run_broker(config)` is what `trioka broker start` calls. It builds, in Kafka's order:
LogManager (partition logs), LocalMetadataLog (`<metadata.log.dir>/__cluster_metadata-0`),
the controller driver on top of it (single-writer loop), the broker (metadata publisher,
partitions, TCP server), and handles SIGTERM/SIGINT as a graceful shutdown (stop accepting,
finish in-flight requests, checkpoint, write the clean-shutdown marker).
`task_status.started(bound listeners)` is called once the broker is serving.
"""

from __future__ import annotations

import base64
import signal
import socket
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog
import trio

from broker.config import BrokerConfig
from broker.node import Broker
from broker.server import BoundListener
from controller.brokers import RegisterBroker
from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.driver import ControllerDriver
from controller.operations import failed_response
from protocol.config_defs import ConfigError
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request, Response
from protocol.metadata.records import BrokerEndpoint
from raft.local_log import LocalMetadataLog
from storage.log_manager import LogManager
from storage.meta_properties import read_meta_properties
from zkstore.znodes import BrokerIdZNode

log = structlog.get_logger("deploy.broker_app")


class LocalMetadataSource:
    """MetadataSource over the local metadata log's commit listener: committed records are
    queued here in order until the broker's publisher takes them."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, Any]] = []
        self._committed = -1
        self._arrived = trio.Event()

    async def on_commit(self, records: Sequence[tuple[int, Any]]) -> None:
        """The LocalMetadataLog listener: (offset, record) pairs in offset order."""
        for offset, record in records:
            if offset > self._committed:
                self._pending.append((offset, record))
                self._committed = offset
        self._arrived.set()

    def committed_offset(self) -> int:
        return self._committed

    async def read_committed(self, after_offset: int) -> Sequence[tuple[int, Any]]:
        while True:
            # One consumer (the publisher): what it has not asked for again is applied.
            out = [p for p in self._pending if p[0] > after_offset]
            self._pending = []
            if out:
                return out
            self._arrived = trio.Event()
            await self._arrived.wait()


class DriverChannel:
    """ControllerChannel over the in-process controller driver."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver

    async def submit(self, request: Request) -> Response:
        return await self.driver.submit(request)


FORWARDED_CLIENT_ID = "trioka-forwarded"
"""client_id of requests a broker forwards to the active controller: the receiver answers them
itself or with NOT_CONTROLLER, never forwards them again (at most one hop)."""

ControllerLocator = Callable[[int], Awaitable[tuple[str, int] | None]]
"""`await locate(broker_id) -> (host, port)` of that broker's inter-broker listener, or None."""


class ForwardingControllerChannel:
    """ControllerChannel of a ZK-mode broker (Kafka's ForwardingManager and
    BrokerToControllerChannelManager in one): submits locally while this broker's controller
    service is active, otherwise forwards the request over the transport to the active
    controller's broker. A request that cannot reach a controller is answered NOT_CONTROLLER
    (clients and brokers retry that)."""

    def __init__(
        self,
        service: Any,
        transport: Any,
        locate: ControllerLocator,
        *,
        timeout_s: float = 30.0,
    ) -> None:
        self.service = service
        self.transport = transport
        self.locate = locate
        self.timeout_s = timeout_s

    async def submit(self, request: Request) -> Response:
        if self.service.is_active:
            return await self.service.submit(request)
        active = self.service.active_id
        if active is None or active < 0:
            return failed_response(request, ErrorCode.NOT_CONTROLLER, "no active controller")
        address = await self.locate(active)
        if address is None:
            return failed_response(
                request,
                ErrorCode.NOT_CONTROLLER,
                f"the active controller {active} is not registered",
            )
        try:
            response: Response = await self.transport.send(
                address[0], address[1], request, timeout_s=self.timeout_s
            )
        except (KafkaError, OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            # The controller went away meanwhile: the caller retries and finds the next one.
            log.info("forwarding to the controller failed", controller=active, error=str(exc))
            return failed_response(
                request,
                ErrorCode.NOT_CONTROLLER,
                f"the active controller {active} did not answer: {exc}",
            )
        return response

    async def submit_forwarded(self, request: Request) -> Response:
        """A request another broker forwarded here: answered only if this broker's controller is
        active (NOT_CONTROLLER otherwise: the sender looks for the new controller)."""
        if self.service.is_active:
            return await self.service.submit(request)
        return failed_response(
            request,
            ErrorCode.NOT_CONTROLLER,
            f"broker {self.service.broker_id} is not the controller",
        )


def zk_broker_locator(zk: Any, listener: str) -> ControllerLocator:
    """A ControllerLocator reading /brokers/ids/<id> (cached per registration czxid)."""
    cache: dict[int, tuple[int, tuple[str, int] | None]] = {}

    async def locate(broker_id: int) -> tuple[str, int] | None:
        found = await zk.get_or_none(BrokerIdZNode.path(broker_id))
        if found is None:
            return None
        data, stat = found
        cached = cache.get(broker_id)
        if cached is not None and cached[0] == stat.czxid:
            return cached[1]
        info = BrokerIdZNode.decode(broker_id, data)
        endpoints = {e.name: e for e in info.endpoints}
        endpoint = endpoints.get(listener) or (info.endpoints[0] if info.endpoints else None)
        address = (endpoint.host, endpoint.port) if endpoint is not None else None
        cache[broker_id] = (stat.czxid, address)
        return address

    return locate


def registered_endpoints(
    config: BrokerConfig, bound: Sequence[BoundListener]
) -> tuple[BrokerEndpoint, ...]:
    """The endpoints to register: advertised.listeners (default: listeners), where a port 0 or
    an empty host is replaced by what was actually bound (a wildcard bind advertises the
    machine's name, as Kafka does)."""
    by_name = {b.name: b for b in bound}
    out = []
    for a in config.advertised_listeners or config.listeners:
        b = by_name.get(a.name)
        port = a.port or (b.port if b is not None else 0)
        host = a.host or socket.getfqdn()
        out.append(BrokerEndpoint(name=a.name, host=host, port=port))
    return tuple(out)


def _cluster_id(config: BrokerConfig) -> str:
    """cluster.id if set, else the one in an existing meta.properties, else a new one (what
    `kafka-storage format` would have written)."""
    if config["cluster.id"]:
        return str(config["cluster.id"])
    for d in config.log_dirs:
        try:
            props = read_meta_properties(str(d))
        except OSError:
            props = None
        if props is not None and props.cluster_id:
            return props.cluster_id
    return _random_cluster_id()


def _random_cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


async def run_broker(
    config: BrokerConfig,
    *,
    task_status: trio.TaskStatus[list[BoundListener]] = trio.TASK_STATUS_IGNORED,
    handle_signals: bool = True,
) -> None:
    """Run one broker until SIGTERM/SIGINT (or cancellation): standalone, or in ZK mode."""
    if config.zk_mode:
        await run_zk_broker(config, task_status=task_status, handle_signals=handle_signals)
        return
    cluster_id = _cluster_id(config)
    log_manager = LogManager(
        list(config.log_dirs),
        node_id=config.node_id,
        cluster_id=cluster_id,
        max_open_files=int(config["trioka.max.open.files"]),
    )
    controller_config = ControllerConfig(
        num_partitions=int(config["num.partitions"]),
        default_replication_factor=int(config["default.replication.factor"]),
        delete_topic_enable=bool(config["delete.topic.enable"]),
        # The local single-node log has no batch limit to respect; a standalone broker may
        # create one topic with tens of thousands of partitions.
        max_partitions_per_request=1_000_000,
        topic_defaults=config.static_topic_defaults(),
    )
    source = LocalMetadataSource()
    metadata_log = LocalMetadataLog(config.metadata_log_dir)
    driver = ControllerDriver(metadata_log, ctx=ControllerContext(config=controller_config))
    metadata_log.add_listener(driver.handle_committed)
    metadata_log.add_listener(source.on_commit)
    broker = Broker(
        config,
        log_manager=log_manager,
        controller=DriverChannel(driver),
        metadata_source=source,
        cluster_id=cluster_id,
    )
    await metadata_log.open()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(driver.run)
            advertised = config.advertised_listeners or config.listeners
            await driver.register_broker(
                RegisterBroker(
                    broker_id=config.node_id,
                    incarnation_id=_random_cluster_id(),
                    endpoints=tuple(
                        BrokerEndpoint(name=a.name, host=a.host, port=a.port) for a in advertised
                    ),
                    rack=config["broker.rack"] or None,
                    unfence=True,
                )
            )
            bound = await nursery.start(broker.run)
            task_status.started(bound)
            if handle_signals:
                with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for signum in signals:
                        log.info("shutdown signal received", signal=signal.Signals(signum).name)
                        break
                broker.request_shutdown()
            # The broker shuts down gracefully first; then the controller stops.
            await broker.stopped.wait()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await metadata_log.aclose()


async def run_zk_broker(
    config: BrokerConfig,
    *,
    task_status: trio.TaskStatus[list[BoundListener]] = trio.TASK_STATUS_IGNORED,
    handle_signals: bool = True,
) -> None:
    """A ZK-mode broker (metadata.mode=zk)."""
    raise ConfigError(
        "metadata.mode=zk: the ZooKeeper-mode broker is not wired in yet (issue 3 in progress)"
    )


if __name__ == "__main__":
    # `python -m deploy.broker_app ARGS` is `trioka broker start ARGS` (tests, benchmarks).
    from deploy.cli import main

    main(["broker", "start", *sys.argv[1:]])
