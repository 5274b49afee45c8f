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
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog
import trio

from broker.alter_partition import AlterPartitionManager
from broker.authorization import request_authorization
from broker.config import SASL_PROTOCOLS, BrokerConfig
from broker.fetcher import FetcherConfig, ReplicaFetcherManager
from broker.group.driver import GroupCoordinatorDriver
from broker.group.factory import make_group_coordinator
from broker.handlers.admin import AdminHandler, TopicDefaults
from broker.handlers.configs import ConfigsHandler
from broker.handlers.fetch import FetchHandler
from broker.handlers.forwarding import ControllerForwarder
from broker.handlers.leader_hints import LeaderHints
from broker.handlers.metadata import LiveBrokers, MetadataHandler
from broker.handlers.offsets import OffsetsHandler
from broker.handlers.partition_reads import PartitionReader
from broker.handlers.produce import ProduceHandler, ProducerIdHandler
from broker.handlers.router import ApiFamily, ApiRouter, request_client_id
from broker.handlers.security import SecurityHandler
from broker.log_cleaner import CleanerConfig, LogCleaner
from broker.metadata_publisher import MetadataPublisher
from broker.metrics import BrokerMetrics, BrokerView, GroupOffsetsView, default_metrics
from broker.partitions import PartitionManager
from broker.ports import BrokerCore, ControllerChannel, Failpoints, MetadataFeed, Transport
from broker.producer_ids import ProducerIdManager
from broker.purgatory import FetchPurgatory
from broker.replica.fetch_session import FetchSessionCache
from broker.sasl import sasl_settings
from broker.server import BoundListener, BrokerServer, ServerLimits
from broker.tls import server_contexts
from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.config_defs import LONG_MAX
from protocol.metadata.image import MetadataImage
from protocol.names import TopicPartition

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
        sasl_max_receive_bytes=int(config["sasl.server.max.receive.size"]),
    )


def fetcher_config(config: BrokerConfig) -> FetcherConfig:
    return FetcherConfig(
        node_id=config.node_id,
        num_fetchers=int(config["num.replica.fetchers"]),
        fetch_max_bytes=int(config["replica.fetch.max.bytes"]),
        response_max_bytes=int(config["replica.fetch.response.max.bytes"]),
        max_wait_ms=int(config["replica.fetch.wait.max.ms"]),
        min_bytes=int(config["replica.fetch.min.bytes"]),
        backoff_ms=int(config["replica.fetch.backoff.ms"]),
        socket_timeout_ms=int(config["replica.socket.timeout.ms"]),
    )


def _checks_principals(config: BrokerConfig) -> bool:
    """ACLs or SCRAM users decide what a connection may do: both live in the metadata."""
    protocols = config.listener_security_protocol_map
    sasl = any(protocols.get(listener.name) in SASL_PROTOCOLS for listener in config.listeners)
    return bool(config["authorizer.class.name"]) or sasl


def internal_listeners(config: BrokerConfig) -> frozenset[str] | None:
    """Where the inter-broker APIs are served: the inter-broker listener when the broker has
    others for its clients; None (everywhere) when one listener carries everything."""
    names = {x.name for x in config.broker_listeners}
    inter = config.inter_broker_listener_name
    if len(names) < 2 or inter not in names:
        return None
    return frozenset({inter})


class Broker:
    """One broker, whatever its metadata mode: `feed` (broker.ports.MetadataFeed, chosen by
    deploy.node) is where its metadata comes from and everything that depends on it.
    `controller` forwards admin requests and the broker's own requests to the active
    controller; `transport`, when given, reaches the leaders the replica fetchers follow (the
    feeds whose replicas follow leaders require it); `broker_epoch()` (or the `broker_epoch`
    attribute) is this broker's epoch (ZK: the czxid of its registration); `local_controller`,
    when given, is this broker's own controller service, which requests forwarded by other
    brokers go to (ZK mode); `transport_factory`, when given, makes one transport per replica
    fetcher (recommended with a transport that pipelines in order on one connection per
    address)."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        log_manager: LogManager,
        controller: ControllerChannel,
        feed: MetadataFeed,
        cluster_id: str,
        transport: Transport | None = None,
        broker_epoch: Callable[[], int] | None = None,
        local_controller: ControllerChannel | None = None,
        transport_factory: Callable[[], Transport] | None = None,
        metrics: BrokerMetrics | None = None,
        failpoints: Failpoints | None = None,
        clock: Clock = SYSTEM_CLOCK,
        hold_requests: bool = False,
    ) -> None:
        """`hold_requests`: the mode's driver calls `self.server.enable_requests()` once the
        metadata has caught up (it then matters only with an authorizer or SASL listeners)."""
        self.config = config
        self.clock = clock
        """The process's clock (protocol.clock), shared by the partitions, fetchers and waits."""
        self.failpoints = failpoints
        """The process's failpoints (deploy.node.failpoints), None: all off."""
        self.log_manager = log_manager
        self.controller = controller
        self.feed = feed
        self.cluster_id = cluster_id
        self.metrics = metrics if metrics is not None else default_metrics()
        """BrokerTopicMetrics, the ReplicaManager gauges, the consumer group lag and the log
        sizes (the last three bound while `run` runs)."""
        self.broker_epoch = -1
        """This broker's epoch (ZK: the czxid of /brokers/ids/<id>); see `broker_epoch_fn`."""
        self.broker_epoch_fn: Callable[[], int] = broker_epoch or (lambda: self.broker_epoch)
        self._make_replica_manager()
        self.fetchers = self._make_fetchers(transport, transport_factory)
        self._make_controller_clients()
        self.bound: list[BoundListener] = []
        """The listeners serving, with their real ports (empty until `run` listens)."""
        self.apis = ApiRouter(
            identity=lambda: (config.node_id, self.broker_epoch_fn()),
            internal_listeners=internal_listeners(config),
            authorization=request_authorization(config, self._image),
        )
        forwarder = ControllerForwarder(
            controller=controller,
            publisher=self.publisher,
            barrier=feed.forward_barrier,
            effect_timeout_s=int(config["request.timeout.ms"]) / 1000,
            local_controller=local_controller,
        )
        metadata_handler = self._add_api_handlers(forwarder)
        self.group_coordinator = self._add_group_coordinator(metadata_handler)
        feed.attach(self._core())
        self.apis.add_handlers(feed.handlers(forwarder.relay))
        # Not a combined node's controller listener: that one serves the quorum APIs.
        self.server = BrokerServer(
            self.apis,
            config.broker_listeners,
            server_limits(config),
            tls=server_contexts(config, config.broker_listeners),
            sasl=sasl_settings(
                config,
                config.broker_listeners,
                lambda m, user: self._image().scram.credential(m, user),
            ),
            hold_requests=hold_requests and _checks_principals(config),
        )
        self.log_cleaner = LogCleaner(
            CleanerConfig.from_broker_config(config),
            log_manager,
            self.partitions.high_watermarks,
            self.clock.wall_ms,
            self.failpoints,
        )
        self._shutdown = trio.Event()
        self.stopped = trio.Event()
        """Set once run() has shut down gracefully."""

    def _make_replica_manager(self) -> None:
        """The metadata image, the partitions, the produce and fetch waits and the ISR's
        AlterPartition requests (Kafka's ReplicaManager)."""
        config = self.config
        self.publisher = MetadataPublisher(
            config.node_id, config.topic_defaults(), self.cluster_id, clock=self.clock
        )
        self.partitions = PartitionManager(
            self.log_manager,
            config.node_id,
            self.publisher.topic_config,
            replica_lag_time_max_ms=int(config["replica.lag.time.max.ms"]),
            clock=self.clock,
            on_topic_gone=self.metrics.topics.remove_topic,
        )
        self.publisher.partitions = self.partitions
        self.purgatory = FetchPurgatory()
        self.produce_purgatory = FetchPurgatory()
        self.alter_partition = AlterPartitionManager(
            config.node_id,
            self.partitions,
            self.controller,
            lambda: self.broker_epoch_fn(),
            on_high_watermark=self._notify,
            request_timeout_ms=int(config["request.timeout.ms"]),
            metrics=self.metrics.replica_manager,
        )

    def _make_fetchers(
        self, transport: Transport | None, transport_factory: Callable[[], Transport] | None
    ) -> ReplicaFetcherManager | None:
        """The replica fetchers, on `transport`; None without one (a single node's feed)."""
        if transport is None:
            return None
        return ReplicaFetcherManager(
            fetcher_config(self.config),
            self.partitions,
            transport,
            on_high_watermark=self._notify,
            transport_factory=transport_factory,
            topic_metrics=self.metrics.topics,
            failpoints=self.failpoints,
        )

    def _make_controller_clients(self) -> None:
        """The producer id blocks asked of the controller, and the fetch sessions."""
        config = self.config
        self.producer_ids = ProducerIdManager(
            config.node_id,
            self.controller,
            lambda: self.broker_epoch_fn(),
            timeout_s=int(config["request.timeout.ms"]) / 1000,
        )
        self.fetch_sessions: FetchSessionCache[TopicPartition] = FetchSessionCache(
            int(config["max.incremental.fetch.session.cache.slots"])
        )

    def _core(self) -> BrokerCore:
        """What the metadata feed plugs into."""
        return BrokerCore(
            config=self.config,
            partitions=self.partitions,
            publisher=self.publisher,
            fetchers=self.fetchers,
            controller=self.controller,
            broker_epoch=lambda: self.broker_epoch_fn(),
            notify=self._notify,
            on_leadership=self.group_coordinator.on_leadership,
            failpoints=self.failpoints,
        )

    def _add_api_handlers(self, forwarder: ControllerForwarder) -> MetadataHandler:
        """Register the API families' handlers on `self.apis` (the group APIs and the feed's
        come after); the Metadata handler is also what the group coordinator sees of the
        cluster."""
        config = self.config
        admin = AdminHandler(
            forwarder,
            TopicDefaults(
                num_partitions=int(config["num.partitions"]),
                replication_factor=int(config["default.replication.factor"]),
                delete_topic_enable=bool(config["delete.topic.enable"]),
            ),
        )
        brokers = LiveBrokers(
            node_id=config.node_id,
            rack=config["broker.rack"] or None,
            advertised=config.effective_advertised_listeners,
            self_listed_once_unfenced=self.feed.self_listed_once_unfenced,
            image=self._image,
            bound=lambda: self.bound,
        )
        hints = LeaderHints(self._image, brokers)
        metadata = MetadataHandler(
            brokers=brokers,
            image=self._image,
            create_topics=admin.create_topics,
            auto_create_topics=bool(config["auto.create.topics.enable"]),
            cluster_id=self.cluster_id,
            controller_id=self.feed.controller_id,
        )
        reader = PartitionReader(
            self.partitions, on_high_watermark=self._notify, alter_partition=self.alter_partition
        )
        families: list[ApiFamily] = [
            ProduceHandler(
                partitions=self.partitions,
                fetch_purgatory=self.purgatory,
                produce_purgatory=self.produce_purgatory,
                topic_metrics=self.metrics.topics,
                failpoints=self.failpoints,
                leader_hints=hints,
            ),
            ProducerIdHandler(self.producer_ids),
            FetchHandler(
                reader=reader,
                purgatory=self.purgatory,
                sessions=self.fetch_sessions,
                fetch_max_bytes=int(config["fetch.max.bytes"]),
                topic_metrics=self.metrics.topics,
                leader_hints=hints,
                denied_reads=None
                if self.apis.authorization is None
                else self.apis.authorization.denied_reads,
            ),
            OffsetsHandler(self.partitions),
            metadata,
            admin,
            ConfigsHandler(config=config, image=self._image, forward=forwarder.forward),
            SecurityHandler(image=self._image, forward=forwarder.forward),
        ]
        for family in families:
            self.apis.add_handlers(family.handlers())
        return metadata

    def _add_group_coordinator(self, cluster: MetadataHandler) -> GroupCoordinatorDriver:
        coordinator, group_apis = make_group_coordinator(
            self.config,
            partitions=self.partitions,
            notify=self._notify,
            hw_purgatory=self.produce_purgatory,
            cluster=cluster,
            client_id=request_client_id,
            failpoints=self.failpoints,
        )
        self.apis.add_handlers(group_apis.handlers())
        return coordinator

    def _image(self) -> MetadataImage:
        return self.publisher.image

    def request_shutdown(self) -> None:
        self._shutdown.set()

    def _notify(self, tp: object) -> None:
        self.purgatory.notify(tp)  # type: ignore[arg-type]
        self.produce_purgatory.notify(tp)  # type: ignore[arg-type]

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
        started = self.clock.monotonic_ms()
        self.log_manager.startup()
        log.info(
            "log manager started",
            logs=len(list(self.log_manager.logs())),
            duration_ms=self.clock.monotonic_ms() - started,
        )

    def log_manager_dirs(self) -> list[str]:
        return [str(d) for d in self.config.log_dirs]

    async def run(
        self, *, task_status: trio.TaskStatus[list[BoundListener]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        log.info("broker starting", node_id=self.config.node_id, log_dirs=self.log_manager_dirs())
        self._start_storage()
        self.metrics.replica_manager.bind(self, self._metrics_view())
        self.metrics.consumer_groups.bind(self, self._group_offsets_view())
        self.metrics.logs.bind(self, self.log_manager.logs)
        try:
            await self._run(task_status)
        finally:
            self.metrics.logs.unbind(self)
            self.metrics.consumer_groups.unbind(self)
            self.metrics.replica_manager.unbind(self)

    def _metrics_view(self) -> BrokerView:
        fetchers = self.fetchers
        return BrokerView(
            partitions=lambda: [p.state for p in list(self.partitions.partitions.values())],
            purgatory_sizes={
                "Produce": lambda: self.produce_purgatory.waiting,
                "Fetch": lambda: self.purgatory.waiting,
            },
            fetcher_lags=fetchers.lags if fetchers is not None else list,
        )

    def _group_offsets_view(self) -> GroupOffsetsView:
        """The commits of the groups coordinated here, measured against the high watermark of
        the partitions hosted here (led: exact; followed: as of the last fetch answer)."""
        hosted = self.partitions.partitions

        def high_watermark(tp: TopicPartition) -> int | None:
            partition = hosted.get(tp)
            return None if partition is None else partition.state.high_watermark

        return GroupOffsetsView(self.group_coordinator.core.committed_offsets, high_watermark)

    async def _run(self, task_status: trio.TaskStatus[list[BoundListener]]) -> None:
        async with trio.open_nursery() as nursery:
            loops = trio.CancelScope()

            async def background() -> None:
                with loops:
                    async with trio.open_nursery() as inner:
                        await inner.start(self.group_coordinator.run)
                        await self.feed.start(inner)
                        if self.fetchers is not None:
                            await inner.start(self.fetchers.run)
                        inner.start_soon(self.alter_partition.run)
                        inner.start_soon(self.producer_ids.run)
                        inner.start_soon(
                            self.alter_partition.shrink_loop,
                            max(int(self.config["replica.lag.time.max.ms"]) // 2, 1),
                        )
                        self._start_loops(inner)
                        inner.start_soon(self.log_cleaner.run)
                        background_ready.set()
                        await trio.sleep_forever()

            background_ready = trio.Event()
            nursery.start_soon(background)
            await background_ready.wait()
            bound = await nursery.start(self.server.serve)
            self.bound = bound
            log.info(
                "broker started",
                node_id=self.config.node_id,
                listeners=[f"{b.name}://{b.host}:{b.port}" for b in bound],
                partitions=len(self.partitions.partitions),
            )
            task_status.started(bound)
            await self._shutdown.wait()
            log.info("broker shutting down")
            await self.feed.controlled_shutdown()
            if self.fetchers is not None:
                self.fetchers.remove_partitions(list(self.partitions.partitions))
            self.purgatory.wake_all()
            self.produce_purgatory.wake_all()
            self.group_coordinator.shutdown()
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
                lambda: self.log_manager.run_retention(self.clock.wall_ms()),
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
                "producer id expiration",
                int(c["producer.id.expiration.check.interval.ms"]),
                lambda: self.log_manager.remove_expired_producers(
                    self.clock.wall_ms(), int(c["producer.id.expiration.ms"])
                ),
            ),
            (
                "flush",
                # Besides log.flush.*, the flusher fsyncs rolled segments, which Kafka does right
                # after each roll whatever log.flush.scheduler.interval.ms says: without it the
                # recovery point never moves and a crash means re-scanning every log in full.
                min(int(c["log.flush.scheduler.interval.ms"]), ROLLED_SEGMENT_FLUSH_MS),
                lambda: self.log_manager.flush_dirty(self.clock.wall_ms()),
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
