"""The standalone broker (`metadata.mode=standalone`): a single-node local metadata log, the\ncontroller driver on top of it and the broker, in one process.\n"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog
import trio

from broker.config import BrokerConfig
from broker.metadata_feeds.standalone import StandaloneMetadataFeed
from broker.node import Broker
from broker.server import BoundListener
from controller.brokers import RegisterBroker
from controller.config import ControllerConfig
from controller.context import ControllerContext
from controller.service.driver import ControllerDriver
from deploy.node.broker_base import (
    log_manager_for,
    resolve_cluster_id,
    serve_until_stopped,
)
from deploy.node.controller_routes import local_controller_channel
from deploy.node.runtime import NodeRuntime
from protocol.metadata.records import BrokerEndpoint
from protocol.metadata.topic_ids import random_uuid
from raft.local_log import LocalMetadataLog

log = structlog.get_logger("deploy.node.broker")


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


async def run_standalone_broker(
    config: BrokerConfig,
    *,
    task_status: trio.TaskStatus[list[BoundListener]] = trio.TASK_STATUS_IGNORED,
    handle_signals: bool = True,
    runtime: NodeRuntime | None = None,
) -> None:
    runtime = runtime if runtime is not None else NodeRuntime()
    cluster_id = resolve_cluster_id(config)
    log_manager = log_manager_for(config, cluster_id, runtime.clock)
    # The local single-node log has no batch limit to respect; a standalone broker may create
    # one topic with tens of thousands of partitions.
    controller_config = ControllerConfig.from_server_config(
        config.values, config.explicit, max_partitions_per_request=1_000_000
    )
    source = LocalMetadataSource()
    metadata_log = LocalMetadataLog(config.metadata_log_dir, clock_ms=runtime.clock.wall_ms)
    driver = ControllerDriver(
        metadata_log,
        ctx=ControllerContext(config=controller_config, clock_ms=runtime.clock.monotonic_ms),
    )
    metadata_log.add_listener(driver.handle_committed)
    metadata_log.add_listener(source.on_commit)
    broker = Broker(
        config,
        log_manager=log_manager,
        controller=local_controller_channel(driver.submit),
        feed=StandaloneMetadataFeed(source),
        cluster_id=cluster_id,
        failpoints=runtime.failpoints,
        clock=runtime.clock,
    )
    await metadata_log.open()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(driver.run)
            advertised = config.advertised_listeners or config.listeners
            registered = await driver.register_broker(
                RegisterBroker(
                    broker_id=config.node_id,
                    incarnation_id=random_uuid(),
                    endpoints=tuple(
                        BrokerEndpoint(name=a.name, host=a.host, port=a.port) for a in advertised
                    ),
                    rack=config["broker.rack"] or None,
                    unfence=True,
                )
            )
            # AllocateProducerIds names the broker epoch the controller registered.
            broker.broker_epoch = registered.broker_epoch
            bound = await nursery.start(broker.run)
            task_status.started(bound)
            await serve_until_stopped(broker, handle_signals)
            # The broker shuts down gracefully first; then the controller and the rest stop.
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await metadata_log.aclose()
