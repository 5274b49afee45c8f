"""A ZK-mode broker process (`metadata.mode=zk`): ZooKeeper session, registration, the
controller election it takes part in, config notifications (topic configs, SCRAM
credentials), ACLs (deploy.node.zk_acl_sync), and the broker.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import structlog
import trio

from broker.config import BrokerConfig
from broker.controller_channel import ControllerChannel
from broker.metadata_feeds.zk import ZkMetadataFeed
from broker.node import Broker
from broker.server import BoundListener
from controller.operations import failed_response
from controller.service.zk_mode import ZkMode
from deploy.node.broker_base import (
    controller_config,
    log_manager_for,
    registered_endpoints,
    resolve_cluster_id,
    serve_until_stopped,
)
from deploy.node.controller_routes import ControllerLocator, ZkControllerRoute
from deploy.node.controller_services import zk_controller_service, zk_fast_fencing
from deploy.node.liveness_probe import TcpListenerProbe
from deploy.node.runtime import NodeRuntime
from deploy.node.security import inter_broker_security
from deploy.node.transport import PooledTransport
from deploy.node.zk_acl_sync import ZkAclSync
from deploy.node.zk_watch_rounds import WatchRounds
from protocol.config_defs import ConfigError
from protocol.scram import ScramCredential, ScramMechanism
from zkstore import (
    BrokerIdInUseError,
    BrokerInfo,
    BrokerRegistrar,
    ZkClient,
    ensure_persistent_paths,
    get_or_create_cluster_id,
)
from zkstore.znodes import (
    BrokerIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigEntityZNode,
    UserScramCredentialsZNode,
    ZNodeDecodeError,
    desanitize,
)

log = structlog.get_logger("deploy.node.broker")


FORWARDED_CLIENT_ID = "trioka-forwarded"
"""client_id of requests a broker forwards to the active controller: the receiver answers them
itself or with NOT_CONTROLLER, never forwards them again (at most one hop)."""


ZK_GIL_SWITCH_INTERVAL_S = 0.001
"""sys.setswitchinterval in a ZK-mode broker (see run_zk_broker; bench/run_failover.py)."""


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


SetTopicConfigs = Callable[[str, dict[str, str]], None]
SetScramCredentials = Callable[[str, dict[int, ScramCredential]], None]


class ZkConfigSync(WatchRounds):
    """Kafka's ZkConfigManager on a ZK-mode broker: dynamic configs from ZooKeeper into its
    metadata image, read at start and on new /config/changes/config_change_<seq> notifications
    (children watch), each naming one entity.

    - Topic configs: every /config/topics/<t> at start, a new topic's config as soon as its
      znode appears (children watch on /config/topics), and the topics notifications name;
      they reach the live logs through `set_topic_configs` (ZkMetadataFeed.set_topic_configs,
      min.insync.replicas included).
    - SCRAM credentials: every /config/users/<user> at start and the users notifications name
      (`users/<sanitized name>`), through `set_scram_credentials`
      (ZkMetadataFeed.set_scram_credentials). An unreadable znode is logged and leaves the
      user as it was, as Kafka's notification handler does."""

    WHAT = "configs"

    def __init__(
        self,
        zk: ZkClient,
        set_topic_configs: SetTopicConfigs,
        set_scram_credentials: SetScramCredentials,
        *,
        retry_backoff_s: float = 1.0,
    ) -> None:
        super().__init__(retry_backoff_s)
        self.zk = zk
        self.set_topic_configs = set_topic_configs
        self.set_scram_credentials = set_scram_credentials
        self.configs: dict[str, dict[str, str]] = {}
        self.credentials: dict[str, dict[int, ScramCredential]] = {}
        self._last_change = -1
        self._synced = False
        """Set once a whole round succeeded: later rounds read only what changed."""

    def _apply(self, topic: str, configs: dict[str, str]) -> None:
        if self.configs.get(topic, {}) == configs:
            return
        if configs:
            self.configs[topic] = configs
        else:
            self.configs.pop(topic, None)
        self.set_topic_configs(topic, configs)
        log.info("topic config from zookeeper", topic=topic, configs=configs)

    def _apply_user(self, user: str, credentials: dict[int, ScramCredential]) -> None:
        if self.credentials.get(user, {}) == credentials:
            return
        if credentials:
            self.credentials[user] = credentials
        else:
            self.credentials.pop(user, None)
        self.set_scram_credentials(user, credentials)
        mechanisms = [ScramMechanism(m).mechanism_name for m in sorted(credentials)]
        log.info("scram credentials from zookeeper", user=user, mechanisms=mechanisms)

    async def _read(self, topics: Sequence[str]) -> None:
        paths = [ConfigEntityZNode.path("topics", t) for t in topics]
        for topic, path, found in zip(topics, paths, await self.zk.get_many(paths), strict=True):
            self._apply(topic, ConfigEntityZNode.decode(found[0], path) if found else {})

    async def _read_users(self, names: Sequence[str]) -> None:
        """`names`: znode names (sanitized user names)."""
        paths = [ConfigEntityZNode.path(UserScramCredentialsZNode.ENTITY_TYPE, n) for n in names]
        for name, path, found in zip(names, paths, await self.zk.get_many(paths), strict=True):
            try:
                user = desanitize(name, path)
                credentials = UserScramCredentialsZNode.decode(found[0], path) if found else {}
            except ZNodeDecodeError as exc:
                log.error("unreadable scram credentials in zookeeper", error=str(exc))
                continue
            self._apply_user(user, credentials)

    async def _notified(self, numbered: Sequence[tuple[int, str]]) -> dict[str, set[str]]:
        """Entity type -> names of the topics and users the notifications after the last round
        name."""
        paths = [
            f"{ConfigEntityChangeNotificationZNode.PATH}/{name}"
            for seq, name in numbered
            if seq > self._last_change
        ]
        named: dict[str, set[str]] = {"topics": set(), UserScramCredentialsZNode.ENTITY_TYPE: set()}
        for found in await self.zk.get_many(paths):
            if found is None:
                continue  # purged meanwhile
            entity = ConfigEntityChangeNotificationSequenceZNode.decode(found[0])
            kind, _, name = entity.partition("/")
            if kind in named and name:
                named[kind].add(name)
        return named

    async def sync_once(self) -> None:
        """Read what changed since the last round and set the watches again."""
        topics = await self.zk.get_children("/config/topics", watch=self._watch)
        changes = await self.zk.get_children(
            ConfigEntityChangeNotificationZNode.PATH, watch=self._watch
        )
        prefix = ConfigEntityChangeNotificationSequenceZNode.SEQUENCE_PREFIX
        numbered = sorted(
            (int(c[len(prefix) :]), c)
            for c in changes
            if c.startswith(prefix) and c[len(prefix) :].isdigit()
        )
        if self._synced:
            named = await self._notified(numbered)
            wanted = (set(topics) - set(self.configs)) | named["topics"]
            users = named[UserScramCredentialsZNode.ENTITY_TYPE]
        else:
            # Listed after the notifications: whatever they name is read below.
            wanted = set(topics)
            users = set(await self.zk.get_children("/config/users"))
        wanted |= set(self.configs) - set(topics)  # removed: read as absent
        await self._read(sorted(wanted))
        await self._read_users(sorted(users))
        if numbered:
            self._last_change = max(self._last_change, numbered[-1][0])
        self._synced = True


async def _connect_zookeeper(config: BrokerConfig) -> ZkClient:
    zk = ZkClient(
        str(config["zookeeper.connect"]),
        session_timeout_s=int(config["zookeeper.session.timeout.ms"]) / 1000,
        connection_timeout_s=config.zookeeper_connection_timeout_ms / 1000,
    )
    try:
        await zk.start()
    except Exception as exc:  # kazoo's timeout and connection errors
        raise ConfigError(
            f"zookeeper.connect: cannot reach ZooKeeper at {config['zookeeper.connect']!r} "
            f"within zookeeper.connection.timeout.ms: {exc or type(exc).__name__}"
        ) from None
    return zk


async def _register(
    nursery: trio.Nursery, registrar: BrokerRegistrar, session_timeout_s: float
) -> int:
    """Register in /brokers/ids. A broker restarted soon after a crash finds its previous
    registration still held by the old session: wait (up to twice the session timeout) for
    ZooKeeper to expire it rather than fail the start."""
    deadline = trio.current_time() + 2 * session_timeout_s
    while True:
        try:
            epoch: int = await nursery.start(registrar.run)
            return epoch
        except BrokerIdInUseError as exc:
            if trio.current_time() > deadline:
                raise
            log.info("waiting for the previous registration to expire", reason=str(exc))
            await trio.sleep(min(0.5, session_timeout_s / 4))


async def run_zk_broker(
    config: BrokerConfig,
    *,
    task_status: trio.TaskStatus[list[BoundListener]] = trio.TASK_STATUS_IGNORED,
    handle_signals: bool = True,
    runtime: NodeRuntime | None = None,
) -> None:
    """A ZK-mode broker (metadata.mode=zk), in Kafka's KafkaServer.startup order: ZooKeeper
    session and persistent paths, cluster id from /cluster/id, log manager, the socket server,
    the registration in /brokers/ids (its czxid is the broker epoch), then the controller
    candidate. SIGTERM: controlled shutdown (in the broker), drain, then the ZooKeeper session
    is closed, which removes the registration at once."""
    runtime = runtime if runtime is not None else NodeRuntime()
    session_timeout_s = int(config["zookeeper.session.timeout.ms"]) / 1000
    # kazoo reads ZooKeeper's answers in its own threads, which wait for the GIL while the trio
    # thread is busy (replicating thousands of partitions). 25,000 znode reads with a CPU-busy
    # trio thread: 26-96 s at Python's default 5 ms switch interval, ~18 s at 1 ms (~6 s idle).
    sys.setswitchinterval(ZK_GIL_SWITCH_INTERVAL_S)
    zk = await _connect_zookeeper(config)
    try:
        await ensure_persistent_paths(zk)
        cluster_id = await get_or_create_cluster_id(zk, resolve_cluster_id(config))
        log_manager = log_manager_for(config, cluster_id, runtime.clock)
        listener = config.inter_broker_listener_name
        request_timeout_s = int(config["request.timeout.ms"]) / 1000
        async with trio.open_nursery() as nursery:
            transport = PooledTransport(
                client_id=f"trioka-broker-{config.node_id}", security=inter_broker_security(config)
            )
            await nursery.start(transport.run)
            forwarding = PooledTransport(
                client_id=FORWARDED_CLIENT_ID, security=inter_broker_security(config)
            )
            await nursery.start(forwarding.run)
            service = zk_controller_service(
                zk,
                config.node_id,
                transport,
                # ZooKeeper writes are split under jute.maxbuffer, so no batch limit applies.
                config=controller_config(config, max_partitions_per_request=1_000_000),
                inter_broker_listener=listener,
                failpoints=runtime.failpoints,
                clock=runtime.clock,
            )
            if config["broker.session.fast.fencing.enable"]:
                assert isinstance(service.mode, ZkMode)
                fencing = zk_fast_fencing(
                    service, service.mode, TcpListenerProbe(), session_timeout_s=session_timeout_s
                )
                transport.on_peer_closed = fencing.lost_address
                await nursery.start(fencing.run)
            channel = ControllerChannel(
                ZkControllerRoute(service, zk_broker_locator(zk, listener)),
                refuse=failed_response,
                transport=forwarding,
                timeout_s=request_timeout_s,
                # A new controller is elected once the old one's session expired.
                controller_wait_s=min(request_timeout_s, 1.5 * session_timeout_s),
            )
            feed = ZkMetadataFeed()
            broker = Broker(
                config,
                log_manager=log_manager,
                controller=channel,
                feed=feed,
                cluster_id=cluster_id,
                transport=transport,
                local_controller=service,
                failpoints=runtime.failpoints,
                clock=runtime.clock,
                hold_requests=True,  # until the ACLs and SCRAM users are read (below)
            )
            bound = await nursery.start(broker.run)
            registrar = BrokerRegistrar(
                zk,
                BrokerInfo(
                    broker_id=config.node_id,
                    endpoints=registered_endpoints(config, bound),
                    rack=config["broker.rack"] or None,
                ),
                clock_ms=runtime.clock.wall_ms,
            )

            def on_registered(epoch: int) -> None:
                broker.broker_epoch = epoch

            registrar.on_registered(on_registered)
            sync = ZkConfigSync(zk, feed.set_topic_configs, feed.set_scram_credentials)
            await nursery.start(sync.run)
            await nursery.start(ZkAclSync(zk, feed.set_resource_acls).run)
            broker.server.enable_requests()
            await _register(nursery, registrar, session_timeout_s)
            await nursery.start(service.run)
            task_status.started(bound)
            await serve_until_stopped(broker, handle_signals)
            # The broker shuts down gracefully first; then the controller and the rest stop.
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await zk.close()
