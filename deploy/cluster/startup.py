"""Starting a local cluster's processes and waiting until they serve.

    node, offset = spawn_node(node)              # its command, its JSON log appended to
    node = wait_listening(node, offset, timeout) # "broker listening" / "controller started"
    state = start_processes(state, nodes, timeout, started)   # together; ports pinned
    zk = start_zookeeper(base_dir, host, port, timeout, prefix)

A broker first starts on port 0: the port its EXTERNAL listener bound (its "broker listening"
event) is written back to its broker.toml, and so is every node's /metrics port ("metrics
serving"), so that a restart keeps its addresses. A node that exits or stays silent past the deadline raises
ClusterError with the last lines of its log.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import tomllib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from deploy.cluster import netns
from deploy.cluster.netns import NetworkPlan
from deploy.cluster.node_configs import EXTERNAL_LISTENER
from deploy.cluster.pids import POLL_S, node_alive, reap, spawn, start_ticks, stop_node
from deploy.cluster.state import ClusterError, ClusterState, NodeRecord, write_state
from deploy.cluster.zookeeper import ZooKeeperProcess

# ZooKeeper's tick bounds the session timeouts it grants ([2, 20] ticks): 500 ms allows the
# short sessions of a local cluster, where a killed broker should be noticed in seconds.
ZK_TICK_TIME_MS = 500


def start_zookeeper(base_dir: Path, host: str, port: int, timeout: float,
                    exec_prefix: Sequence[str] = ()) -> NodeRecord:  # fmt: skip
    """Start ZooKeeper in `base_dir`/zookeeper and wait until it answers; its record."""
    zk = ZooKeeperProcess(base_dir / "zookeeper", host=host, port=port,
                          tick_time_ms=ZK_TICK_TIME_MS, exec_prefix=exec_prefix)  # fmt: skip
    zk.start(timeout)
    pid = zk.pid
    zk.proc.returncode = 0  # type: ignore[union-attr]  # handed over, as in pids.spawn
    return NodeRecord(
        name="zookeeper",
        node_id=0,
        host=zk.host,
        port=zk.port,
        dir=str(zk.tmp_dir),
        log=str(zk.log_file),
        command=tuple(zk.command(zk.conf_dir / "zoo.cfg")),
        pid=pid,
        start_ticks=start_ticks(pid) or 0,
    )


def zk_prefix(state: ClusterState) -> tuple[str, ...]:
    return tuple(netns.exec_prefix(state.network, "zookeeper")) if state.network else ()


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


def spawn_node(node: NodeRecord) -> tuple[NodeRecord, int]:
    log_file = Path(node.log)
    offset = log_file.stat().st_size if log_file.exists() else 0
    env = {**os.environ, "TRIOKA_LOG_FORMAT": "json"}
    pid = spawn(node.command, log_file, Path(node.dir), env)
    return replace(node, pid=pid, start_ticks=start_ticks(pid) or 0), offset


def _wait_event(
    node: NodeRecord, log_offset: int, name: str, timeout: float, **fields: str
) -> list[dict[str, Any]]:
    """Poll the node's JSON log until the event `name` (with these `fields`) appears; returns
    the events up to it. ClusterError (with the log's tail) if the process exits or the
    deadline passes."""
    what = node.name.replace("-", " ")
    deadline = time.monotonic() + timeout
    while True:
        events = _log_events(Path(node.log), log_offset)
        for i, event in enumerate(events):
            if event.get("event") == name and all(event.get(k) == v for k, v in fields.items()):
                return events[: i + 1]
        if not node_alive(node):
            reap(node.pid)
            raise ClusterError(
                f"{what} exited while starting; last lines of {node.log}:\n" + _log_tail(node.log)
            )
        if time.monotonic() > deadline:
            raise ClusterError(
                f"{what} did not log {name!r} within {timeout:g} s; last lines of "
                f"{node.log}:\n" + _log_tail(node.log)
            )
        time.sleep(POLL_S)  # polling a condition under a deadline


def wait_listening(node: NodeRecord, log_offset: int, timeout: float) -> NodeRecord:
    """Wait until the node serves: a broker's "broker listening" event for its clients'
    listener (returns the node with that bound port), a controller's "controller started" (its
    port was chosen before it started); both with their /metrics port (each logs "metrics
    serving" before it listens)."""
    if node.is_controller:
        events = _wait_event(node, log_offset, "controller started", timeout)
    else:
        events = _wait_event(node, log_offset, "broker listening", timeout,
                             listener=EXTERNAL_LISTENER)  # fmt: skip
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
            line = _pinned_listeners(line, node)
        elif line.startswith('"trioka.metrics.port"') and node.metrics_port > 0:
            line = f'"trioka.metrics.port" = {node.metrics_port}'
        new.append(line)
    config_file.write_text("\n".join(new) + "\n")


def _pinned_listeners(line: str, node: NodeRecord) -> str:
    """The broker.toml `"listeners"` line with the clients' listener at the node's port."""
    listeners = tomllib.loads(line)["listeners"]
    prefix = f"{EXTERNAL_LISTENER}://"
    pinned = [f"{prefix}{node.host}:{node.port}" if v.startswith(prefix) else v for v in listeners]
    return f'"listeners" = {json.dumps(pinned)}'


def start_processes(state: ClusterState, nodes: Sequence[NodeRecord], timeout: float,
                    started: list[NodeRecord]) -> ClusterState:  # fmt: skip
    """Spawn `nodes` together, then wait for each to serve; pins the brokers' bound ports."""
    spawned = []
    for node in nodes:
        node, offset = spawn_node(node)
        started.append(node)
        spawned.append((node, offset))
        state = state.with_node(node)
    write_state(state)
    deadline = time.monotonic() + timeout
    for node, offset in spawned:
        listening = wait_listening(node, offset, max(0.1, deadline - time.monotonic()))
        if listening.metrics_port != node.metrics_port or (
            not node.is_controller and (listening.port != node.port or node.port == 0)
        ):
            _pin_port(listening)
        state = state.with_node(listening)
    write_state(state)
    return state


def stop_all_and_destroy(started: Sequence[NodeRecord], network: NetworkPlan | None) -> None:
    _stop_all(started)
    if network is not None:
        netns.destroy(network)


def _stop_all(started: Sequence[NodeRecord]) -> None:
    for node in reversed(started):
        stop_node(node, timeout=10.0)
