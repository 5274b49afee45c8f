"""A new local cluster's node directories and the config files and command lines its brokers and
controllers start with.

    nodes = new_brokers(base_dir, 3, layout, mode_settings, overrides, per_broker, internal)
    nodes = new_controllers(base_dir, 3, layout, cluster_id, settings, overrides)
    broker_zk_settings("127.0.0.1:2181/trioka", 6000)   # a ZK-mode broker's metadata keys

Every config file is loaded once written (deploy.node's loaders), so bad overrides are refused
before anything starts. Ports chosen as 0 are pinned once the node listens
(deploy.cluster.startup).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from deploy.cluster.layout import Layout
from deploy.cluster.raft import (
    CONTROLLER_BASE_ID,
    CONTROLLER_LISTENER,
    controller_toml,
    toml_lines,
    voters_string,
)
from deploy.cluster.state import NodeRecord
from deploy.node.config import load_broker_config
from deploy.node.controller_config import load_controller_config

# Clients use EXTERNAL (the node's recorded port); brokers replicate and the ZK-mode controller
# sends its requests on INTERNAL, where inter-broker APIs are served (broker.authorization), so
# they are refused on the clients' listener even without security.
EXTERNAL_LISTENER = "EXTERNAL"
INTERNAL_LISTENER = "INTERNAL"


def broker_listeners(host: str, port: int, internal_port: int) -> dict[str, object]:
    """A supervised broker's listener keys (`cluster up --secure` changes the protocols)."""
    return {
        "listeners": [
            f"{EXTERNAL_LISTENER}://{host}:{port}",
            f"{INTERNAL_LISTENER}://{host}:{internal_port}",
        ],
        "inter.broker.listener.name": INTERNAL_LISTENER,
        "listener.security.protocol.map": [
            f"{EXTERNAL_LISTENER}:PLAINTEXT",
            f"{INTERNAL_LISTENER}:PLAINTEXT",
            f"{CONTROLLER_LISTENER}:PLAINTEXT",
        ],
    }


def _broker_settings(node_id: int, host: str, data_dir: Path, replication_factor: int,
                     in_netns: bool) -> dict[str, object]:  # fmt: skip
    return {
        "node.id": node_id,
        "log.dirs": [str(data_dir)],
        "default.replication.factor": replication_factor,
        # As Kafka's shipped server.properties (1 there): the offsets topic fits the cluster.
        "offsets.topic.replication.factor": replication_factor,
        "trioka.telemetry.replication.factor": replication_factor,
        # Kafka's shipped server.properties too: a dev cluster's first group forms at once.
        "group.initial.rebalance.delay.ms": 0,
        # A free port at first start, pinned afterwards like the listener's (deploy.cluster.startup).
        "trioka.metrics.port": 0,
        # In a namespace /metrics binds the node's address too (reachable from the host).
        **({"trioka.metrics.host": host} if in_netns else {}),
    }


def broker_zk_settings(zk_connect: str, session_timeout_ms: int) -> dict[str, object]:
    return {
        "metadata.mode": "zk",
        "zookeeper.connect": zk_connect,
        "zookeeper.session.timeout.ms": session_timeout_ms,
    }


def _command(module: str, config_file: Path, overrides: Mapping[str, str]) -> tuple[str, ...]:
    cmd = [sys.executable, "-m", module, "--config", str(config_file)]
    for key, value in overrides.items():
        cmd += ["--override", f"{key}={value}"]
    return tuple(cmd)


def _broker_command(config_file: Path, overrides: Mapping[str, str]) -> tuple[str, ...]:
    return _command("deploy.node.broker", config_file, overrides)


NodeSecurity = Callable[[str, str], Mapping[str, object]]
"""`security(node name, host)`: the node's TLS/SASL/authorizer keys (deploy.cluster.secure)."""


def internal_ports(layout: Layout, count: int) -> dict[int, int]:
    """Brokers 1..count: their INTERNAL listener's port, chosen now (see Layout)."""
    return {i: layout.internal_port(f"broker-{i}") for i in range(1, count + 1)}


def new_brokers(base_dir: Path, count: int, layout: Layout,
                mode_settings: Callable[[Path], Mapping[str, object]], extra: Mapping[str, str],
                per_broker: Mapping[int, Mapping[str, str]], internal: Mapping[int, int],
                security: NodeSecurity | None = None) -> list[NodeRecord]:  # fmt: skip
    """Broker dirs with their broker.toml; bad overrides are refused before anything starts.
    `per_broker[id]` overrides go to that broker only, after the cluster-wide ones;
    `internal[id]`: its INTERNAL port (internal_ports)."""
    nodes = []
    for node_id in range(1, count + 1):
        name = f"broker-{node_id}"
        node_dir = base_dir / name
        node_dir.mkdir(parents=True, exist_ok=True)
        host, port = layout.host_of(name), layout.broker_port(node_id)
        settings_file = {
            **_broker_settings(node_id, host, node_dir / "data", min(3, count),
                               layout.network is not None),
            **mode_settings(node_dir),
            **broker_listeners(host, port, internal[node_id]),
            **(security(name, host) if security is not None else {}),
        }  # fmt: skip
        (node_dir / "broker.toml").write_text(toml_lines(settings_file))
        settings = {**extra, **per_broker.get(node_id, {})}
        load_broker_config(node_dir / "broker.toml", settings)
        nodes.append(
            NodeRecord(
                name=name,
                node_id=node_id,
                host=host,
                port=port,
                internal_port=internal[node_id],
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
                    settings: Mapping[str, object], extra: Mapping[str, str],
                    security: NodeSecurity | None = None) -> list[NodeRecord]:  # fmt: skip
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
                {**metrics, **settings,
                 **(security(f"controller-{node_id}", host) if security is not None else {})},
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
