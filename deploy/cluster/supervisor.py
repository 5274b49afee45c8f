"""`trioka cluster`: a local supervisor of a cluster of processes, in Raft mode (N controller
processes + brokers, the default) or ZK mode (one ZooKeeper + brokers).

    state = cluster_up(Path("/tmp/c"), mode="raft", brokers=3, controllers=3)
    await wait_until_ready(state.bootstrap, 3, within=60,
                           controller_bootstrap=state.controller_bootstrap)  # leader + live brokers
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
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from deploy.cluster import netns
from deploy.cluster.netns import NetworkPlan
from deploy.cluster.raft import (
    CONTROLLER_BASE_ID,
    broker_raft_lines,
    controller_part,
    controller_toml,
    new_cluster_id,
    voters_string,
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
from deploy.cluster.zookeeper import ZooKeeperProcess, free_port
from deploy.node.config import load_broker_config, parse_overrides
from deploy.node.controller_config import load_controller_config
from protocol.server_configs import heartbeat_interval_ms

ZK_CHROOT = "/trioka"
# ZooKeeper's tick bounds the session timeouts it grants ([2, 20] ticks): 500 ms allows the
# short sessions of a local cluster, where a killed broker should be noticed in seconds.
ZK_TICK_TIME_MS = 500
DEFAULT_SESSION_TIMEOUT_MS = 6000
MODES = ("raft", "zk")
POLL_S = 0.05
# In a node's own network namespace the ports are its own: Kafka's defaults.
NETNS_BROKER_PORT = 9092
NETNS_CONTROLLER_PORT = 9093
NETNS_ZOOKEEPER_PORT = 2181

__all__ = [
    "MODES",
    "STATE_FILE",
    "BrokerStatus",
    "ClusterError",
    "ClusterReport",
    "ClusterState",
    "NodeRecord",
    "cluster_down",
    "cluster_up",
    "describe_cluster",
    "kill_node",
    "node_alive",
    "node_log_path",
    "node_paused",
    "pause_node",
    "plan_cluster_network",
    "read_state",
    "restart_node",
    "resume_node",
    "start_broker",
    "start_node",
    "wait_until_ready",
]


# -- processes --------------------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time) from /proc/<pid>/stat (fields 3 and 22); None when there is no such
    process or it has exited (a zombie not yet reaped by its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None
    return fields[0], int(fields[19])


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (start time); None when there is no such process."""
    stat = _proc_stat(pid)
    return stat[1] if stat else None


def node_alive(node: NodeRecord) -> bool:
    """True while the process started for `node` is running (not a reused pid)."""
    return node.pid > 0 and _start_ticks(node.pid) == node.start_ticks


def node_paused(node: NodeRecord) -> bool:
    """True while the process started for `node` is stopped by a signal (/proc state T), as
    `pause_node` leaves it."""
    stat = _proc_stat(node.pid) if node.pid > 0 else None
    return stat is not None and stat[1] == node.start_ticks and stat[0] == "T"


def _reap(pid: int) -> None:
    # Our own child (started in this process) would stay a zombie until reaped.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _wait_gone(node: NodeRecord, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while node_alive(node):
        _reap(node.pid)
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)  # polling a condition under a deadline
    return True


def stop_node(node: NodeRecord, timeout: float = 30.0) -> str:
    """SIGTERM (after SIGCONT, in case it is paused), then SIGKILL after `timeout` s.
    Returns "stopped", "killed" or "not running"."""
    if not node_alive(node):
        return "not running"
    with contextlib.suppress(ProcessLookupError):
        os.kill(node.pid, signal.SIGCONT)
        os.kill(node.pid, signal.SIGTERM)
    if _wait_gone(node, timeout):
        return "stopped"
    with contextlib.suppress(ProcessLookupError):
        os.kill(node.pid, signal.SIGKILL)
    _wait_gone(node, 30.0)
    return "killed"


def _spawn(command: Sequence[str], log_file: Path, cwd: Path, env: Mapping[str, str]) -> int:
    with log_file.open("ab") as out:
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    # Popen would warn that the child outlives it: the supervisor hands it over on purpose.
    proc.returncode = 0
    return proc.pid


# -- ZooKeeper --------------------------------------------------------------------------------


def _start_zookeeper(base_dir: Path, host: str, port: int, timeout: float,
                     exec_prefix: Sequence[str] = ()) -> NodeRecord:  # fmt: skip
    zk = ZooKeeperProcess(base_dir / "zookeeper", host=host, port=port,
                          tick_time_ms=ZK_TICK_TIME_MS, exec_prefix=exec_prefix)  # fmt: skip
    zk.start(timeout)
    pid = zk.pid
    zk.proc.returncode = 0  # type: ignore[union-attr]  # handed over, as in _spawn
    return NodeRecord(
        name="zookeeper",
        node_id=0,
        host=zk.host,
        port=zk.port,
        dir=str(zk.tmp_dir),
        log=str(zk.log_file),
        command=tuple(zk.command(zk.conf_dir / "zoo.cfg")),
        pid=pid,
        start_ticks=_start_ticks(pid) or 0,
    )


# -- where the nodes live ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """Every node on one host address, or (`netns`) each in its own network namespace with its
    own address, where Kafka's default ports are free: 9092 brokers, 9093 controllers, 2181."""

    host: str
    network: NetworkPlan | None = None

    def host_of(self, name: str) -> str:
        return self.network.address(name) if self.network else self.host

    def prefix_of(self, name: str) -> tuple[str, ...]:
        return tuple(netns.exec_prefix(self.network, name)) if self.network else ()

    def broker_port(self, base_port: int, node_id: int) -> int:
        if base_port:
            return base_port + node_id - 1
        return NETNS_BROKER_PORT if self.network else 0

    def controller_port(self, name: str) -> int:
        return NETNS_CONTROLLER_PORT if self.network else free_port(self.host)

    def zookeeper_port(self, port: int) -> int:
        return port or (NETNS_ZOOKEEPER_PORT if self.network else 0)


def plan_cluster_network(base_dir: Path, *, mode: str = "raft", brokers: int = 3,
                         controllers: int = 3) -> NetworkPlan:  # fmt: skip
    """The network `cluster_up(base_dir, netns=True, ...)` would make for this cluster, known
    before it starts (e.g. to put proxies on `plan.host_address` and name them in
    `broker_overrides`' advertised.listeners); pass it back as `cluster_up(network=plan)`.
    ClusterError when this machine cannot run network namespaces."""
    reason = netns.available()
    if reason is not None:
        raise ClusterError(f"--netns is not possible here: {reason}")
    names = _node_names(mode, brokers, controllers)
    return netns.plan_network(Path(base_dir).resolve(), names, netns.used_networks())


def _layout(
    base_dir: Path, host: str, network: NetworkPlan | None, names: Sequence[str]
) -> _Layout:
    if network is not None and list(network.nodes) != list(names):
        raise ClusterError(
            f"the network plan is for nodes {list(network.nodes)}, not {list(names)} "
            "(plan_cluster_network with this cluster's mode, brokers and controllers)"
        )
    return _Layout(host, network)


def _node_names(mode: str, brokers: int, controllers: int) -> list[str]:
    first = ["zookeeper"] if mode == "zk" else [
        f"controller-{CONTROLLER_BASE_ID + i}" for i in range(controllers)
    ]  # fmt: skip
    return [*first, *(f"broker-{i}" for i in range(1, brokers + 1))]


# -- brokers and controllers ------------------------------------------------------------------


def _broker_toml(node_id: int, host: str, port: int, data_dir: Path, replication_factor: int,
                 mode_lines: str, in_netns: bool) -> str:  # fmt: skip
    # In a namespace /metrics binds the node's address too (reachable from the host).
    metrics_host = f'"trioka.metrics.host" = {json.dumps(host)}\n' if in_netns else ""
    return (
        f'"node.id" = {node_id}\n'
        f'"listeners" = ["PLAINTEXT://{host}:{port}"]\n'
        f'"log.dirs" = [{json.dumps(str(data_dir))}]\n'
        f'"default.replication.factor" = {replication_factor}\n'
        # As Kafka's shipped server.properties (1 there): the offsets topic fits the cluster.
        f'"offsets.topic.replication.factor" = {replication_factor}\n'
        f'"trioka.telemetry.replication.factor" = {replication_factor}\n'
        # Kafka's shipped server.properties too: a dev cluster's first group forms at once.
        '"group.initial.rebalance.delay.ms" = 0\n'
        # A free port at first start, pinned afterwards like the listener's (_pin_port).
        '"trioka.metrics.port" = 0\n' + metrics_host + mode_lines
    )


def _zk_lines(zk_connect: str, session_timeout_ms: int) -> str:
    return (
        '"metadata.mode" = "zk"\n'
        f'"zookeeper.connect" = {json.dumps(zk_connect)}\n'
        f'"zookeeper.session.timeout.ms" = {session_timeout_ms}\n'
    )


def _command(module: str, config_file: Path, overrides: Mapping[str, str]) -> tuple[str, ...]:
    cmd = [sys.executable, "-m", module, "--config", str(config_file)]
    for key, value in overrides.items():
        cmd += ["--override", f"{key}={value}"]
    return tuple(cmd)


def _broker_command(config_file: Path, overrides: Mapping[str, str]) -> tuple[str, ...]:
    return _command("deploy.node.broker", config_file, overrides)


def _log_events(path: Path, offset: int) -> list[dict[str, Any]]:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return []
    out = []
    for line in data.splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict):
                out.append(event)
    return out


def _log_tail(path: str | Path, lines: int = 20) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _spawn_node(node: NodeRecord) -> tuple[NodeRecord, int]:
    log_file = Path(node.log)
    offset = log_file.stat().st_size if log_file.exists() else 0
    env = {**os.environ, "TRIOKA_LOG_FORMAT": "json"}
    pid = _spawn(node.command, log_file, Path(node.dir), env)
    return replace(node, pid=pid, start_ticks=_start_ticks(pid) or 0), offset


def _wait_event(
    node: NodeRecord, log_offset: int, name: str, timeout: float
) -> list[dict[str, Any]]:
    """Poll the node's JSON log until the event `name` appears; returns the events up to it.
    ClusterError (with the log's tail) if the process exits or the deadline passes."""
    what = node.name.replace("-", " ")
    deadline = time.monotonic() + timeout
    while True:
        events = _log_events(Path(node.log), log_offset)
        for i, event in enumerate(events):
            if event.get("event") == name:
                return events[: i + 1]
        if not node_alive(node):
            _reap(node.pid)
            raise ClusterError(
                f"{what} exited while starting; last lines of {node.log}:\n" + _log_tail(node.log)
            )
        if time.monotonic() > deadline:
            raise ClusterError(
                f"{what} did not log {name!r} within {timeout:g} s; last lines of "
                f"{node.log}:\n" + _log_tail(node.log)
            )
        time.sleep(POLL_S)  # polling a condition under a deadline


def _wait_listening(node: NodeRecord, log_offset: int, timeout: float) -> NodeRecord:
    """Wait until the node serves: a broker's "broker listening" event (returns the node with
    its bound port), a controller's "controller started" (its port was chosen before it
    started); both with their /metrics port (each logs "metrics serving" before it listens)."""
    ready = "controller started" if node.is_controller else "broker listening"
    events = _wait_event(node, log_offset, ready, timeout)
    metrics_port = node.metrics_port
    for event in events:
        if event.get("event") == "metrics serving":
            metrics_port = int(event["port"])
    port = node.port if node.is_controller else int(events[-1]["port"])
    return replace(node, port=port, metrics_port=metrics_port)


def _pin_port(node: NodeRecord) -> None:
    """Write the bound ports into broker.toml (a controller's /metrics port into its
    controller.toml), so that a restart listens where clients (and scrapers) look."""
    config_file = Path(node.dir) / ("controller.toml" if node.is_controller else "broker.toml")
    text = config_file.read_text()
    new = []
    for line in text.splitlines():
        if line.startswith('"listeners"') and not node.is_controller:
            line = f'"listeners" = ["PLAINTEXT://{node.host}:{node.port}"]'
        elif line.startswith('"trioka.metrics.port"') and node.metrics_port > 0:
            line = f'"trioka.metrics.port" = {node.metrics_port}'
        new.append(line)
    config_file.write_text("\n".join(new) + "\n")


def _new_brokers(base_dir: Path, count: int, layout: _Layout, base_port: int,
                 mode_lines: Callable[[Path], str], extra: Mapping[str, str],
                 per_broker: Mapping[int, Mapping[str, str]]) -> list[NodeRecord]:  # fmt: skip
    """Broker dirs with their broker.toml; bad overrides are refused before anything starts.
    `per_broker[id]` overrides go to that broker only, after the cluster-wide ones."""
    nodes = []
    for node_id in range(1, count + 1):
        name = f"broker-{node_id}"
        node_dir = base_dir / name
        node_dir.mkdir(parents=True, exist_ok=True)
        host, port = layout.host_of(name), layout.broker_port(base_port, node_id)
        toml = _broker_toml(node_id, host, port, node_dir / "data", min(3, count),
                            mode_lines(node_dir), layout.network is not None)  # fmt: skip
        (node_dir / "broker.toml").write_text(toml)
        settings = {**extra, **per_broker.get(node_id, {})}
        load_broker_config(node_dir / "broker.toml", settings)
        nodes.append(
            NodeRecord(
                name=name,
                node_id=node_id,
                host=host,
                port=port,
                dir=str(node_dir),
                log=str(node_dir / "broker.log"),
                command=(
                    *layout.prefix_of(name),
                    *_broker_command(node_dir / "broker.toml", settings),
                ),
            )
        )
    return nodes


def _new_controllers(base_dir: Path, count: int, layout: _Layout, cluster_id: str,
                     settings: Mapping[str, object],
                     extra: Mapping[str, str]) -> list[NodeRecord]:  # fmt: skip
    """Controller dirs with their controller.toml (ids 3001.., free ports chosen now)."""
    ids = [CONTROLLER_BASE_ID + i for i in range(count)]
    hosts = {i: layout.host_of(f"controller-{i}") for i in ids}
    ports = {i: layout.controller_port(f"controller-{i}") for i in ids}
    voters = voters_string([(i, hosts[i], ports[i]) for i in ids])
    nodes = []
    for node_id in ids:
        host = hosts[node_id]
        node_dir = base_dir / f"controller-{node_id}"
        node_dir.mkdir(parents=True, exist_ok=True)
        config_file = node_dir / "controller.toml"
        # A free /metrics port at first start, pinned afterwards (_pin_port); in a namespace
        # it binds the node's address (reachable from the host).
        metrics: dict[str, object] = {"trioka.metrics.port": 0}
        if layout.network is not None:
            metrics["trioka.metrics.host"] = host
        config_file.write_text(
            controller_toml(
                node_id, host, ports[node_id], voters, node_dir / "metadata", cluster_id,
                {**metrics, **settings},
            )
        )  # fmt: skip
        load_controller_config(config_file, extra)
        nodes.append(
            NodeRecord(
                name=f"controller-{node_id}",
                node_id=node_id,
                host=host,
                port=ports[node_id],
                dir=str(node_dir),
                log=str(node_dir / "controller.log"),
                command=(
                    *layout.prefix_of(f"controller-{node_id}"),
                    *_command("deploy.node.controller", config_file, extra),
                ),
            )
        )
    return nodes


def _start_processes(state: ClusterState, nodes: Sequence[NodeRecord], timeout: float,
                     started: list[NodeRecord]) -> ClusterState:  # fmt: skip
    """Spawn `nodes` together, then wait for each to serve; pins the brokers' bound ports."""
    spawned = []
    for node in nodes:
        node, offset = _spawn_node(node)
        started.append(node)
        spawned.append((node, offset))
        state = state.with_node(node)
    write_state(state)
    deadline = time.monotonic() + timeout
    for node, offset in spawned:
        listening = _wait_listening(node, offset, max(0.1, deadline - time.monotonic()))
        if listening.metrics_port != node.metrics_port or (
            not node.is_controller and (listening.port != node.port or node.port == 0)
        ):
            _pin_port(listening)
        state = state.with_node(listening)
    write_state(state)
    return state


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
) -> ClusterState:
    """Start a cluster under `base_dir` (or start again a stopped cluster found there, with its
    mode, ports and data): Raft mode `controllers` controller processes, ZK mode a ZooKeeper,
    then `brokers` broker processes. Returns once every process serves; see `wait_until_ready`
    for "a quorum leader, every broker live". `session_timeout_ms` is how soon a dead broker is
    noticed: zookeeper.session.timeout.ms (zk) or broker.session.timeout.ms (raft).
    `broker_overrides[id]`: settings of broker `id` only (e.g. its advertised.listeners).
    `netns`: every process in its own network namespace, bound to its address there
    (deploy.cluster.netns; `host` is then unused), so that `partition_nodes` can cut it off; `network`
    (implies `netns`): the plan `plan_cluster_network` made beforehand. Stops what it started,
    and removes the network, if any process fails to come up."""
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
    layout = _layout(base_dir, host, network, _node_names(mode, brokers, controllers))
    if mode == "zk":
        return _zk_cluster_up(base_dir, brokers, layout, base_port, zookeeper_port,
                              session_timeout_ms, extra, per_broker, timeout)  # fmt: skip
    return _raft_cluster_up(base_dir, brokers, controllers, layout, base_port,
                            session_timeout_ms, extra, ctl_extra, per_broker, timeout)  # fmt: skip


def _settings(given: Sequence[str] | Mapping[str, str]) -> dict[str, str]:
    return dict(given) if isinstance(given, Mapping) else parse_overrides(given)


def _create_network(layout: _Layout) -> None:
    if layout.network is not None:
        netns.create(layout.network)


def _stop_all_and_destroy(started: Sequence[NodeRecord], network: NetworkPlan | None) -> None:
    _stop_all(started)
    if network is not None:
        netns.destroy(network)


def _stop_all(started: Sequence[NodeRecord]) -> None:
    for node in reversed(started):
        stop_node(node, timeout=10.0)


def _zk_cluster_up(base_dir: Path, brokers: int, layout: _Layout, base_port: int,
                   zookeeper_port: int, session_timeout_ms: int, extra: Mapping[str, str],
                   per_broker: Mapping[int, Mapping[str, str]],
                   timeout: float) -> ClusterState:  # fmt: skip
    zk_host = layout.host_of("zookeeper")
    placeholder = f"{zk_host}:{zookeeper_port or 2181}{ZK_CHROOT}"
    zk_lines = _zk_lines(placeholder, session_timeout_ms)
    nodes = _new_brokers(base_dir, brokers, layout, base_port, lambda _: zk_lines, extra,
                         per_broker)  # fmt: skip
    started: list[NodeRecord] = []
    try:
        _create_network(layout)
        zk = _start_zookeeper(base_dir, zk_host, layout.zookeeper_port(zookeeper_port), timeout,
                              layout.prefix_of("zookeeper"))  # fmt: skip
        started.append(zk)
        zk_connect = f"{zk.host}:{zk.port}{ZK_CHROOT}"
        for node in nodes:
            config_file = Path(node.dir) / "broker.toml"
            config_file.write_text(config_file.read_text().replace(placeholder, zk_connect))
        state = ClusterState(dir=str(base_dir), zookeeper=zk, brokers=tuple(nodes),
                             zookeeper_connect=zk_connect, overrides=extra, mode="zk",
                             network=layout.network)  # fmt: skip
        return _start_processes(state, nodes, timeout, started)
    except BaseException:
        _stop_all_and_destroy(started, layout.network)
        raise


def _raft_cluster_up(base_dir: Path, brokers: int, controllers: int, layout: _Layout,
                     base_port: int, session_timeout_ms: int, extra: Mapping[str, str],
                     ctl_extra: Mapping[str, str], per_broker: Mapping[int, Mapping[str, str]],
                     timeout: float) -> ClusterState:  # fmt: skip
    cluster_id = new_cluster_id()
    lifecycle = {
        "broker.session.timeout.ms": session_timeout_ms,
        "broker.heartbeat.interval.ms": heartbeat_interval_ms(session_timeout_ms),
    }
    # The controller creates topics in Raft mode: it needs the brokers' replication default.
    ctl_settings = {**lifecycle, "default.replication.factor": min(3, brokers)}
    ctl_extra = {**controller_part(extra), **ctl_extra}
    ctl_nodes = _new_controllers(base_dir, controllers, layout, cluster_id, ctl_settings, ctl_extra)
    voters = voters_string([(c.node_id, c.host, c.port) for c in ctl_nodes])
    broker_nodes = _new_brokers(
        base_dir, brokers, layout, base_port,
        lambda node_dir: broker_raft_lines(voters, node_dir / "metadata", cluster_id, lifecycle),
        extra, per_broker,
    )  # fmt: skip
    state = ClusterState(dir=str(base_dir), zookeeper=None, brokers=tuple(broker_nodes),
                         overrides=extra, mode="raft", controllers=tuple(ctl_nodes),
                         cluster_id=cluster_id, controller_overrides=ctl_extra,
                         network=layout.network)  # fmt: skip
    started: list[NodeRecord] = []
    try:
        _create_network(layout)
        state = _start_processes(state, ctl_nodes, timeout, started)
        return _start_processes(state, broker_nodes, timeout, started)
    except BaseException:
        _stop_all_and_destroy(started, layout.network)
        raise


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
            zk = _start_zookeeper(base_dir, state.zookeeper.host, state.zookeeper.port, timeout,
                                  _zk_prefix(state))  # fmt: skip
            started.append(zk)
            state = state.with_node(zk)
        else:
            state = _start_processes(state, state.controllers, timeout, started)
        return _start_processes(state, state.brokers, timeout, started)
    except BaseException:
        _stop_all_and_destroy(started, state.network)
        raise


def _zk_prefix(state: ClusterState) -> tuple[str, ...]:
    return tuple(netns.exec_prefix(state.network, "zookeeper")) if state.network else ()


def start_node(base_dir: Path, node_id: int, *, timeout: float = 30.0) -> NodeRecord:
    """Start one stopped node of the cluster again (same config, port, data): a broker, a
    controller, or ZooKeeper (0). Returns once it serves."""
    state = read_state(Path(base_dir).resolve())
    node = state.node(node_id)
    if node_alive(node):
        raise ClusterError(f"{node.name} is already running (pid {node.pid})")
    if node.name == "zookeeper":
        zk = _start_zookeeper(Path(state.dir), node.host, node.port, timeout, _zk_prefix(state))
        write_state(state.with_node(zk))
        return zk
    node, offset = _spawn_node(node)
    write_state(state.with_node(node))
    try:
        node = _wait_listening(node, offset, timeout)
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
        _wait_gone(node, 30.0)
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
    _wait_for(lambda: node_paused(node), 5.0, f"{node.name} did not stop")
    return node


def resume_node(base_dir: Path, node_id: int) -> NodeRecord:
    """SIGCONT a node `pause_node` stopped; returns once /proc shows it running again."""
    node = _running_node(base_dir, node_id)
    os.kill(node.pid, signal.SIGCONT)
    _wait_for(lambda: not node_paused(node), 5.0, f"{node.name} did not resume")
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


def _wait_for(condition: Callable[[], bool], timeout: float, failure: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise ClusterError(f"{failure} within {timeout:g} s")
        time.sleep(POLL_S)  # polling a condition under a deadline


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
