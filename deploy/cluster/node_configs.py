"""A new local cluster's node directories and the config files and command lines its brokers and
controllers start with.

    nodes = new_brokers(base_dir, 3, layout, base_port, mode_lines, overrides, per_broker)
    nodes = new_controllers(base_dir, 3, layout, cluster_id, settings, overrides)
    broker_zk_lines("127.0.0.1:2181/trioka", 6000)   # a ZK-mode broker's metadata lines

Every config file is loaded once written (deploy.node's loaders), so bad overrides are refused
before anything starts. Ports chosen as 0 are pinned once the node listens
(deploy.cluster.startup).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from deploy.cluster.layout import Layout
from deploy.cluster.raft import CONTROLLER_BASE_ID, controller_toml, voters_string
from deploy.cluster.state import NodeRecord
from deploy.node.config import load_broker_config
from deploy.node.controller_config import load_controller_config


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
        # A free port at first start, pinned afterwards like the listener's (deploy.cluster.startup).
        '"trioka.metrics.port" = 0\n' + metrics_host + mode_lines
    )


def broker_zk_lines(zk_connect: str, session_timeout_ms: int) -> str:
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


def new_brokers(base_dir: Path, count: int, layout: Layout, base_port: int,
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


def new_controllers(base_dir: Path, count: int, layout: Layout, cluster_id: str,
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
        # A free /metrics port at first start, pinned afterwards (deploy.cluster.startup); in a namespace
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
