"""A controller process (process.roles=controller): one voter of the Raft metadata quorum.

    python -m deploy.node.controller --config controller.toml [--override key=value ...]

Opens the metadata log (raft.disk_log_store.DiskLogStore in <metadata.log.dir>/
__cluster_metadata-0) and its quorum-state file, runs raft.driver.RaftDriver, and serves the
quorum APIs (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of the metadata partition,
FetchSnapshot, DescribeQuorum, ApiVersions) on its listeners through broker.server.BrokerServer.
Peers are reached through deploy.node.transport.PooledTransport at their controller.quorum.voters
address. The QuorumController is deploy.node.controller_services.raft_controller_service over
raft.metadata_log.RaftMetadataLog: it answers BrokerRegistration, BrokerHeartbeat,
UnregisterBroker and the requests brokers forward (CreateTopics, DeleteTopics,
IncrementalAlterConfigs, DescribeConfigs, CreatePartitions, ElectLeaders,
Alter/ListPartitionReassignments, AlterPartition) when active, NOT_CONTROLLER naming the active
controller otherwise.

SIGTERM/SIGINT: a leader resigns (EndQuorumEpoch) before the process exits.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import replace

import structlog
import trio

from broker.authorization import super_users
from broker.config import ListenerSecurity
from broker.sasl import sasl_settings
from broker.server import BrokerServer, ConnectionInfo
from broker.tls import server_contexts
from controller.service.fast_fencing import FastFencing
from controller.service.terms import ControllerService
from deploy.node import gc_policy
from deploy.node.controller_config import ControllerProcessConfig, load_controller_config
from deploy.node.controller_services import raft_controller_service, raft_fast_fencing
from deploy.node.liveness_probe import TcpListenerProbe
from deploy.node.raft_transport import VoterTransport
from deploy.node.runtime import NodeRuntime
from deploy.node.security import controller_security
from deploy.node.startup import exit_on_user_error, run_process, startup_parser
from deploy.node.transport import PooledTransport
from deploy.telemetry.event_loop import watch_event_loop
from deploy.telemetry.logs import configure_logging
from deploy.telemetry.metrics_server import serve_metrics
from deploy.telemetry.settings import TelemetrySettings
from deploy.telemetry.shipper import TelemetryShipper, local_source
from deploy.telemetry.wiring import registered_brokers_bootstrap
from protocol.clock import Clock
from protocol.codec import RequestEnvelope, api_versions_response
from protocol.errors import ErrorCode, KafkaError, TriokaError
from protocol.messages import ApiKey, Response, error_response
from protocol.messages.acls import CreateAclsRequest, DeleteAclsRequest
from protocol.messages.alter_partition import AlterPartitionRequest
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    UnregisterBrokerRequest,
)
from protocol.messages.configs import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from protocol.messages.create_partitions import CreatePartitionsRequest
from protocol.messages.describe_quorum import (
    DescribeQuorumListener,
    DescribeQuorumNode,
    DescribeQuorumRequest,
)
from protocol.messages.elect_leaders import ElectLeadersRequest
from protocol.messages.producer_ids import AllocateProducerIdsRequest
from protocol.messages.reassignments import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
)
from protocol.messages.scram_credentials import AlterUserScramCredentialsRequest
from protocol.messages.topics import CreateTopicsRequest, DeleteTopicsRequest
from raft import wire
from raft.core import Role
from raft.disk_log_store import DiskLogStore
from raft.driver import RaftDriver
from raft.metadata_log import RaftMetadataLog
from raft.quorum_state import FileQuorumStateStore

log = structlog.get_logger("deploy.node.controller")

QUORUM_APIS = {
    ApiKey.API_VERSIONS,
    ApiKey.VOTE,
    ApiKey.BEGIN_QUORUM_EPOCH,
    ApiKey.END_QUORUM_EPOCH,
    ApiKey.FETCH,
    ApiKey.FETCH_SNAPSHOT,
    ApiKey.DESCRIBE_QUORUM,
}
CONTROLLER_REQUESTS = (
    BrokerRegistrationRequest,
    BrokerHeartbeatRequest,
    UnregisterBrokerRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    IncrementalAlterConfigsRequest,
    DescribeConfigsRequest,
    CreatePartitionsRequest,
    ElectLeadersRequest,
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    AlterPartitionRequest,
    AllocateProducerIdsRequest,
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
)
"""What the QuorumController answers (brokers' lifecycle, and the requests they forward)."""
SERVED = QUORUM_APIS | {r.API_KEY for r in CONTROLLER_REQUESTS}


class ControllerHandler:
    """broker.server's RequestHandler for a controller: the quorum APIs (the RaftDriver) and
    the controller's requests (the ControllerService; NOT_CONTROLLER naming the active
    controller on a standby)."""

    def __init__(
        self,
        driver: RaftDriver,
        service: ControllerService,
        fencing: FastFencing | None = None,
        nodes: frozenset[str] | None = None,
    ) -> None:
        self.driver = driver
        self.service = service
        self.fencing = fencing
        """Told which connection each broker's heartbeats came on (fast fencing)."""
        self.nodes = nodes
        """With `authorizer.class.name` set: the principals served (`super.users`: the
        brokers and controllers); everyone else is refused CLUSTER_AUTHORIZATION_FAILED."""

    async def handle(self, request: RequestEnvelope, conn: ConnectionInfo) -> Response | None:
        body = request.body
        if isinstance(body, ApiVersionsRequest):
            full = api_versions_response()
            return replace(full, api_keys=tuple(r for r in full.api_keys if r.api_key in SERVED))
        if self.nodes is not None and conn.principal not in self.nodes:
            # Brokers forward clients' admin requests here without their principal (Kafka's
            # envelope): only the nodes themselves may send anything.
            return error_response(
                type(body), ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
            )
        if isinstance(body, (*wire.QUORUM_WIRE_REQUESTS, DescribeQuorumRequest)):
            await self.driver.started.wait()
            return await self.driver.handle_request(body)
        if isinstance(body, CONTROLLER_REQUESTS):
            await self.driver.started.wait()
            response: Response = await self.service.submit(body)
            if (
                self.fencing is not None
                and isinstance(body, BrokerHeartbeatRequest)
                and response.error_code == 0
            ):
                peer = conn.peer.rpartition(":")[0]
                self.fencing.heard(conn.connection_id, body.broker_id, body.broker_epoch, peer)
            if isinstance(body, BrokerRegistrationRequest) and response.error_code == 0:
                log.info(
                    "broker registered",
                    broker_id=body.broker_id,
                    broker_epoch=response.broker_epoch,  # type: ignore[attr-defined]
                    incarnation_id=body.incarnation_id,
                )
            return response
        return error_response(
            type(body),
            ErrorCode.UNSUPPORTED_VERSION,
            f"{request.api_key.name} is not served by this controller",
        )


def _lost_by(fencing: FastFencing) -> Callable[[ConnectionInfo], None]:
    return lambda info: fencing.lost(info.connection_id)


def voter_endpoints(config: ControllerProcessConfig) -> tuple[DescribeQuorumNode, ...]:
    """The voters' addresses on the first controller listener (controller.quorum.voters)."""
    name = config.controller_listener_names[0]
    return tuple(
        DescribeQuorumNode(
            node_id=v.node_id,
            listeners=(DescribeQuorumListener(name=name, host=v.host, port=v.port),),
        )
        for v in sorted(config.voters.values(), key=lambda v: v.node_id)
    )


async def run_controller(
    config: ControllerProcessConfig,
    *,
    handle_signals: bool = True,
    task_status: trio.TaskStatus[list[object]] = trio.TASK_STATUS_IGNORED,
    runtime: NodeRuntime | None = None,
) -> None:
    """Run one voter until SIGTERM/SIGINT (or cancellation), with /metrics served meanwhile
    when trioka.metrics.port is set ("metrics serving" is logged before "controller started")
    and the telemetry shipper running when trioka.telemetry.enable is on."""
    runtime = runtime if runtime is not None else NodeRuntime()
    shipper = controller_shipper(config, runtime.clock)
    if shipper is not None:
        shipper.capture()  # start-up events are shipped too
    try:
        with serve_metrics(config), watch_event_loop(runtime.clock):
            await _run_controller(
                config,
                shipper,
                runtime,
                handle_signals=handle_signals,
                task_status=task_status,
            )
    finally:
        if shipper is not None:
            shipper.release()


def controller_nodes(config: ListenerSecurity) -> frozenset[str] | None:
    """The principals a controller listener serves when an authorizer is configured (its
    `super.users`); None: everyone (no authorizer)."""
    if not config["authorizer.class.name"]:
        return None
    return super_users(config)


def controller_shipper(config: ControllerProcessConfig, clock: Clock) -> TelemetryShipper | None:
    """The telemetry shipper of a controller process on the process's clock (None when
    trioka.telemetry.enable is off); it ships through trioka.telemetry.bootstrap.servers or the
    registered brokers."""
    settings = TelemetrySettings.from_values(config.values, config.metadata_log_dir)
    if not settings.enable:
        return None
    return TelemetryShipper(settings, local_source("controller", config.node_id), clock=clock)


async def _run_controller(
    config: ControllerProcessConfig,
    shipper: TelemetryShipper | None,
    runtime: NodeRuntime,
    *,
    handle_signals: bool,
    task_status: trio.TaskStatus[list[object]],
) -> None:
    store = await trio.to_thread.run_sync(
        functools.partial(DiskLogStore, config.metadata_log_dir, clock_ms=runtime.clock.wall_ms)
    )
    quorum = FileQuorumStateStore(
        store.directory, voters=tuple(sorted(config.voters)), cluster_id=config.cluster_id or ""
    )
    try:
        security = controller_security(config, config.controller_listener_names[0])
        async with PooledTransport.open(
            client_id=f"trioka-raft-{config.node_id}", security=security
        ) as pooled:
            driver = RaftDriver(
                config.raft_config(),
                store,
                quorum,
                VoterTransport(dict(config.voters), pooled),
                cluster_id=config.cluster_id,
                voter_endpoints=voter_endpoints(config),
                wall_clock_ms=runtime.clock.wall_ms,
            )
            metadata_log = RaftMetadataLog(driver, cluster_id=config.cluster_id or "")
            service = raft_controller_service(
                driver,
                metadata_log,
                config.controller_config(),
                session_timeout_ms=config.broker_session_timeout_ms,
                idle_interval_ms=config.metadata_max_idle_interval_ms,
                snapshot_max_record_bytes=config.snapshot_max_record_bytes,
                cluster_id=config.cluster_id,
            )
            fencing = (
                raft_fast_fencing(service, TcpListenerProbe())
                if config.values["broker.session.fast.fencing.enable"]
                else None
            )
            server = BrokerServer(
                ControllerHandler(driver, service, fencing, controller_nodes(config)),
                config.listeners,
                on_connection_closed=None if fencing is None else _lost_by(fencing),
                tls=server_contexts(config, config.listeners),
                sasl=sasl_settings(config, config.listeners, None),
            )
            async with trio.open_nursery() as nursery:
                await nursery.start(driver.run)
                await nursery.start(service.run)
                if fencing is not None:
                    await nursery.start(fencing.run)
                bound = await nursery.start(server.serve)
                log.info(
                    "controller started",
                    node_id=config.node_id,
                    voters=sorted(config.voters),
                    listeners=[f"{b.name}://{b.host}:{b.port}" for b in bound],
                )
                if shipper is not None:
                    if not shipper.settings.bootstrap_servers:
                        shipper.bootstrap = registered_brokers_bootstrap(
                            lambda: service.state.image.cluster
                        )
                    await nursery.start(shipper.run)
                task_status.started(bound)
                if handle_signals:
                    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                        async for signum in signals:
                            log.info("shutdown signal received", signal=signal.Signals(signum).name)
                            break
                    if driver.role is Role.LEADER:
                        # Graceful resignation: EndQuorumEpoch lets a successor start at once.
                        await driver.resign()
                        with trio.move_on_after(1):
                            while driver.role is Role.LEADER:
                                await driver.role_changed.wait()
                    nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(store.close)


def main(argv: Sequence[str] | None = None) -> None:
    parser = startup_parser("python -m deploy.node.controller", "Run one Raft controller.")
    args = parser.parse_args(argv)
    with exit_on_user_error(config_exit_code=2):
        config = load_controller_config(args.config, args.override)
        configure_logging(role="controller", node_id=config.node_id)
        runtime = NodeRuntime.from_environ(os.environ)
        gc_policy.install()
        run_process(
            functools.partial(run_controller, runtime=runtime),
            config,
            what="the controller",
            user_errors=(TriokaError, KafkaError, OSError),
        )


if __name__ == "__main__":
    main()
