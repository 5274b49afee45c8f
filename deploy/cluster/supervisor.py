"""`trioka cluster`: a local supervisor of a cluster of processes, in Raft mode (N controller
processes + brokers, the default) or ZK mode (one ZooKeeper + brokers).

    state = cluster_up(Path("/tmp/c"), mode="raft", brokers=3, controllers=3)  # secure=True
    await wait_ready(state, within=60)    # a quorum leader, live brokers (secure: the admin login)
    report = await describe_cluster(state.bootstrap)      # controller, brokers, partitions
    kill_node(Path("/tmp/c"), 2, signal.SIGKILL); start_node(Path("/tmp/c"), 2)  # 3001: a controller
    pause_node(dir, 2); resume_node(dir, 2); restart_node(dir, 0)  # SIGSTOP/CONT; 0: ZooKeeper
    cluster_up(dir, netns=True)          # each node in its own network namespace (deploy.cluster.netns;
                                         # cuts: deploy.cluster.network)
    cluster_down(Path("/tmp/c"))                          # brokers, then controllers / ZooKeeper

Layout under the cluster directory:
    cluster.json                 the state file: mode, pids (with their start time), ports, commands
    zookeeper/                   (zk) zoo.cfg, dataDir, zookeeper.log
    controller-<id>/             (raft) controller.toml, metadata/ (its metadata log and
                                 quorum-state file), controller.log; ids 3001..
    broker-<id>/broker.toml      the broker's config; broker-<id>/data its log dir;
                                 broker-<id>/metadata its copy of the metadata log (raft)
    broker-<id>/broker.log       its JSON log lines (stdout and stderr)
    tls/, client.properties      (`--secure`) the dev CA, the nodes' keys and certificates, the
                                 admin's login (deploy.cluster.secure)

Every broker has two listeners: EXTERNAL for clients (the port cluster.json records and
`bootstrap` lists) and INTERNAL for the other brokers and the ZK-mode controller (a port chosen
at creation), so that inter-broker APIs are refused where clients connect.

In Raft mode the controllers' ports are chosen before the first start (every voter must know the
others' addresses: controller.quorum.voters) and a cluster id is generated once (cluster.id of
every process). `--override` settings go to the brokers, and those a controller knows as well
(the shared policy keys: num.partitions, default.replication.factor, log.* defaults, ...) to the
controllers too; `controller_overrides` only to the controllers.

Every process runs in its own session, so it outlives `trioka cluster up` and a Ctrl-C in the
terminal does not reach it; `down` and `kill` find them by the pids in cluster.json and signal a
pid only while /proc says it is still the process that was started (its start time matches),
never by name. Brokers first start on port 0 and the bound port (from their "broker listening"
log event) is written back to broker.toml, so a restart keeps the address. Every process (each
broker and each controller) also serves Prometheus' /metrics (`trioka.metrics.port`), on a free
port at first start, pinned the same way in its broker.toml / controller.toml (from its "metrics
serving" event); cluster.json keeps it and `trioka cluster status` shows it.

This module is the life cycle (up, start again, signal, stop, down); beside it:
deploy.cluster.layout (hosts, ports and namespaces of the nodes), deploy.cluster.node_configs
(node dirs, config files, command lines), deploy.cluster.startup (spawn a node, wait until it
serves, pin its ports; ZooKeeper), deploy.cluster.pids (processes by pid), deploy.cluster.state
(cluster.json), deploy.cluster.status (readiness and the cluster's report).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from deploy.cluster import netns, secure
from deploy.cluster.layout import Layout, cluster_layout, node_names, plan_cluster_network
from deploy.cluster.netns import NetworkPlan
from deploy.cluster.node_configs import (
    broker_zk_settings,
    internal_ports,
    new_brokers,
    new_controllers,
)
from deploy.cluster.pids import node_alive, node_paused, stop_node, wait_for, wait_gone
from deploy.cluster.raft import (
    CONTROLLER_BASE_ID,
    broker_raft_settings,
    controller_part,
    new_cluster_id,
    voters_string,
)
from deploy.cluster.startup import (
    spawn_node,
    start_processes,
    start_zookeeper,
    stop_all_and_destroy,
    wait_listening,
    zk_prefix,
)
from deploy.cluster.state import (
    STATE_FILE,
    ClusterError,
    ClusterState,
    NodeRecord,
    read_state,
    state_path,
    write_state,
)
from deploy.cluster.status import BrokerStatus, ClusterReport, describe_cluster, wait_until_ready
from deploy.node.config import parse_overrides
from protocol.server_configs import heartbeat_interval_ms

ZK_CHROOT = "/trioka"
DEFAULT_SESSION_TIMEOUT_MS = 6000
MODES = ("raft", "zk")

__all__ = [
    "MODES",
    "STATE_FILE",
    "BrokerStatus",
    "ClusterError",
    "ClusterReport",
    "ClusterState",
    "NodeRecord",
    "client_config",
    "cluster_down",
    "cluster_up",
    "controller_client_config",
    "describe_cluster",
    "kill_node",
    "node_log_path",
    "pause_node",
    "read_state",
    "restart_node",
    "resume_node",
    "start_broker",
    "start_node",
    "wait_ready",
    "wait_until_ready",
]


def _refuse_running(base_dir: Path, overrides: object) -> ClusterState | None:
    """The stopped cluster found in `base_dir` (None: none); ClusterError if it runs."""
    if not state_path(base_dir).exists():
        return None
    previous = read_state(base_dir)
    alive = [n.name for n in previous.nodes if node_alive(n)]
    if alive:
        raise ClusterError(
            f"a cluster is already running in {str(base_dir)!r} ({', '.join(alive)}); "
            "stop it first with `trioka cluster down`"
        )
    if overrides:
        raise ClusterError(
            f"{str(base_dir)!r} holds a stopped cluster: it starts again with its own "
            "config; --override applies to a new cluster only"
        )
    return previous


def cluster_up(
    base_dir: Path,
    *,
    mode: str = "raft",
    brokers: int = 3,
    controllers: int = 3,
    host: str = "127.0.0.1",
    base_port: int = 0,
    zookeeper_port: int = 0,
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
    overrides: Sequence[str] | Mapping[str, str] = (),
    controller_overrides: Sequence[str] | Mapping[str, str] = (),
    broker_overrides: Mapping[int, Sequence[str] | Mapping[str, str]] | None = None,
    netns: bool = False,
    network: NetworkPlan | None = None,
    timeout: float = 60.0,
    secure: bool = False,
) -> ClusterState:
    """Start a cluster under `base_dir` (or start again a stopped cluster found there, with its
    mode, ports and data): Raft mode `controllers` controller processes, ZK mode a ZooKeeper,
    then `brokers` broker processes. Returns once every process serves; see `wait_until_ready`
    for "a quorum leader, every broker live". `session_timeout_ms` is how soon a dead broker is
    noticed: zookeeper.session.timeout.ms (zk) or broker.session.timeout.ms (raft).
    `broker_overrides[id]`: settings of broker `id` only (e.g. its advertised.listeners).
    `netns`: every process in its own network namespace, bound to its address there
    (deploy.cluster.netns; `host` is then unused), so that `partition_nodes` can cut it off; `network`
    (implies `netns`): the plan `plan_cluster_network` made beforehand. `secure`: TLS on every
    listener, SCRAM for clients, the authorizer on (deploy.cluster.secure; `wait_ready` then
    creates the admin's login). Stops what it started, and removes the network, if any process
    fails to come up."""
    base_dir = Path(base_dir).resolve()
    extra = _settings(overrides)
    ctl_extra = _settings(controller_overrides)
    per_broker = {int(k): _settings(v) for k, v in (broker_overrides or {}).items()}
    previous = _refuse_running(base_dir, extra or ctl_extra or per_broker)
    if previous is None:
        if mode not in MODES:
            raise ClusterError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
        if brokers < 1:
            raise ClusterError(f"--brokers must be at least 1, not {brokers}")
        if mode == "raft" and controllers < 1:
            raise ClusterError(f"--controllers must be at least 1, not {controllers}")
        unknown = sorted(set(per_broker) - set(range(1, brokers + 1)))
        if unknown:
            raise ClusterError(
                f"broker overrides for brokers {unknown}: the brokers are 1..{brokers}"
            )
    base_dir.mkdir(parents=True, exist_ok=True)
    if previous is not None:
        return _restart_cluster(previous, timeout)
    if netns and network is None:
        network = plan_cluster_network(
            base_dir, mode=mode, brokers=brokers, controllers=controllers
        )
    layout = cluster_layout(
        base_dir, host, network, node_names(mode, brokers, controllers), base_port
    )
    plan = _Plan(base_dir, brokers, layout, extra, per_broker, timeout, secure,
                 internal_ports(layout, brokers))  # fmt: skip
    if mode == "zk":
        return _zk_cluster_up(plan, zookeeper_port, session_timeout_ms)
    return _raft_cluster_up(plan, controllers, session_timeout_ms, ctl_extra)


def _settings(given: Sequence[str] | Mapping[str, str]) -> dict[str, str]:
    return dict(given) if isinstance(given, Mapping) else parse_overrides(given)


def _create_network(layout: Layout) -> None:
    if layout.network is not None:
        netns.create(layout.network)


@dataclass(frozen=True)
class _Plan:
    """A new cluster's brokers: where, with what settings."""

    base_dir: Path
    brokers: int
    layout: Layout
    extra: Mapping[str, str]
    per_broker: Mapping[int, Mapping[str, str]]
    timeout: float
    secure: bool
    internal: Mapping[int, int]

    def new_brokers(self, mode: str, mode_settings: Callable[[Path], Mapping[str, object]],
                    users: str) -> list[NodeRecord]:  # fmt: skip
        def security(name: str, host: str) -> Mapping[str, object]:
            keystore = secure.node_keystore(self.base_dir, name, host)
            return secure.broker_security(self.base_dir, keystore, mode, users)

        return new_brokers(self.base_dir, self.brokers, self.layout, mode_settings, self.extra, self.per_broker, self.internal,
                           security if self.secure else None)  # fmt: skip


def _zk_cluster_up(plan: _Plan, zookeeper_port: int, session_timeout_ms: int) -> ClusterState:
    base_dir, layout, timeout = plan.base_dir, plan.layout, plan.timeout
    zk_host = layout.host_of("zookeeper")
    placeholder = f"{zk_host}:{zookeeper_port or 2181}{ZK_CHROOT}"
    zk_settings = broker_zk_settings(placeholder, session_timeout_ms)
    users = secure.super_users(f"broker-{i}" for i in range(1, plan.brokers + 1))
    nodes = plan.new_brokers("zk", lambda _: zk_settings, users)
    started: list[NodeRecord] = []
    try:
        _create_network(layout)
        zk = start_zookeeper(base_dir, zk_host, layout.zookeeper_port(zookeeper_port), timeout,
                             layout.prefix_of("zookeeper"))  # fmt: skip
        started.append(zk)
        zk_connect = f"{zk.host}:{zk.port}{ZK_CHROOT}"
        for node in nodes:
            config_file = Path(node.dir) / "broker.toml"
            config_file.write_text(config_file.read_text().replace(placeholder, zk_connect))
        state = ClusterState(dir=str(base_dir), zookeeper=zk, brokers=tuple(nodes),
                             zookeeper_connect=zk_connect, overrides=plan.extra, mode="zk",
                             network=layout.network, secure=plan.secure)  # fmt: skip
        return start_processes(state, nodes, timeout, started)
    except BaseException:
        stop_all_and_destroy(started, layout.network)
        raise


def _raft_cluster_up(plan: _Plan, controllers: int, session_timeout_ms: int,
                     ctl_extra: Mapping[str, str]) -> ClusterState:  # fmt: skip
    base_dir, layout, timeout, extra = plan.base_dir, plan.layout, plan.timeout, plan.extra
    brokers = plan.brokers
    cluster_id = new_cluster_id()
    lifecycle = {
        "broker.session.timeout.ms": session_timeout_ms,
        "broker.heartbeat.interval.ms": heartbeat_interval_ms(session_timeout_ms),
    }
    # The controller creates topics in Raft mode: it needs the brokers' replication default.
    ctl_settings = {**lifecycle, "default.replication.factor": min(3, brokers)}
    ctl_extra = {**controller_part(extra), **ctl_extra}
    names = [f"controller-{CONTROLLER_BASE_ID + i}" for i in range(controllers)]
    users = secure.super_users([*names, *(f"broker-{i}" for i in range(1, brokers + 1))])
    internal = [f"{layout.host_of(f'broker-{i}')}:{p}" for i, p in plan.internal.items()]

    def ctl_security(name: str, host: str) -> Mapping[str, object]:
        keystore = secure.node_keystore(base_dir, name, host)
        return secure.controller_security(base_dir, keystore, users, internal)

    ctl_nodes = new_controllers(base_dir, controllers, layout, cluster_id, ctl_settings,
                                ctl_extra, ctl_security if plan.secure else None)  # fmt: skip
    voters = voters_string([(c.node_id, c.host, c.port) for c in ctl_nodes])
    broker_nodes = plan.new_brokers(
        "raft",
        lambda node_dir: broker_raft_settings(voters, node_dir / "metadata", cluster_id,
                                              lifecycle),
        users,
    )  # fmt: skip
    state = ClusterState(dir=str(base_dir), zookeeper=None, brokers=tuple(broker_nodes),
                         overrides=extra, mode="raft", controllers=tuple(ctl_nodes),
                         cluster_id=cluster_id, controller_overrides=ctl_extra,
                         network=layout.network, secure=plan.secure)  # fmt: skip
    started: list[NodeRecord] = []
    try:
        _create_network(layout)
        state = start_processes(state, ctl_nodes, timeout, started)
        return start_processes(state, broker_nodes, timeout, started)
    except BaseException:
        stop_all_and_destroy(started, layout.network)
        raise


async def wait_ready(state: ClusterState, *, within: float = 60.0) -> ClusterReport:
    """`wait_until_ready` for this cluster; a `--secure` one is asked over INTERNAL with the
    admin's certificate, then its admin's SCRAM login is made (once) and tried on every
    broker (deploy.cluster.secure.create_admin)."""
    if not state.secure:
        return await wait_until_ready(state.bootstrap, len(state.brokers), within=within,
                                      controller_bootstrap=state.controller_bootstrap)  # fmt: skip
    node = secure.node_client_config(Path(state.dir))
    report = await wait_until_ready(state.internal_bootstrap, len(state.brokers), within=within,
                                    controller_bootstrap=state.controller_bootstrap,
                                    client=node, controller_client=node)  # fmt: skip
    await secure.create_admin(state, state.internal_bootstrap, within=within)
    return report


def client_config(state: ClusterState) -> dict[str, str]:
    """Client settings for the brokers' recorded ports ({} unless `--secure`: the admin's)."""
    return secure.read_client_properties(Path(state.dir)) if state.secure else {}


def controller_client_config(state: ClusterState) -> dict[str, str]:
    """Client settings for the controllers' listener ({} unless `--secure`)."""
    return secure.node_client_config(Path(state.dir)) if state.secure else {}


def _restart_cluster(state: ClusterState, timeout: float) -> ClusterState:
    """A stopped cluster again: its network (netns) first, without cuts; ZooKeeper or the
    controllers, then the brokers."""
    started: list[NodeRecord] = []
    state = replace(state, cuts=())
    try:
        if state.network is not None:
            netns.create(state.network)
        write_state(state)
        if state.zookeeper is not None:
            base_dir = Path(state.dir)
            zk = start_zookeeper(base_dir, state.zookeeper.host, state.zookeeper.port, timeout,
                                 zk_prefix(state))  # fmt: skip
            started.append(zk)
            state = state.with_node(zk)
        else:
            state = start_processes(state, state.controllers, timeout, started)
        return start_processes(state, state.brokers, timeout, started)
    except BaseException:
        stop_all_and_destroy(started, state.network)
        raise


def start_node(base_dir: Path, node_id: int, *, timeout: float = 30.0) -> NodeRecord:
    """Start one stopped node of the cluster again (same config, port, data): a broker, a
    controller, or ZooKeeper (0). Returns once it serves."""
    state = read_state(Path(base_dir).resolve())
    node = state.node(node_id)
    if node_alive(node):
        raise ClusterError(f"{node.name} is already running (pid {node.pid})")
    if node.name == "zookeeper":
        zk = start_zookeeper(Path(state.dir), node.host, node.port, timeout, zk_prefix(state))
        write_state(state.with_node(zk))
        return zk
    node, offset = spawn_node(node)
    write_state(state.with_node(node))
    try:
        node = wait_listening(node, offset, timeout)
    finally:
        write_state(read_state(Path(state.dir)).with_node(node))
    return node


def start_broker(base_dir: Path, node_id: int, *, timeout: float = 30.0) -> NodeRecord:
    """Start one stopped broker of the cluster again (same config, port and data)."""
    read_state(Path(base_dir).resolve()).broker(node_id)
    return start_node(base_dir, node_id, timeout=timeout)


def kill_node(base_dir: Path, node_id: int, sig: int = signal.SIGKILL) -> NodeRecord:
    """Send `sig` to broker or controller `node_id` (0: ZooKeeper). SIGKILL waits until it is
    gone."""
    state = read_state(Path(base_dir).resolve())
    node = state.node(node_id)
    if not node_alive(node):
        raise ClusterError(f"{node.name} is not running")
    os.kill(node.pid, sig)
    if sig == signal.SIGKILL:
        wait_gone(node, 30.0)
    return node


def _running_node(base_dir: Path, node_id: int) -> NodeRecord:
    node = read_state(Path(base_dir).resolve()).node(node_id)
    if not node_alive(node):
        raise ClusterError(f"{node.name} is not running")
    return node


def pause_node(base_dir: Path, node_id: int) -> NodeRecord:
    """SIGSTOP node `node_id` (0: ZooKeeper): it keeps its sockets but answers nothing, so its
    sessions expire while it believes itself alive (a zombie leader or controller, once
    resumed). Returns once /proc shows it stopped."""
    node = _running_node(base_dir, node_id)
    os.kill(node.pid, signal.SIGSTOP)
    wait_for(lambda: node_paused(node), 5.0, f"{node.name} did not stop")
    return node


def resume_node(base_dir: Path, node_id: int) -> NodeRecord:
    """SIGCONT a node `pause_node` stopped; returns once /proc shows it running again."""
    node = _running_node(base_dir, node_id)
    os.kill(node.pid, signal.SIGCONT)
    wait_for(lambda: not node_paused(node), 5.0, f"{node.name} did not resume")
    return node


def restart_node(base_dir: Path, node_id: int, *, timeout: float = 30.0,
                 start_timeout: float = 60.0) -> NodeRecord:  # fmt: skip
    """Stop node `node_id` gracefully (SIGCONT and SIGTERM, SIGKILL after `timeout` s; a broker
    does its controlled shutdown), then start it with the same config, port and data and wait
    until it serves (`start_node`, within `start_timeout` s). A stopped node is just started."""
    stop_node(read_state(Path(base_dir).resolve()).node(node_id), timeout)
    return start_node(base_dir, node_id, timeout=start_timeout)


def node_log_path(base_dir: Path, node_id: int) -> Path:
    """The log file of node `node_id` (0: ZooKeeper's log4j file): a broker's or controller's
    JSON lines, stdout and stderr included."""
    return Path(read_state(Path(base_dir).resolve()).node(node_id).log)


def cluster_down(
    base_dir: Path,
    *,
    timeout: float = 30.0,
    controller_id: int | None = None,
    active_controller_id: int | None = None,
) -> list[tuple[NodeRecord, str]]:
    """Stop the brokers one by one (ZK mode: the controller's last, so that leadership moves
    only once), then the controllers (the active one last, so no election runs meanwhile) or
    ZooKeeper: SIGTERM, SIGKILL after `timeout` s. The brokers go first: their controlled
    shutdown needs the controller. Returns (node, outcome) pairs."""
    state = read_state(Path(base_dir).resolve())
    order = sorted(state.brokers, key=lambda b: (b.node_id == controller_id, b.node_id))
    outcomes = [(b, stop_node(b, timeout)) for b in order]
    ctl_order = sorted(state.controllers, key=lambda c: (c.node_id == active_controller_id,
                                                          c.node_id))  # fmt: skip
    outcomes += [(c, stop_node(c, timeout)) for c in ctl_order]
    if state.zookeeper is not None:
        outcomes.append((state.zookeeper, stop_node(state.zookeeper, timeout)))
    if state.network is not None:
        # After the processes: a namespace outlives its name while a process runs in it.
        netns.destroy(state.network)
        write_state(replace(read_state(Path(state.dir)), cuts=()))
    return outcomes
