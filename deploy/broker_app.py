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
import sys
import uuid
from collections.abc import Sequence
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
from protocol.messages import Request, Response
from protocol.metadata.records import BrokerEndpoint
from raft.local_log import LocalMetadataLog
from storage.log_manager import LogManager
from storage.meta_properties import read_meta_properties

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
    """Run one standalone broker until SIGTERM/SIGINT (or cancellation)."""
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


if __name__ == "__main__":
    # `python -m deploy.broker_app ARGS` is `trioka broker start ARGS` (tests, benchmarks).
    from deploy.cli import main

    main(["broker", "start", *sys.argv[1:]])
