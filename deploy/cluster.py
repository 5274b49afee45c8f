"""`trioka cluster`: a local supervisor of a ZK-mode cluster (one ZooKeeper + N broker processes).

    state = cluster_up(Path("/tmp/c"), brokers=3)         # start ZooKeeper, then the brokers
    await wait_until_ready(state.bootstrap, 3, within=60)  # every broker registered and known
    report = await describe_cluster(state.bootstrap)      # controller, brokers, partitions
    kill_node(Path("/tmp/c"), 2, signal.SIGKILL); start_broker(Path("/tmp/c"), 2)
    cluster_down(Path("/tmp/c"))                          # brokers (SIGTERM, then SIGKILL), ZK

Layout under the cluster directory:
    cluster.json                 the state file: pids (with their start time), ports, commands
    zookeeper/                   zoo.cfg, dataDir, zookeeper.log
    broker-<id>/broker.toml      the broker's config; broker-<id>/data its log dir;
    broker-<id>/broker.log       its JSON log lines (stdout and stderr)

Every process runs in its own session, so it outlives `trioka cluster up` and a Ctrl-C in the
terminal does not reach it; `down` and `kill` find them by the pids in cluster.json and signal a
pid only while /proc says it is still the process that was started (its start time matches),
never by name. Brokers first start on port 0 and the bound port (from their "broker listening"
log event) is written back to broker.toml, so a restart keeps the address. Each broker also
serves Prometheus' /metrics (`trioka.metrics.port`), on a free port at first start, pinned the
same way (from its "metrics serving" event); `trioka cluster status` shows it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import trio

from client import Admin
from deploy.config import load_broker_config, parse_overrides
from deploy.zookeeper_process import ZooKeeperProcess
from protocol.errors import TriokaError

STATE_FILE = "cluster.json"
ZK_CHROOT = "/trioka"
# ZooKeeper's tick bounds the session timeouts it grants ([2, 20] ticks): 500 ms allows the
# short sessions of a local cluster, where a killed broker should be noticed in seconds.
ZK_TICK_TIME_MS = 500
DEFAULT_SESSION_TIMEOUT_MS = 6000
POLL_S = 0.05

__all__ = [
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
    "read_state",
    "start_broker",
    "wait_until_ready",
]


class ClusterError(TriokaError):
    """A supervisor error with a message for the user (no state, already running, ...)."""


@dataclass(frozen=True)
class NodeRecord:
    """One supervised process."""

    name: str
    """"zookeeper" or "broker-<id>"."""
    node_id: int
    """The broker's node.id (0 for ZooKeeper)."""
    host: str
    port: int
    dir: str
    log: str
    command: tuple[str, ...] = ()
    pid: int = 0
    start_ticks: int = 0
    """The process's start time in /proc/<pid>/stat: a reused pid has another."""
    metrics_port: int = 0
    """A broker's /metrics port (http://host:metrics_port/metrics); 0: none or not known yet."""


@dataclass(frozen=True)
class ClusterState:
    dir: str
    zookeeper: NodeRecord
    brokers: tuple[NodeRecord, ...]
    zookeeper_connect: str
    overrides: Mapping[str, str] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self.brokers)

    def broker(self, node_id: int) -> NodeRecord:
        for b in self.brokers:
            if b.node_id == node_id:
                return b
        known = ", ".join(str(b.node_id) for b in self.brokers)
        raise ClusterError(f"no broker {node_id} in this cluster (brokers: {known})")

    def with_node(self, node: NodeRecord) -> ClusterState:
        if node.name == "zookeeper":
            return replace(self, zookeeper=node)
        return replace(
            self, brokers=tuple(node if b.node_id == node.node_id else b for b in self.brokers)
        )


# -- the state file --------------------------------------------------------------------------


def state_path(base_dir: Path) -> Path:
    return Path(base_dir) / STATE_FILE


def read_state(base_dir: Path) -> ClusterState:
    path = state_path(base_dir)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise ClusterError(
            f"no cluster in {str(base_dir)!r} (no {STATE_FILE}; start one with "
            "`trioka cluster up --dir DIR`)"
        ) from None
    except ValueError as exc:
        raise ClusterError(f"{str(path)!r} is not a cluster state file: {exc}") from None

    def node(d: Mapping[str, Any]) -> NodeRecord:
        return NodeRecord(**{**d, "command": tuple(d.get("command", ()))})

    return ClusterState(
        dir=raw["dir"],
        zookeeper=node(raw["zookeeper"]),
        brokers=tuple(node(b) for b in raw["brokers"]),
        zookeeper_connect=raw["zookeeper_connect"],
        overrides=dict(raw.get("overrides", {})),
    )


def write_state(state: ClusterState) -> None:
    path = state_path(Path(state.dir))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
    os.replace(tmp, path)


# -- processes --------------------------------------------------------------------------------


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (start time); None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    state = fields[0]
    if state in ("Z", "X"):
        return None  # exited, not yet reaped by its parent
    return int(fields[19])


def node_alive(node: NodeRecord) -> bool:
    """True while the process started for `node` is running (not a reused pid)."""
    return node.pid > 0 and _start_ticks(node.pid) == node.start_ticks


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


def _start_zookeeper(base_dir: Path, host: str, port: int, timeout: float) -> NodeRecord:
    zk = ZooKeeperProcess(base_dir / "zookeeper", host=host, port=port,
                          tick_time_ms=ZK_TICK_TIME_MS)  # fmt: skip
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


# -- brokers ----------------------------------------------------------------------------------


def _broker_toml(node_id: int, host: str, port: int, data_dir: Path, zk_connect: str,
                 session_timeout_ms: int, replication_factor: int) -> str:  # fmt: skip
    return (
        f'"node.id" = {node_id}\n'
        f'"listeners" = ["PLAINTEXT://{host}:{port}"]\n'
        f'"log.dirs" = [{json.dumps(str(data_dir))}]\n'
        '"metadata.mode" = "zk"\n'
        f'"zookeeper.connect" = {json.dumps(zk_connect)}\n'
        f'"zookeeper.session.timeout.ms" = {session_timeout_ms}\n'
        f'"default.replication.factor" = {replication_factor}\n'
        # A free port at first start, pinned afterwards like the listener's (_pin_port).
        '"trioka.metrics.port" = 0\n'
    )


def _broker_command(config_file: Path, overrides: Mapping[str, str]) -> tuple[str, ...]:
    cmd = [sys.executable, "-m", "deploy.broker_app", "--config", str(config_file)]
    for key, value in overrides.items():
        cmd += ["--override", f"{key}={value}"]
    return tuple(cmd)


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


def _spawn_broker(node: NodeRecord) -> tuple[NodeRecord, int]:
    log_file = Path(node.log)
    offset = log_file.stat().st_size if log_file.exists() else 0
    env = {**os.environ, "TRIOKA_LOG_FORMAT": "json"}
    pid = _spawn(node.command, log_file, Path(node.dir), env)
    return replace(node, pid=pid, start_ticks=_start_ticks(pid) or 0), offset


def _wait_listening(node: NodeRecord, log_offset: int, timeout: float) -> NodeRecord:
    """Wait for the broker's "broker listening" event; returns the node with its bound port
    (and its /metrics port: the broker logs "metrics serving" before it listens)."""
    deadline = time.monotonic() + timeout
    while True:
        metrics_port = node.metrics_port
        for event in _log_events(Path(node.log), log_offset):
            if event.get("event") == "metrics serving":
                metrics_port = int(event["port"])
            if event.get("event") == "broker listening":
                return replace(node, port=int(event["port"]), metrics_port=metrics_port)
        if not node_alive(node):
            _reap(node.pid)
            raise ClusterError(
                f"broker {node.node_id} exited while starting; last lines of {node.log}:\n"
                + _log_tail(node.log)
            )
        if time.monotonic() > deadline:
            raise ClusterError(
                f"broker {node.node_id} did not listen within {timeout:g} s; last lines of "
                f"{node.log}:\n" + _log_tail(node.log)
            )
        time.sleep(POLL_S)  # polling a condition under a deadline


def _pin_port(node: NodeRecord) -> None:
    """Write the bound ports into broker.toml, so that a restart listens where clients (and
    scrapers) look."""
    config_file = Path(node.dir) / "broker.toml"
    text = config_file.read_text()
    new = []
    for line in text.splitlines():
        if line.startswith('"listeners"'):
            line = f'"listeners" = ["PLAINTEXT://{node.host}:{node.port}"]'
        elif line.startswith('"trioka.metrics.port"') and node.metrics_port > 0:
            line = f'"trioka.metrics.port" = {node.metrics_port}'
        new.append(line)
    config_file.write_text("\n".join(new) + "\n")


def cluster_up(
    base_dir: Path,
    *,
    brokers: int = 3,
    host: str = "127.0.0.1",
    base_port: int = 0,
    zookeeper_port: int = 0,
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
    overrides: Sequence[str] | Mapping[str, str] = (),
    timeout: float = 60.0,
) -> ClusterState:
    """Start ZooKeeper and `brokers` broker processes under `base_dir` (or start again a stopped
    cluster found there, with its ports and data). Returns once every broker listens; see
    `wait_until_ready` for "every broker is known to the cluster". Stops what it started if any
    process fails to come up."""
    base_dir = Path(base_dir).resolve()
    extra = dict(overrides) if isinstance(overrides, Mapping) else parse_overrides(overrides)
    previous: ClusterState | None = None
    if state_path(base_dir).exists():
        previous = read_state(base_dir)
        alive = [n.name for n in (previous.zookeeper, *previous.brokers) if node_alive(n)]
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
    elif brokers < 1:
        raise ClusterError(f"--brokers must be at least 1, not {brokers}")
    base_dir.mkdir(parents=True, exist_ok=True)

    if previous is None:
        zk_connect_placeholder = f"{host}:{zookeeper_port or 2181}{ZK_CHROOT}"
        nodes = []
        for node_id in range(1, brokers + 1):
            node_dir = base_dir / f"broker-{node_id}"
            node_dir.mkdir(parents=True, exist_ok=True)
            port = base_port + node_id - 1 if base_port else 0
            toml = _broker_toml(node_id, host, port, node_dir / "data", zk_connect_placeholder,
                                session_timeout_ms, min(3, brokers))  # fmt: skip
            (node_dir / "broker.toml").write_text(toml)
            # Refuse bad overrides (unknown key, bad value) before anything starts.
            load_broker_config(node_dir / "broker.toml", extra)
            nodes.append(
                NodeRecord(
                    name=f"broker-{node_id}",
                    node_id=node_id,
                    host=host,
                    port=port,
                    dir=str(node_dir),
                    log=str(node_dir / "broker.log"),
                    command=_broker_command(node_dir / "broker.toml", extra),
                )
            )
        zk_port = zookeeper_port
    else:
        nodes = list(previous.brokers)
        zk_port = previous.zookeeper.port

    started: list[NodeRecord] = []
    try:
        zk = _start_zookeeper(base_dir, host, zk_port, timeout)
        started.append(zk)
        zk_connect = f"{zk.host}:{zk.port}{ZK_CHROOT}"
        if previous is None:
            for node in nodes:
                config_file = Path(node.dir) / "broker.toml"
                config_file.write_text(
                    config_file.read_text().replace(zk_connect_placeholder, zk_connect)
                )
        state = ClusterState(
            dir=str(base_dir),
            zookeeper=zk,
            brokers=tuple(nodes),
            zookeeper_connect=zk_connect,
            overrides=extra if previous is None else previous.overrides,
        )
        spawned = []
        for node in nodes:
            node, offset = _spawn_broker(node)
            started.append(node)
            spawned.append((node, offset))
            state = state.with_node(node)
        write_state(state)
        deadline = time.monotonic() + timeout
        for node, offset in spawned:
            listening = _wait_listening(node, offset, max(0.1, deadline - time.monotonic()))
            if (
                listening.port != node.port
                or node.port == 0
                or listening.metrics_port != node.metrics_port
            ):
                _pin_port(listening)
            state = state.with_node(listening)
        write_state(state)
        return state
    except BaseException:
        for node in reversed(started):
            stop_node(node, timeout=10.0)
        raise


def start_broker(base_dir: Path, node_id: int, *, timeout: float = 30.0) -> NodeRecord:
    """Start one stopped broker of the cluster again (same config, port and data)."""
    state = read_state(Path(base_dir).resolve())
    node = state.broker(node_id)
    if node_alive(node):
        raise ClusterError(f"broker {node_id} is already running (pid {node.pid})")
    node, offset = _spawn_broker(node)
    write_state(state.with_node(node))
    node = _wait_listening(node, offset, timeout)
    write_state(state.with_node(node))
    return node


def kill_node(base_dir: Path, node_id: int, sig: int = signal.SIGKILL) -> NodeRecord:
    """Send `sig` to broker `node_id` (0: ZooKeeper). SIGKILL waits until it is gone."""
    state = read_state(Path(base_dir).resolve())
    node = state.zookeeper if node_id == 0 else state.broker(node_id)
    if not node_alive(node):
        raise ClusterError(f"{node.name} is not running")
    os.kill(node.pid, sig)
    if sig == signal.SIGKILL:
        _wait_gone(node, 30.0)
    return node


def cluster_down(
    base_dir: Path, *, timeout: float = 30.0, controller_id: int | None = None
) -> list[tuple[NodeRecord, str]]:
    """Stop the brokers one by one (the controller's last, so that leadership moves only once),
    then ZooKeeper: SIGTERM, SIGKILL after `timeout` s. Returns (node, outcome) pairs."""
    state = read_state(Path(base_dir).resolve())
    order = sorted(state.brokers, key=lambda b: (b.node_id == controller_id, b.node_id))
    outcomes = [(b, stop_node(b, timeout)) for b in order]
    outcomes.append((state.zookeeper, stop_node(state.zookeeper, timeout)))
    return outcomes


# -- asking the cluster -----------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerStatus:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True)
class ClusterReport:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerStatus, ...]
    topics: int
    partitions: int
    under_replicated: tuple[tuple[str, int], ...]
    """Partitions whose ISR is smaller than their replica set."""
    offline: tuple[tuple[str, int], ...]
    """Partitions without a leader."""


def _admin(bootstrap: str, timeout_ms: int) -> Admin:
    return Admin(
        {
            "bootstrap.servers": bootstrap,
            "default.api.timeout.ms": timeout_ms,
            "request.timeout.ms": timeout_ms,
            "socket.connection.setup.timeout.ms": min(timeout_ms, 2000),
        }
    )


async def describe_cluster(bootstrap: str, *, timeout_ms: int = 10_000) -> ClusterReport:
    """Controller, live brokers and partition health, from a Metadata request."""
    async with _admin(bootstrap, timeout_ms) as admin:
        cluster = await admin.describe_cluster()
        topics = await admin.describe_topics()
    parts = [p for t in topics for p in t.partitions]
    return ClusterReport(
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        brokers=tuple(BrokerStatus(b.node_id, b.host, b.port, b.rack) for b in cluster.brokers),
        topics=len(topics),
        partitions=len(parts),
        under_replicated=tuple(
            (p.topic, p.partition) for p in parts if len(p.isr) < len(p.replicas)
        ),
        offline=tuple((p.topic, p.partition) for p in parts if p.leader < 0),
    )


async def wait_until_ready(bootstrap: str, brokers: int, *, within: float = 60.0) -> ClusterReport:
    """Poll until the cluster has a controller and knows `brokers` live brokers."""
    last: BaseException | None = None
    report: ClusterReport | None = None
    with trio.move_on_after(within):
        while True:
            try:
                report = await describe_cluster(bootstrap, timeout_ms=2000)
                if report.controller_id >= 0 and len(report.brokers) >= brokers:
                    return report
            except (TriokaError, OSError) as exc:
                last = exc
            await trio.sleep(0.1)
    seen = (
        f"controller {report.controller_id}, brokers {[b.node_id for b in report.brokers]}"
        if report is not None
        else f"no answer ({last})"
    )
    raise ClusterError(f"the cluster was not ready within {within:g} s: {seen}")
