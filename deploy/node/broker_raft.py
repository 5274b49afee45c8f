"""A Raft-mode broker (metadata.mode=raft, process.roles=broker): KRaft's BrokerServer wiring.

- The metadata observer: a RaftDriver (raft.driver) whose node id is not a voter, so the core
  runs it as an observer (it asks a voter who leads, then fetches from the leader), on a
  DiskLogStore + FileQuorumStateStore under `metadata.log.dir`, over `VoterTransport` to the
  voters' `controller.quorum.voters` addresses. `RaftMetadataSource` turns the driver's
  committed entries into `(offset, record)` pairs and its snapshots into images for the
  broker's MetadataPublisher.
- The metadata log stays bounded as KRaft brokers keep theirs: the broker writes a snapshot of
  its own image once more than `metadata.log.max.record.bytes.between.snapshots` bytes of
  records arrived since the last one and deletes the log below it (`MetadataSnapshotter`); when
  it falls behind the leader's log start it fetches the leader's snapshot instead (the core's
  FetchSnapshot), and the store restarts there.
- broker.controller_channel over deploy.node.controller_routes.RaftControllerRoute: requests to
  the active controller = the observer's leader, at its voter address (the voters' addresses are the CONTROLLER
  listener, as in Kafka); unknown leader, NOT_CONTROLLER or no answer -> retried with backoff
  (the refusal's message names the leader; else another voter is asked) for up to
  `controller_wait_s`, then NOT_CONTROLLER.
- broker.lifecycle.BrokerLifecycleManager: registration, heartbeats, the initial catch-up
  (then the publisher applies its first full image and the broker asks to be unfenced),
  controlled shutdown through the heartbeat on SIGTERM, bounded by broker.session.timeout.ms
  (past it the controller fences the broker anyway).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import structlog
import trio

from broker.config import BrokerConfig
from broker.controller_channel import ControllerChannel
from broker.lifecycle import (
    BrokerLifecycle,
    BrokerLifecycleManager,
    Registration,
    registration_listeners,
)
from broker.metadata_feeds.raft_log import RaftMetadataFeed
from broker.metadata_publisher import MetadataPublisher
from broker.node import Broker
from broker.server import BoundListener
from controller.operations import failed_response
from deploy.node.broker_base import (
    log_manager_for,
    registered_endpoints,
    resolve_cluster_id,
    serve_until_stopped,
)
from deploy.node.controller_routes import RaftControllerRoute
from deploy.node.raft_transport import VoterTransport
from deploy.node.runtime import NodeRuntime
from deploy.node.security import controller_security, inter_broker_security
from deploy.node.transport import PooledTransport
from protocol.errors import KafkaError
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import InvalidRecordError, decode_record
from protocol.metadata.snapshot import encode_snapshot, image_from_snapshot
from protocol.metadata.topic_ids import random_uuid
from raft.core import RaftConfig
from raft.disk_log_store import DiskLogStore
from raft.driver import RaftDriver
from raft.log_store import Entry, SnapshotId
from raft.quorum_state import FileQuorumStateStore

log = structlog.get_logger("deploy.node.broker_raft")


class RaftMetadataSource:
    """broker.ports.MetadataSource over the observer driver's listener: committed entries as
    `(offset, record)` (control entries never arrive: the offsets have holes), a loaded
    snapshot as one MetadataImage item that replaces everything queued before it."""

    def __init__(self, cluster_id: str = "") -> None:
        self.cluster_id = cluster_id
        self._pending: list[Any] = []
        self._committed = -1
        self._arrived = trio.Event()
        self.bytes_since_snapshot = 0
        """Record bytes committed since the last snapshot (the snapshotter's trigger)."""
        self.grew = trio.Event()

    async def on_committed(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.offset <= self._committed:
                continue
            self._committed = entry.offset
            self.bytes_since_snapshot += len(entry.data)
            try:
                self._pending.append((entry.offset, decode_record(entry.data)))
            except InvalidRecordError as exc:
                # A record this broker cannot read: skip it loudly rather than stop following.
                log.error("unreadable metadata record skipped", offset=entry.offset, error=str(exc))
        self._wake()

    async def on_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        image = image_from_snapshot(
            data, snapshot_id.end_offset, snapshot_id.epoch, self.cluster_id
        )
        self._pending = [image]
        self._committed = snapshot_id.end_offset - 1
        self.bytes_since_snapshot = 0
        self._wake()

    def _wake(self) -> None:
        self._arrived.set()
        self.grew.set()
        self.grew = trio.Event()

    def committed_offset(self) -> int:
        return self._committed

    async def read_committed(self, after_offset: int) -> Sequence[Any]:
        while True:
            out = [p for p in self._pending if isinstance(p, MetadataImage) or p[0] > after_offset]
            self._pending = []
            if out:
                return out
            self._arrived = trio.Event()
            await self._arrived.wait()


class MetadataSnapshotter:
    """Keeps the broker's metadata log bounded: a snapshot of the publisher's image once more
    than `max_bytes` of records arrived since the last one, then the log below it deleted."""

    def __init__(
        self,
        driver: RaftDriver,
        source: RaftMetadataSource,
        publisher: MetadataPublisher,
        *,
        max_bytes: int,
    ) -> None:
        self.driver = driver
        self.source = source
        self.publisher = publisher
        self.max_bytes = max_bytes

    async def snapshot_once(self) -> SnapshotId | None:
        """A snapshot at the publisher's image, if it is beyond the log start."""
        image = self.publisher.image
        # The image's own offset: while a large step's local changes are applied in slices
        # the image is ahead of `applied_offset`, and a snapshot labelled with the latter
        # would replay records onto an image that has them already.
        end_offset = image.provenance.last_offset + 1
        if end_offset <= self.driver.store.start_offset or end_offset > self.driver.applied_offset:
            return None
        data = encode_snapshot(image)
        snapshot_id = await self.driver.create_snapshot(end_offset, data)
        start = await self.driver.delete_before_snapshot()
        self.source.bytes_since_snapshot = 0
        log.info(
            "metadata snapshot written",
            end_offset=snapshot_id.end_offset,
            epoch=snapshot_id.epoch,
            bytes=len(data),
            log_start_offset=start,
        )
        return snapshot_id

    async def run(self) -> None:
        while True:
            while self.source.bytes_since_snapshot <= self.max_bytes:
                await self.source.grew.wait()
            # The publisher applies what arrived in its own task: let it catch up first.
            await self.publisher.wait_for(self.source.committed_offset())
            try:
                await self.snapshot_once()
            except (ValueError, KafkaError, OSError) as exc:
                log.warning("metadata snapshot failed; retrying later", error=str(exc))
                self.source.bytes_since_snapshot = 0


def raft_config(config: BrokerConfig) -> RaftConfig:
    """The observer's RaftConfig: this broker's id (not a voter) and the quorum."""
    return RaftConfig(
        node_id=config.node_id,
        voters=frozenset(config.voters),
        fetch_timeout_ms=int(config["controller.quorum.fetch.timeout.ms"]),
        request_timeout_ms=int(config["controller.quorum.request.timeout.ms"]),
        retry_backoff_ms=int(config["controller.quorum.retry.backoff.ms"]),
    )


def lifecycle_for(
    config: BrokerConfig,
    cluster_id: str,
    bound: Sequence[BoundListener],
    now_ms: int,
    incarnation_id: str | None = None,
) -> BrokerLifecycle:

    endpoints = registered_endpoints(config, bound)
    return BrokerLifecycle(
        Registration(
            broker_id=config.node_id,
            cluster_id=cluster_id,
            incarnation_id=incarnation_id or random_uuid(),
            listeners=registration_listeners([(e.name, e.host, e.port) for e in endpoints]),
            rack=config["broker.rack"] or None,
        ),
        heartbeat_interval_ms=int(config["broker.heartbeat.interval.ms"]),
        retry_backoff_ms=max(int(config["controller.quorum.retry.backoff.ms"]), 50),
        now_ms=now_ms,
    )


class LifecycleHolder:
    """The broker's lifecycle manager, made once the listeners are bound (registration needs
    their ports) but needed by the broker's controlled-shutdown hook made before that."""

    def __init__(self) -> None:
        self.manager: BrokerLifecycleManager | None = None


def start_lifecycle(
    nursery: trio.Nursery,
    config: BrokerConfig,
    broker: Broker,
    channel: Any,
    bound: Sequence[BoundListener],
    *,
    cluster_id: str,
    request_timeout_s: float,
    holder: LifecycleHolder,
    incarnation_id: str | None = None,
) -> BrokerLifecycleManager:
    """KRaft's BrokerLifecycleManager started: registration and heartbeats over `channel`, the
    publisher reporting what it applied, and the first full image applied once caught up."""

    def on_epoch(epoch: int) -> None:
        broker.broker_epoch = epoch

    manager = BrokerLifecycleManager(
        lifecycle_for(config, cluster_id, bound, int(trio.current_time() * 1000), incarnation_id),
        channel,
        lambda: broker.publisher.applied_offset,
        request_timeout_s=request_timeout_s,
        on_epoch=on_epoch,
    )
    holder.manager = manager
    broker.publisher.on_published = manager.metadata_applied
    nursery.start_soon(manager.run)
    nursery.start_soon(_apply_once_caught_up, broker, manager)
    return manager


async def run_raft_broker(
    config: BrokerConfig,
    *,
    task_status: trio.TaskStatus[list[BoundListener]] = trio.TASK_STATUS_IGNORED,
    handle_signals: bool = True,
    runtime: NodeRuntime | None = None,
) -> None:
    """A Raft-mode broker in KRaft's BrokerServer order: metadata observer, log manager,
    socket server, registration and heartbeats, initial catch-up, then the first full image
    applied and the broker unfenced. SIGTERM: controlled shutdown through the heartbeat, then
    drain and close as the other modes."""
    runtime = runtime if runtime is not None else NodeRuntime()

    cluster_id = resolve_cluster_id(config)
    voters = config.voters
    store = await trio.to_thread.run_sync(
        functools.partial(DiskLogStore, config.metadata_log_dir, clock_ms=runtime.clock.wall_ms)
    )
    quorum = FileQuorumStateStore(
        store.directory, voters=tuple(sorted(voters)), cluster_id=config["cluster.id"] or ""
    )
    log_manager = log_manager_for(config, cluster_id, runtime.clock)
    request_timeout_s = int(config["request.timeout.ms"]) / 1000
    session_timeout_s = int(config["broker.session.timeout.ms"]) / 1000
    try:
        async with trio.open_nursery() as nursery:
            to_controllers = controller_security(config, config.controller_listener_names[0])
            raft_pooled = PooledTransport(
                client_id=f"trioka-raft-{config.node_id}", security=to_controllers
            )
            await nursery.start(raft_pooled.run)
            transport = PooledTransport(
                client_id=f"trioka-broker-{config.node_id}", security=inter_broker_security(config)
            )
            await nursery.start(transport.run)
            controller_pooled = PooledTransport(
                client_id=f"trioka-broker-{config.node_id}-ctl", security=to_controllers
            )
            await nursery.start(controller_pooled.run)
            driver = RaftDriver(
                raft_config(config),
                store,
                quorum,
                VoterTransport(voters, raft_pooled, runtime.failpoints),
                cluster_id=config["cluster.id"] or None,
                wall_clock_ms=runtime.clock.wall_ms,
            )
            source = RaftMetadataSource(cluster_id)
            driver.add_listener(source.on_committed, source.on_snapshot)
            await nursery.start(driver.run)
            channel = ControllerChannel(
                RaftControllerRoute(driver, voters),
                refuse=failed_response,
                transport=controller_pooled,
                # Capped low: the controller elected meanwhile is found within a fraction of
                # a second.
                max_backoff_s=0.25,
                timeout_s=int(config["controller.quorum.request.timeout.ms"]) / 1000,
                controller_wait_s=min(request_timeout_s, session_timeout_s),
            )
            holder = LifecycleHolder()

            async def controlled_shutdown() -> None:
                if holder.manager is not None and bool(config["controlled.shutdown.enable"]):
                    await holder.manager.controlled_shutdown(session_timeout_s)

            broker = Broker(
                config,
                log_manager=log_manager,
                controller=channel,
                feed=RaftMetadataFeed(source, controlled_shutdown=controlled_shutdown),
                cluster_id=cluster_id,
                transport=transport,
                failpoints=runtime.failpoints,
                clock=runtime.clock,
                hold_requests=True,  # until caught up (start_lifecycle)
            )
            bound = await nursery.start(broker.run)
            start_lifecycle(
                nursery,
                config,
                broker,
                channel,
                bound,
                cluster_id=cluster_id,
                request_timeout_s=channel.controller_wait_s + channel.timeout_s,
                holder=holder,
            )
            nursery.start_soon(
                MetadataSnapshotter(
                    driver,
                    source,
                    broker.publisher,
                    max_bytes=int(config["metadata.log.max.record.bytes.between.snapshots"]),
                ).run
            )
            task_status.started(bound)
            await serve_until_stopped(broker, handle_signals)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(store.close)


async def _apply_once_caught_up(broker: Broker, manager: BrokerLifecycleManager) -> None:
    """KRaft's initial catch-up: the first full image is applied once the metadata offset
    reached the broker epoch; then the broker asks to be unfenced."""
    await manager.wait_caught_up()
    broker.publisher.apply_full()
    broker.server.enable_requests()  # ACLs and SCRAM users as the log has them now
    manager.set_ready_to_unfence()
