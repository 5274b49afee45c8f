"""Where the nodes of a local cluster live: every node on one host address, or each in its own
network namespace (deploy.cluster.netns) with its own address and Kafka's default ports.

    plan = plan_cluster_network(base_dir, mode="raft", brokers=3, controllers=3)
    layout = cluster_layout(base_dir, host, plan, node_names("raft", 3, 3))
    layout.host_of("broker-1"), layout.broker_port(1), layout.prefix_of("broker-1")
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from deploy.cluster import netns
from deploy.cluster.netns import NetworkPlan
from deploy.cluster.raft import CONTROLLER_BASE_ID
from deploy.cluster.state import ClusterError
from deploy.cluster.zookeeper import free_port

# `cluster up`'s ports from a base port (`--base-port`, 9092 by default): broker N's clients'
# listener at BASE+N-1 (9092, 9093, ... as Kafka users expect), its INTERNAL listener at
# BASE+100+N-1, controller 3001+I at BASE+200+I. Base 0: free ports (tests).
INTERNAL_OFFSET = 100
CONTROLLER_OFFSET = 200
# In a node's own network namespace the ports are its own: Kafka's defaults.
NETNS_BROKER_PORT = 9092
NETNS_CONTROLLER_PORT = 9093
# A broker's INTERNAL (inter-broker) listener: Confluent's images use 29092 for the same.
NETNS_INTERNAL_PORT = 29092
NETNS_ZOOKEEPER_PORT = 2181


@dataclass(frozen=True)
class Layout:
    """Every node on one host address, or (`netns`) each in its own network namespace with its
    own address, where Kafka's default ports are free: 9092 brokers, 9093 controllers, 2181."""

    host: str
    network: NetworkPlan | None = None
    base_port: int = 0
    """0: free ports (chosen now, or bound as 0 and pinned); else the fixed plan above."""

    def host_of(self, name: str) -> str:
        return self.network.address(name) if self.network else self.host

    def prefix_of(self, name: str) -> tuple[str, ...]:
        return tuple(netns.exec_prefix(self.network, name)) if self.network else ()

    def broker_port(self, node_id: int) -> int:
        if self.network:
            return NETNS_BROKER_PORT
        return self.base_port + node_id - 1 if self.base_port else 0

    def internal_port(self, name: str) -> int:
        """A broker's INTERNAL listener: chosen when the cluster is made, like a controller's
        port (brokers dial it from the metadata, never from a client's bootstrap list)."""
        if self.network:
            return NETNS_INTERNAL_PORT
        if self.base_port:
            return self.base_port + INTERNAL_OFFSET + _index(name)
        return free_port(self.host)

    def controller_port(self, name: str) -> int:
        if self.network:
            return NETNS_CONTROLLER_PORT
        if self.base_port:
            return self.base_port + CONTROLLER_OFFSET + _index(name)
        return free_port(self.host)

    def zookeeper_port(self, port: int) -> int:
        return port or (NETNS_ZOOKEEPER_PORT if self.network else 0)

    def check_ports_free(self, names: Sequence[str]) -> None:
        """With fixed ports: ClusterError naming the first one something listens on."""
        if self.network or not self.base_port:
            return
        for name in names:
            if name.startswith("broker-"):
                wanted = [self.broker_port(_index(name) + 1), self.internal_port(name)]
            elif name.startswith("controller-"):
                wanted = [self.controller_port(name)]
            else:
                continue
            for port in wanted:
                if not port_free(self.host, port):
                    raise ClusterError(
                        f"port {port} ({name}) on {self.host} is in use: is another cluster "
                        "running? Stop it, or choose other ports with --base-port (0: free ports)"
                    )


def _index(name: str) -> int:
    """broker-1 -> 0, controller-3002 -> 1."""
    number = int(name.rpartition("-")[2])
    return number - (CONTROLLER_BASE_ID if name.startswith("controller-") else 1)


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def plan_cluster_network(base_dir: Path, *, mode: str = "raft", brokers: int = 3,
                         controllers: int = 3) -> NetworkPlan:  # fmt: skip
    """The network `cluster_up(base_dir, netns=True, ...)` would make for this cluster, known
    before it starts (e.g. to put proxies on `plan.host_address` and name them in
    `broker_overrides`' advertised.listeners); pass it back as `cluster_up(network=plan)`.
    ClusterError when this machine cannot run network namespaces."""
    reason = netns.available()
    if reason is not None:
        raise ClusterError(f"--netns is not possible here: {reason}")
    names = node_names(mode, brokers, controllers)
    return netns.plan_network(Path(base_dir).resolve(), names, netns.used_networks())


def cluster_layout(
    base_dir: Path,
    host: str,
    network: NetworkPlan | None,
    names: Sequence[str],
    base_port: int = 0,
) -> Layout:
    if network is not None and list(network.nodes) != list(names):
        raise ClusterError(
            f"the network plan is for nodes {list(network.nodes)}, not {list(names)} "
            "(plan_cluster_network with this cluster's mode, brokers and controllers)"
        )
    layout = Layout(host, network, base_port)
    layout.check_ports_free(names)
    return layout


def node_names(mode: str, brokers: int, controllers: int) -> list[str]:
    first = ["zookeeper"] if mode == "zk" else [
        f"controller-{CONTROLLER_BASE_ID + i}" for i in range(controllers)
    ]  # fmt: skip
    return [*first, *(f"broker-{i}" for i in range(1, brokers + 1))]
