"""One broker: storage, metadata image, partitions, background loops and the TCP server, with
Kafka's start-up and graceful shutdown order (KafkaRaftServer / BrokerServer).

Start-up: LogManager.startup() (recovery unless the clean-shutdown marker is there), load the
committed metadata and create/lead the local partitions, start the periodic tasks, then listen;
`task_status.started(bound listeners)` only once the broker is really serving.
Shutdown (`request_shutdown()`, e.g. on SIGTERM): stop accepting, answer long polls at once,
finish in-flight requests, stop the loops, checkpoint high watermarks, then
LogManager.shutdown() (flush, recovery points, log start offsets, clean-shutdown marker).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog
import trio

from broker.apis import KafkaApis
from broker.config import BrokerConfig
from broker.metadata_publisher import MetadataPublisher
from broker.partitions import PartitionManager
from broker.ports import ControllerChannel, MetadataSource
from broker.purgatory import FetchPurgatory
from broker.server import BoundListener, BrokerServer, ServerLimits
from protocol.config_defs import LONG_MAX

if TYPE_CHECKING:
    from storage.log_manager import LogManager

log = structlog.get_logger("broker")

ROLLED_SEGMENT_FLUSH_MS = 1000
"""At most this long between a segment's roll and its fsync (and the recovery point move)."""

CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


def server_limits(config: BrokerConfig) -> ServerLimits:
    return ServerLimits(
        max_request_bytes=int(config["socket.request.max.bytes"]),
        queued_max_requests=int(config["queued.max.requests"]),
        max_inflight_per_connection=int(config["queued.max.requests.per.connection"]),
        connections_max_idle_ms=int(config["connections.max.idle.ms"]),
    )


def _now_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        log_manager: LogManager,
        controller: ControllerChannel,
        metadata_source: MetadataSource,
        cluster_id: str,
    ) -> None:
        self.config = config
        self.log_manager = log_manager
        self.metadata_source = metadata_source
        self.cluster_id = cluster_id
        self.publisher = MetadataPublisher(config.node_id, config.topic_defaults(), cluster_id)
        self.partitions = PartitionManager(log_manager, config.node_id, self.publisher.topic_config)
        self.publisher.partitions = self.partitions
        self.purgatory = FetchPurgatory()
        self.apis = KafkaApis(
            config=config,
            partitions=self.partitions,
            publisher=self.publisher,
            metadata_source=metadata_source,
            controller=controller,
            purgatory=self.purgatory,
            cluster_id=cluster_id,
        )
        self.server = BrokerServer(
            self.apis,
            config.listeners,
            server_limits(config),
        )
        self._shutdown = trio.Event()
        self.stopped = trio.Event()
        """Set once run() has shut down gracefully."""

    def request_shutdown(self) -> None:
        self._shutdown.set()

    def _start_storage(self) -> None:
        clean = [
            d
            for d in self.log_manager_dirs()
            if os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_MARKER))
        ]
        if clean and len(clean) == len(self.log_manager_dirs()):
            log.info("clean shutdown marker found, skipping log recovery", log_dirs=clean)
        else:
            log.info("no clean shutdown marker, recovering logs", log_dirs=self.log_manager_dirs())
        started = time.monotonic()
        self.log_manager.startup()
        log.info(
            "log manager started",
            logs=len(list(self.log_manager.logs())),
            duration_ms=int((time.monotonic() - started) * 1000),
        )

    def log_manager_dirs(self) -> list[str]:
        return [str(d) for d in self.config.log_dirs]

    async def run(
        self, *, task_status: trio.TaskStatus[list[BoundListener]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        log.info("broker starting", node_id=self.config.node_id, log_dirs=self.log_manager_dirs())
        self._start_storage()
        async with trio.open_nursery() as nursery:
            loops = trio.CancelScope()

            async def background() -> None:
                with loops:
                    async with trio.open_nursery() as inner:
                        await inner.start(self.publisher.run, self.metadata_source)
                        self._start_loops(inner)
                        background_ready.set()
                        await trio.sleep_forever()

            background_ready = trio.Event()
            nursery.start_soon(background)
            await background_ready.wait()
            bound = await nursery.start(self.server.serve)
            self.apis.bound = bound
            log.info(
                "broker started",
                node_id=self.config.node_id,
                listeners=[f"{b.name}://{b.host}:{b.port}" for b in bound],
                partitions=len(self.partitions.partitions),
            )
            task_status.started(bound)
            await self._shutdown.wait()
            log.info("broker shutting down")
            self.purgatory.wake_all()
            await self.server.drain()
            loops.cancel()
        self._final_checkpoint()
        log.info("broker shut down", node_id=self.config.node_id)
        self.stopped.set()

    def _final_checkpoint(self) -> None:
        try:
            self.partitions.checkpoint_high_watermarks()
        except Exception as exc:  # still write what we can
            log.warning("high watermark checkpoint failed at shutdown", error=str(exc))
        self.log_manager.shutdown()

    def _start_loops(self, nursery: trio.Nursery) -> None:
        c = self.config
        every: list[tuple[str, int, Callable[[], object]]] = [
            (
                "high watermark checkpoint",
                int(c["replica.high.watermark.checkpoint.interval.ms"]),
                self.partitions.checkpoint_high_watermarks,
            ),
            (
                "retention",
                int(c["log.retention.check.interval.ms"]),
                lambda: self.log_manager.run_retention(_now_ms()),
            ),
            (
                "recovery point checkpoint",
                int(c["log.flush.offset.checkpoint.interval.ms"]),
                self.log_manager.checkpoint_recovery_points,
            ),
            (
                "log start offset checkpoint",
                int(c["log.flush.start.offset.checkpoint.interval.ms"]),
                self.log_manager.checkpoint_log_start_offsets,
            ),
            (
                "flush",
                # Besides log.flush.*, the flusher fsyncs rolled segments, which Kafka does right
                # after each roll whatever log.flush.scheduler.interval.ms says: without it the
                # recovery point never moves and a crash means re-scanning every log in full.
                min(int(c["log.flush.scheduler.interval.ms"]), ROLLED_SEGMENT_FLUSH_MS),
                lambda: self.log_manager.flush_dirty(_now_ms()),
            ),
        ]
        for name, interval_ms, fn in every:
            if 0 < interval_ms < LONG_MAX:
                nursery.start_soon(self._periodic, name, interval_ms, fn)

    async def _periodic(self, name: str, interval_ms: int, fn: Callable[[], object]) -> None:
        while True:
            await trio.sleep(interval_ms / 1000)
            try:
                fn()
            except Exception as exc:  # a full disk must not stop the broker
                log.warning("periodic task failed", task=name, error=str(exc))
