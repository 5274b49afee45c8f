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
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import structlog
import trio

from broker.alter_partition import AlterPartitionManager
from broker.config import BrokerConfig
from broker.controlled_shutdown import ControlledShutdownPolicy, controlled_shutdown
from broker.fetcher import FetcherConfig, ReplicaFetcherManager, SourceBroker
from broker.group.factory import make_group_coordinator
from broker.handlers.admin import AdminHandler, TopicDefaults
from broker.handlers.configs import ConfigsHandler
from broker.handlers.fetch import FetchHandler
from broker.handlers.forwarding import ControllerForwarder
from broker.handlers.inter_broker import InterBrokerHandler
from broker.handlers.metadata import LiveBrokers, MetadataHandler
from broker.handlers.offsets import OffsetsHandler
from broker.handlers.partition_reads import PartitionReader
from broker.handlers.produce import ProduceHandler, ProducerIdHandler
from broker.handlers.router import ApiFamily, ApiRouter, request_client_id
from broker.leader_and_isr import ControllerRequestHandler
from broker.log_cleaner import CleanerConfig, LogCleaner
from broker.metadata_cache import with_topic_configs
from broker.metadata_publisher import MetadataPublisher
from broker.metrics import BrokerMetrics, BrokerView, default_metrics
from broker.partition_changes import PartitionChangeApplier
from broker.partitions import PartitionManager
from broker.ports import ControllerChannel, MetadataSource, Transport
from broker.producer_ids import ProducerIdManager
from broker.purgatory import FetchPurgatory
from broker.replica.fetch_session import FetchSessionCache
from broker.replica.partition_state import PartitionChange
from broker.server import BoundListener, BrokerServer, ServerLimits
from protocol import failpoints
from protocol.config_defs import LONG_MAX, ConfigError
from protocol.errors import ErrorCode
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
    )


def _now_ms() -> int:
    return int(time.time() * 1000)


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


class Broker:
    """One broker. Standalone (`metadata.mode=standalone`): metadata from `metadata_source`
    (the local metadata log), admin requests to the local controller through `controller`.
    ZK mode: `metadata_source` is None; the controller's LeaderAndIsr / UpdateMetadata /
    StopReplica arrive over the wire; `transport` reaches the leaders the fetchers follow;
    `controller` forwards to the active controller; `broker_epoch()` (or the `broker_epoch`
    attribute) is the czxid of this broker's registration; `local_controller`, when given, is
    this broker's own controller service, which requests forwarded by other brokers go to;
    `transport_factory`, when given, makes one transport per replica fetcher (recommended with
    a transport that pipelines in order on one connection per address)."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        log_manager: LogManager,
        controller: ControllerChannel,
        metadata_source: MetadataSource | None,
        cluster_id: str,
        transport: Transport | None = None,
        broker_epoch: Callable[[], int] | None = None,
        local_controller: ControllerChannel | None = None,
        transport_factory: Callable[[], Transport] | None = None,
        controlled_shutdown: Callable[[], Awaitable[object]] | None = None,
        metrics: BrokerMetrics | None = None,
    ) -> None:
        if (config.zk_mode or config.raft_mode) and transport is None:
            raise ConfigError(
                f"metadata.mode={config.metadata_mode}: the broker needs a transport to reach "
                "leaders"
            )
        if not config.zk_mode and metadata_source is None:
            raise ConfigError(
                f"metadata.mode={config.metadata_mode}: the broker needs a metadata source"
            )
        self.metrics = metrics if metrics is not None else default_metrics()
        """BrokerTopicMetrics and the ReplicaManager gauges (bound while `run` runs)."""
        self._controlled_shutdown_fn = controlled_shutdown
        """Raft mode: the lifecycle's controlled shutdown through the heartbeat."""
        self.config = config
        self.log_manager = log_manager
        self.metadata_source = metadata_source
        self.controller = controller
        self.cluster_id = cluster_id
        self.broker_epoch = -1
        """This broker's epoch (ZK: the czxid of /brokers/ids/<id>); see `broker_epoch_fn`."""
        self.broker_epoch_fn: Callable[[], int] = broker_epoch or (lambda: self.broker_epoch)
        self.publisher = MetadataPublisher(config.node_id, config.topic_defaults(), cluster_id)
        self.partitions = PartitionManager(
            log_manager,
            config.node_id,
            self.publisher.topic_config,
            replica_lag_time_max_ms=int(config["replica.lag.time.max.ms"]),
        )
        self.publisher.partitions = self.partitions
        self.purgatory = FetchPurgatory()
        self.produce_purgatory = FetchPurgatory()
        self.alter_partition = AlterPartitionManager(
            config.node_id,
            self.partitions,
            controller,
            lambda: self.broker_epoch_fn(),
            on_high_watermark=self._notify,
            request_timeout_ms=int(config["request.timeout.ms"]),
            metrics=self.metrics.replica_manager,
        )
        self.fetchers: ReplicaFetcherManager | None = None
        self.controller_requests: ControllerRequestHandler | None = None
        self.applier: PartitionChangeApplier | None = None
        if config.raft_mode:
            assert transport is not None
            self.fetchers = ReplicaFetcherManager(
                fetcher_config(config),
                self.partitions,
                transport,
                on_high_watermark=self._notify,
                transport_factory=transport_factory,
                topic_metrics=self.metrics.topics,
            )
            self.applier = PartitionChangeApplier(
                node_id=config.node_id,
                partitions=self.partitions,
                fetchers=self.fetchers,
                on_partition_change=self._notify,
                truncate_to_hw_on_become_follower=bool(
                    config["trioka.replica.truncate.to.hw.on.become.follower"]
                ),
            )
            self.publisher.apply_changes = self._apply_from_image
            self.publisher.on_cluster_changed = self._brokers_changed
            # KRaft: nothing is applied locally before the initial catch-up (apply_full).
            self.publisher.defer_local_changes = True
        if config.zk_mode:
            assert transport is not None
            self.fetchers = ReplicaFetcherManager(
                fetcher_config(config),
                self.partitions,
                transport,
                on_high_watermark=self._notify,
                transport_factory=transport_factory,
                topic_metrics=self.metrics.topics,
            )
            self.controller_requests = ControllerRequestHandler(
                node_id=config.node_id,
                partitions=self.partitions,
                publisher=self.publisher,
                fetchers=self.fetchers,
                broker_epoch=lambda: self.broker_epoch_fn(),
                on_partition_change=self._notify,
                truncate_to_hw_on_become_follower=bool(
                    config["trioka.replica.truncate.to.hw.on.become.follower"]
                ),
            )
        self.producer_ids = ProducerIdManager(
            config.node_id,
            controller,
            lambda: self.broker_epoch_fn(),
            timeout_s=int(config["request.timeout.ms"]) / 1000,
        )
        self.fetch_sessions: FetchSessionCache[TopicPartition] = FetchSessionCache(
            int(config["max.incremental.fetch.session.cache.slots"])
        )
        self.bound: list[BoundListener] = []
        """The listeners serving, with their real ports (empty until `run` listens)."""
        self.apis = ApiRouter()
        # Raft mode: the observer's commit lags the controller's answer, so forwarded requests
        # wait for their effect in the image (as ZK mode), not for an offset.
        metadata_handler = self._add_api_handlers(
            None if config.raft_mode else metadata_source, local_controller
        )
        self.group_coordinator, group_apis = make_group_coordinator(
            config,
            partitions=self.partitions,
            notify=self._notify,
            hw_purgatory=self.produce_purgatory,
            cluster=metadata_handler,
            client_id=request_client_id,
        )
        self.apis.add_handlers(group_apis.handlers())
        if self.applier is not None:
            self.applier.on_leadership = self.group_coordinator.on_leadership
        if self.controller_requests is not None:
            self.controller_requests.applier.on_leadership = self.group_coordinator.on_leadership
        if not (config.raft_mode or config.zk_mode):
            self.publisher.apply_changes = self._apply_standalone
        self.server = BrokerServer(
            self.apis,
            # Not a combined node's controller listener: that one serves the quorum APIs.
            config.broker_listeners,
            server_limits(config),
        )
        self.log_cleaner = LogCleaner(
            CleanerConfig.from_broker_config(config),
            log_manager,
            self.partitions.high_watermarks,
            _now_ms,
        )
        self._shutdown = trio.Event()
        self.stopped = trio.Event()
        """Set once run() has shut down gracefully."""

    def _add_api_handlers(
        self, metadata_source: MetadataSource | None, local_controller: ControllerChannel | None
    ) -> MetadataHandler:
        """Register every API family's handlers on `self.apis` (the group APIs come after);
        the Metadata handler is also what the group coordinator sees of the cluster."""
        config = self.config
        forwarder = ControllerForwarder(
            controller=self.controller,
            publisher=self.publisher,
            metadata_source=metadata_source,
            effect_timeout_s=int(config["request.timeout.ms"]) / 1000,
            local_controller=local_controller,
        )
        admin = AdminHandler(
            forwarder,
            TopicDefaults(
                num_partitions=int(config["num.partitions"]),
                replication_factor=int(config["default.replication.factor"]),
                delete_topic_enable=bool(config["delete.topic.enable"]),
            ),
        )
        metadata = MetadataHandler(
            brokers=LiveBrokers(
                node_id=config.node_id,
                rack=config["broker.rack"] or None,
                advertised=config.effective_advertised_listeners,
                raft_mode=config.raft_mode,
                image=self._image,
                bound=lambda: self.bound,
            ),
            image=self._image,
            create_topics=admin.create_topics,
            auto_create_topics=bool(config["auto.create.topics.enable"]),
            cluster_id=self.cluster_id,
            controller_id=self._controller_id,
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
            ),
            ProducerIdHandler(self.producer_ids),
            FetchHandler(
                reader=reader,
                purgatory=self.purgatory,
                sessions=self.fetch_sessions,
                fetch_max_bytes=int(config["fetch.max.bytes"]),
                topic_metrics=self.metrics.topics,
            ),
            OffsetsHandler(self.partitions),
            metadata,
            admin,
            ConfigsHandler(config=config, image=self._image, forward=forwarder.forward),
        ]
        if self.controller_requests is not None:
            families.append(InterBrokerHandler(self.controller_requests, forwarder.relay))
        for family in families:
            self.apis.add_handlers(family.handlers())
        return metadata

    def _image(self) -> MetadataImage:
        return self.publisher.image

    def _controller_id(self) -> int:
        """The controller id Metadata and DescribeCluster report: Raft mode, the image's
        (`_image_controller_id`); ZK mode, the last controller that sent LeaderAndIsr or
        UpdateMetadata; standalone, this broker (its controller is local)."""
        if self.config.raft_mode:
            return self._image_controller_id()
        if self.controller_requests is not None:
            return self.controller_requests.controller_id
        return self.config.node_id

    # -- Raft mode: the image's changes through the LeaderAndIsr code ----------------------

    def live_sources(self, image: MetadataImage) -> dict[int, SourceBroker]:
        """Registered brokers at their inter-broker endpoint: where followers fetch from (as
        KRaft's makeFollowers, a fenced leader's registration still gives its address)."""
        listener = self.config.inter_broker_listener_name
        out = {}
        for broker_id, reg in image.cluster.brokers.items():
            endpoint = reg.endpoint(listener)
            if endpoint is not None and broker_id != self.config.node_id:
                out[broker_id] = SourceBroker(broker_id, endpoint.host, endpoint.port)
        return out

    def _apply_from_image(
        self,
        *,
        deletes: Iterable[TopicPartition],
        leaders: Iterable[PartitionChange],
        followers: Iterable[PartitionChange],
    ) -> None:
        assert self.applier is not None
        image = self.publisher.image
        fresh_leaders = [c for c in leaders if self._fresh(c)]
        fresh_followers = [c for c in followers if self._fresh(c)]
        errors = self.applier.apply_partition_changes(
            deletes=deletes,
            leaders=fresh_leaders,
            followers=fresh_followers,
            live_brokers=self.live_sources(image),
        )
        self._update_ineligible(image)
        failed = {str(tp): code for tp, code in errors.items() if code}
        log.info(
            "applied metadata changes",
            offset=image.provenance.last_offset,
            deleted=len(errors) - len(fresh_leaders) - len(fresh_followers),
            leaders=len(fresh_leaders),
            followers=len(fresh_followers),
            failed=len(failed),
        )
        if failed:
            log.warning("metadata changes failed", partitions=dict(list(failed.items())[:20]))

    def _apply_standalone(
        self,
        *,
        deletes: Iterable[TopicPartition],
        leaders: Iterable[PartitionChange],
        followers: Iterable[PartitionChange],
    ) -> None:
        """Standalone mode: the partition manager applies, the group coordinator follows."""
        deletes, leaders, followers = list(deletes), list(leaders), list(followers)
        self.partitions.apply_leader_and_isr(deletes=deletes, leaders=leaders, followers=followers)
        self.group_coordinator.on_leadership(
            [(c.tp, c.leader_epoch) for c in leaders],
            [(c.tp, c.leader_epoch) for c in followers] + [(tp, None) for tp in deletes],
        )

    def _brokers_changed(self, image: MetadataImage) -> None:
        """A broker registered, was fenced/unfenced or began a controlled shutdown: the
        leaders' ineligible replicas follow (a broker back from fencing may rejoin an ISR),
        and followers waiting for their leader's endpoint start fetching."""
        assert self.applier is not None
        self._update_ineligible(image)
        self.applier.resume_followers(self.live_sources(image))

    def _fresh(self, change: PartitionChange) -> bool:
        assert self.applier is not None
        code = self.applier.check(change)
        if code == 0:
            return True
        if code != ErrorCode.STALE_CONTROLLER_EPOCH:
            log.warning(
                "skipping partition change", topic_partition=str(change.tp), error=code.name
            )
        return False

    def _update_ineligible(self, image: MetadataImage) -> None:
        """Fenced or shutting-down brokers may not join an ISR (KIP-841)."""
        for partition in self.partitions.partitions.values():
            state = partition.state
            if state.is_leader:
                state.ineligible_replicas = frozenset(
                    r for r in state.replicas if not image.cluster.is_usable(r)
                )

    def _image_controller_id(self) -> int:
        """Metadata's controller id in Raft mode: KRaft brokers report a random alive broker
        (clients send controller-bound requests there and it forwards them); trioka reports
        the lowest unfenced broker id, stable between requests, this broker when none."""
        usable = [b for b in self.publisher.image.cluster.brokers if self._usable(b)]
        return min(usable) if usable else self.config.node_id

    def _usable(self, broker_id: int) -> bool:
        return self.publisher.image.cluster.is_usable(broker_id)

    def request_shutdown(self) -> None:
        self._shutdown.set()

    def set_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """ZK mode: a topic's dynamic configs as stored in the cluster (`/config/topics/<t>`,
        read by the wiring on a `/config/changes` notification); the live logs take them and
        DescribeConfigs shows them. Empty removes them. Values are Kafka's strings."""
        self.publisher.replace_image(with_topic_configs(self.publisher.image, topic, configs))

    def _notify(self, tp: object) -> None:
        self.purgatory.notify(tp)  # type: ignore[arg-type]
        self.produce_purgatory.notify(tp)  # type: ignore[arg-type]

    def controlled_shutdown_policy(self) -> ControlledShutdownPolicy:
        c = self.config
        return ControlledShutdownPolicy(
            enable=bool(c["controlled.shutdown.enable"]),
            max_retries=int(c["controlled.shutdown.max.retries"]),
            retry_backoff_s=int(c["controlled.shutdown.retry.backoff.ms"]) / 1000,
            request_timeout_s=int(c["request.timeout.ms"]) / 1000,
        )

    async def controlled_shutdown(self) -> bool | None:
        """Kafka's controlledShutdown (broker.controlled_shutdown): True once the controller
        says no partition is led here, False when every attempt failed (the broker shuts down
        anyway), None when controlled.shutdown.enable is false.

        Failpoint `broker.shutdown.pause_after_controlled_shutdown` (`return(S)`): after a
        success, wait S seconds before going on, so that a test sees the leaders moved while
        this process and its ZooKeeper session are still up (the session closes only after
        the broker stopped): proof that the controlled path, not BrokerChange, moved them."""
        done = await controlled_shutdown(
            self.controller,
            self.config.node_id,
            self.broker_epoch_fn,
            self.controlled_shutdown_policy(),
        )
        hold = failpoints.eval("broker.shutdown.pause_after_controlled_shutdown")
        if done and hold is not None:
            hold_s = float(hold) if isinstance(hold, int | float) and hold is not True else 10.0
            log.warning(
                "failpoint: holding the broker after its controlled shutdown", hold_s=hold_s
            )
            await trio.sleep(hold_s)
        return done

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
        self.metrics.replica_manager.bind(self, self._metrics_view())
        try:
            await self._run(task_status)
        finally:
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

    async def _run(self, task_status: trio.TaskStatus[list[BoundListener]]) -> None:
        async with trio.open_nursery() as nursery:
            loops = trio.CancelScope()

            async def background() -> None:
                with loops:
                    async with trio.open_nursery() as inner:
                        await inner.start(self.group_coordinator.run)
                        if self.metadata_source is not None:
                            await inner.start(self.publisher.run, self.metadata_source)
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
            if self._controlled_shutdown_fn is not None:
                await self._controlled_shutdown_fn()
            elif self.config.zk_mode:
                await self.controlled_shutdown()
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
                "producer id expiration",
                int(c["producer.id.expiration.check.interval.ms"]),
                lambda: self.log_manager.remove_expired_producers(
                    _now_ms(), int(c["producer.id.expiration.ms"])
                ),
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
