"""KRaft's combined mode for one node: broker and the metadata quorum's only voter in one process.

`metadata.mode = raft` with `process.roles = ["broker", "controller"]` (the default) runs what
Kafka 4 runs for a single dev node, from wave 1's pieces:

- one RaftDriver whose node id is the sole voter (raft.core elects it at once, also after a
  restart: a restarted leader comes back resigned and stands again) on a DiskLogStore +
  FileQuorumStateStore in `<metadata.log.dir>/__cluster_metadata-0`;
- the QuorumController on it (deploy.node.controller_services.raft_controller_service over
  raft.metadata_log.RaftMetadataLog): it replays, writes, fences, and snapshots the metadata
  log every metadata.log.max.record.bytes.between.snapshots bytes (the only snapshot writer
  here: the broker-only MetadataSnapshotter does not run, both would snapshot one store);
- the broker's MetadataSource over the same driver (deploy.node.broker_raft.RaftMetadataSource,
  another listener: no network fetch), its controller channel the local service
  (`controller_routes.local_controller_channel`), and the BrokerLifecycleManager registering and heartbeating
  through it, so the broker goes fenced -> caught up -> unfenced exactly as a separate one.
- Client listeners serve requests only once the broker is unfenced (KRaft's BrokerServer
  enables request processing after the initial unfence): the sockets are bound first (the
  registration carries their ports) and requests wait at `UnfenceGate`; start-up waits for
  the unfence at most `INITIAL_UNFENCE_TIMEOUT_S`, then fails naming where it stopped.
- When `controller.quorum.voters` names this node, its CONTROLLER listener
  (`controller.listener.names`) serves the quorum APIs (deploy.node.controller's
  ControllerHandler), so `trioka quorum describe` works against it. Never multi-node: a
  combined node with other voters is refused by broker.config.
- SIGTERM: no controlled shutdown through the heartbeat (no other broker could take over, and
  the controller stops with the process); the broker drains and closes as in every mode. A
  restart registers a new incarnation: the controller treats the previous one as expired at
  once (`raft_controller_service(local_broker=...)`), fences it, and unfences the new one.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import structlog
import trio

from broker.config import BrokerConfig
from broker.lifecycle import BrokerLifecycleManager
from broker.metadata_feeds.raft_log import RaftMetadataFeed
from broker.node import Broker
from broker.sasl import sasl_settings
from broker.server import BoundListener, BrokerServer, ConnectionInfo
from broker.tls import server_contexts
from deploy.node.broker_base import (
    controller_config,
    log_manager_for,
    resolve_cluster_id,
    serve_until_stopped,
)
from deploy.node.broker_raft import LifecycleHolder, RaftMetadataSource, start_lifecycle
from deploy.node.controller import ControllerHandler, controller_nodes
from deploy.node.controller_routes import local_controller_channel
from deploy.node.controller_services import raft_controller_service
from deploy.node.runtime import NodeRuntime
from deploy.node.security import inter_broker_security
from deploy.node.transport import PooledTransport
from protocol.codec import RequestEnvelope
from protocol.errors import TriokaError
from protocol.messages import Request, Response
from protocol.messages.describe_quorum import DescribeQuorumListener, DescribeQuorumNode
from protocol.metadata.topic_ids import random_uuid
from raft.core import RaftConfig
from raft.disk_log_store import DiskLogStore
from raft.driver import RaftDriver
from raft.metadata_log import RaftMetadataLog
from raft.quorum_state import FileQuorumStateStore

log = structlog.get_logger("deploy.node.combined")

INITIAL_UNFENCE_TIMEOUT_S = 60.0
"""Start-up gives up when the broker is not unfenced within this (a local controller answers
in milliseconds; loading a large metadata log or partition set takes seconds)."""
IDLE_INTERVAL_MS = 500
"""metadata.max.idle.interval.ms (Kafka's default; no broker key for it)."""
MAX_PARTITIONS_PER_REQUEST = 1_000_000
"""As the standalone broker had it: a single node may create one topic with tens of thousands
of partitions (the Raft controller processes keep controller.config's 10,000, KRaft's limit
of records per operation; here no follower has to take the batch)."""


class UnfenceTimeoutError(TriokaError):
    """The combined node's broker was not unfenced by its own controller in time."""


class UnfenceGate:
    """The broker's request handler until it is unfenced: requests wait (KRaft accepts no
    client requests before the initial unfence), then go to the real handler."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.open = trio.Event()

    async def handle(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        await self.open.wait()
        response: Response | None = await self.handler.handle(request, conn)
        return response


def combined_raft_config(config: BrokerConfig) -> RaftConfig:
    """This node as the only voter (controller.quorum.* timeouts from the broker config)."""
    return RaftConfig(
        node_id=config.node_id,
        voters=frozenset({config.node_id}),
        fetch_timeout_ms=int(config["controller.quorum.fetch.timeout.ms"]),
        request_timeout_ms=int(config["controller.quorum.request.timeout.ms"]),
        retry_backoff_ms=int(config["controller.quorum.retry.backoff.ms"]),
        append_linger_ms=int(config["controller.quorum.append.linger.ms"]),
    )


class _NoPeers:
    """RaftTransport of a sole voter: it never sends (nobody else is in the quorum)."""

    async def send(self, to_node: int, request: Request, *, timeout_s: float) -> Response:
        raise ConnectionError(f"node {to_node} is not in this single-node quorum")


def _voter_endpoints(config: BrokerConfig) -> tuple[DescribeQuorumNode, ...]:
    voter = config.voters.get(config.node_id)
    if voter is None:
        return ()
    name = config.controller_listener_names[0]
    listener = DescribeQuorumListener(name=name, host=voter.host, port=voter.port)
    return (DescribeQuorumNode(node_id=voter.node_id, listeners=(listener,)),)


async def _wait_unfenced(broker: Broker, manager: BrokerLifecycleManager, source: Any) -> None:
    """Until the broker is unfenced and its image holds what was committed then (the
    UnfenceBrokerRecord and the leaders it elected), bounded by INITIAL_UNFENCE_TIMEOUT_S."""
    with trio.move_on_after(INITIAL_UNFENCE_TIMEOUT_S) as scope:
        await manager.wait_for(lambda lc: not lc.is_fenced)
        await broker.publisher.wait_for(source.committed_offset())
    if scope.cancelled_caught:
        lc = manager.lifecycle
        raise UnfenceTimeoutError(
            f"broker {broker.config.node_id} was not unfenced by its own controller within "
            f"{INITIAL_UNFENCE_TIMEOUT_S:g} s (state {lc.state.value}, broker epoch "
            f"{lc.broker_epoch}, caught up {lc.caught_up}, applied metadata offset "
            f"{broker.publisher.applied_offset})"
        )


SINGLE_NODE_DEFAULTS = {
    # Kafka's built-in 3 could never be placed on one broker.
    "offsets.topic.replication.factor": 1,
    # A dev node's first group forms at once instead of after Kafka's built-in 3 s.
    "group.initial.rebalance.delay.ms": 0,
    # The telemetry topics fit the one broker at once (no grace wait for 3 brokers).
    "trioka.telemetry.replication.factor": 1,
}


def single_node_defaults(config: BrokerConfig) -> BrokerConfig:
    """A combined node is a one-broker dev cluster: unless set, the values Kafka's shipped
    server.properties gives these keys for the same reasons (SINGLE_NODE_DEFAULTS)."""
    unset = {k: v for k, v in SINGLE_NODE_DEFAULTS.items() if k not in config.explicit}
    return dataclasses.replace(config, values={**config.values, **unset})


async def run_combined_broker(
    config: BrokerConfig,
    *,
    task_status: trio.TaskStatus[list[BoundListener]] = trio.TASK_STATUS_IGNORED,
    handle_signals: bool = True,
    runtime: NodeRuntime | None = None,
) -> None:
    """Broker + sole controller in one process; `task_status.started(bound client listeners)`
    once the broker is unfenced and serving."""
    runtime = runtime if runtime is not None else NodeRuntime()
    config = single_node_defaults(config)
    cluster_id = resolve_cluster_id(config)
    incarnation_id = random_uuid()
    store = await trio.to_thread.run_sync(
        functools.partial(DiskLogStore, config.metadata_log_dir, clock_ms=runtime.clock.wall_ms)
    )
    quorum = FileQuorumStateStore(store.directory, voters=(config.node_id,), cluster_id=cluster_id)
    log_manager = log_manager_for(config, cluster_id, runtime.clock)
    request_timeout_s = int(config["request.timeout.ms"]) / 1000
    try:
        async with trio.open_nursery() as nursery:
            driver = RaftDriver(
                combined_raft_config(config),
                store,
                quorum,
                _NoPeers(),
                cluster_id=cluster_id,
                voter_endpoints=_voter_endpoints(config),
                wall_clock_ms=runtime.clock.wall_ms,
            )
            metadata_log = RaftMetadataLog(driver, cluster_id=cluster_id)
            service = raft_controller_service(
                driver,
                metadata_log,
                controller_config(config, max_partitions_per_request=MAX_PARTITIONS_PER_REQUEST),
                session_timeout_ms=int(config["broker.session.timeout.ms"]),
                idle_interval_ms=IDLE_INTERVAL_MS,
                snapshot_max_record_bytes=int(
                    config["metadata.log.max.record.bytes.between.snapshots"]
                ),
                cluster_id=cluster_id,
                local_broker=(config.node_id, incarnation_id),
            )
            source = RaftMetadataSource(cluster_id)
            driver.add_listener(source.on_committed, source.on_snapshot)
            await nursery.start(driver.run)
            await nursery.start(service.run)
            if config.controller_listeners:
                controller_server = BrokerServer(
                    ControllerHandler(driver, service, nodes=controller_nodes(config)),
                    config.controller_listeners,
                    tls=server_contexts(config, config.controller_listeners),
                    sasl=sasl_settings(config, config.controller_listeners, None),
                )
                await nursery.start(controller_server.serve)
            channel = local_controller_channel(service.submit, controller_wait_s=request_timeout_s)
            # Raft mode's replica fetchers need a transport (a single node never fetches).
            transport = PooledTransport(
                client_id=f"trioka-broker-{config.node_id}", security=inter_broker_security(config)
            )
            await nursery.start(transport.run)
            broker = Broker(
                config,
                log_manager=log_manager,
                controller=channel,
                feed=RaftMetadataFeed(source),
                cluster_id=cluster_id,
                transport=transport,
                failpoints=runtime.failpoints,
                clock=runtime.clock,
                hold_requests=True,  # until caught up (start_lifecycle)
            )
            gate = UnfenceGate(broker.server.handler)
            broker.server.handler = gate
            bound = await nursery.start(broker.run)
            holder = LifecycleHolder()
            manager = start_lifecycle(
                nursery,
                config,
                broker,
                channel,
                bound,
                cluster_id=cluster_id,
                request_timeout_s=request_timeout_s,
                holder=holder,
                incarnation_id=incarnation_id,
            )
            await _wait_unfenced(broker, manager, source)
            gate.open.set()
            log.info(
                "combined broker ready",
                node_id=config.node_id,
                broker_epoch=broker.broker_epoch,
                metadata_offset=broker.publisher.applied_offset,
            )
            task_status.started(bound)
            await serve_until_stopped(broker, handle_signals)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(store.close)
