"""The local cluster supervisor's state (deploy.cluster.supervisor): what `trioka cluster up` started, in
`<dir>/cluster.json`, written atomically (write, rename).

    state = read_state(Path("/tmp/c"))    # ClusterError naming the dir when there is none
    state.mode, state.nodes, state.node(3001), state.bootstrap, state.controller_bootstrap
    write_state(state.with_node(replace(node, pid=pid)))

A state file written before Raft mode (no "mode", a "zookeeper") reads as a ZK-mode cluster.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from deploy.cluster.netns import NetworkPlan
from deploy.cluster.raft import voters_string
from protocol.errors import TriokaError

STATE_FILE = "cluster.json"

__all__ = ["STATE_FILE", "ClusterError", "ClusterState", "NodeRecord", "read_state", "state_path",
           "write_state"]  # fmt: skip


class ClusterError(TriokaError):
    """A supervisor error with a message for the user (no state, already running, ...)."""


@dataclass(frozen=True)
class NodeRecord:
    """One supervised process."""

    name: str
    """"zookeeper", "controller-<id>" or "broker-<id>"."""
    node_id: int
    """The broker's or controller's node.id (0 for ZooKeeper)."""
    host: str
    port: int
    dir: str
    log: str
    command: tuple[str, ...] = ()
    pid: int = 0
    start_ticks: int = 0
    """The process's start time in /proc/<pid>/stat: a reused pid has another."""
    internal_port: int = 0
    """A broker's INTERNAL (inter-broker) listener port; 0: none (ZooKeeper, controllers, or
    a cluster made before brokers had one)."""
    metrics_port: int = 0
    """The process's /metrics port (http://host:metrics_port/metrics), brokers and controllers;
    0: none or not known yet."""

    @property
    def is_controller(self) -> bool:
        return self.name.startswith("controller-")


@dataclass(frozen=True)
class ClusterState:
    dir: str
    zookeeper: NodeRecord | None
    """ZK mode's ZooKeeper; None in Raft mode."""
    brokers: tuple[NodeRecord, ...]
    zookeeper_connect: str = ""
    overrides: Mapping[str, str] = field(default_factory=dict)
    mode: str = "zk"
    """"raft" or "zk" (a state file without a mode was written before Raft mode: zk)."""
    controllers: tuple[NodeRecord, ...] = ()
    """Raft mode's controller processes (node ids 3001..)."""
    cluster_id: str = ""
    controller_overrides: Mapping[str, str] = field(default_factory=dict)
    network: NetworkPlan | None = None
    """`cluster up --netns`: every node in its own network namespace (deploy.cluster.netns)."""
    cuts: tuple[tuple[str, str], ...] = ()
    """Node-name pairs whose traffic is dropped both ways now (`trioka cluster partition`)."""
    secure: bool = False
    """`cluster up --secure` (deploy.cluster.secure): TLS everywhere, SCRAM for clients."""

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self.brokers)

    @property
    def internal_bootstrap(self) -> str:
        """host:port of every broker's INTERNAL listener (inter-broker traffic)."""
        return ",".join(f"{b.host}:{b.internal_port}" for b in self.brokers if b.internal_port)

    @property
    def controller_bootstrap(self) -> str:
        """host:port of every controller (`trioka quorum describe --bootstrap-controller`)."""
        return ",".join(f"{c.host}:{c.port}" for c in self.controllers)

    @property
    def voters(self) -> str:
        return voters_string([(c.node_id, c.host, c.port) for c in self.controllers])

    @property
    def nodes(self) -> tuple[NodeRecord, ...]:
        """Every process: ZooKeeper or the controllers first, then the brokers."""
        first = (self.zookeeper,) if self.zookeeper is not None else self.controllers
        return (*first, *self.brokers)

    def broker(self, node_id: int) -> NodeRecord:
        for b in self.brokers:
            if b.node_id == node_id:
                return b
        known = ", ".join(str(b.node_id) for b in self.brokers)
        raise ClusterError(f"no broker {node_id} in this cluster (brokers: {known})")

    def node(self, node_id: int) -> NodeRecord:
        """A broker or a controller by node id; 0 is ZooKeeper (ZK mode)."""
        if node_id == 0 and self.zookeeper is not None:
            return self.zookeeper
        for n in (*self.controllers, *self.brokers):
            if n.node_id == node_id:
                return n
        known = ", ".join(
            [*(f"controller {c.node_id}" for c in self.controllers),
             *(f"broker {b.node_id}" for b in self.brokers),
             *(["0 (ZooKeeper)"] if self.zookeeper is not None else [])]
        )  # fmt: skip
        raise ClusterError(f"no node {node_id} in this cluster ({known})")

    def with_node(self, node: NodeRecord) -> ClusterState:
        if node.name == "zookeeper":
            return replace(self, zookeeper=node)
        if node.is_controller:
            return replace(
                self,
                controllers=tuple(node if c.name == node.name else c for c in self.controllers),
            )
        return replace(
            self, brokers=tuple(node if b.name == node.name else b for b in self.brokers)
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

    try:
        return ClusterState(
            dir=raw["dir"],
            zookeeper=node(raw["zookeeper"]) if raw.get("zookeeper") else None,
            brokers=tuple(node(b) for b in raw["brokers"]),
            zookeeper_connect=raw.get("zookeeper_connect", ""),
            overrides=dict(raw.get("overrides", {})),
            mode=raw.get("mode", "zk"),
            controllers=tuple(node(c) for c in raw.get("controllers", ())),
            cluster_id=raw.get("cluster_id", ""),
            controller_overrides=dict(raw.get("controller_overrides", {})),
            network=NetworkPlan.from_dict(raw["network"]) if raw.get("network") else None,
            cuts=tuple((str(a), str(b)) for a, b in raw.get("cuts", ())),
            secure=bool(raw.get("secure", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ClusterError(f"{str(path)!r} is not a cluster state file: {exc!r}") from None


def write_state(state: ClusterState) -> None:
    path = state_path(Path(state.dir))
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state), indent=2) + "\n")
    os.replace(tmp, path)
