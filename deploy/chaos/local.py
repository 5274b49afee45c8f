"""The chaos nemesis's backend for a local cluster (deploy.cluster.supervisor): signals by pid (checked
against /proc start times, never by name), restarts with the node's recorded command, cuts with
iptables in the nodes' network namespaces (deploy.cluster.network).

    nemesis = LocalNemesis(cluster_dir, history, topic="chaos", seed=7, acks=workload)

`LocalCluster` is a chaos run's own cluster: up in a directory, down at the end.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from deploy.chaos.check.history import History
from deploy.chaos.nemesis import (
    RESTART_TIMEOUT_S,
    Acknowledgements,
    Nemesis,
    to_thread,
)
from deploy.cluster.network import heal_network, partition_nodes, probe_nodes
from deploy.cluster.pids import node_alive
from deploy.cluster.proxy import ProxySet
from deploy.cluster.raft import quorum_report
from deploy.cluster.state import ClusterState
from deploy.cluster.supervisor import (
    client_config,
    cluster_down,
    cluster_up,
    controller_client_config,
    kill_node,
    read_state,
    start_node,
    wait_ready,
)

__all__ = ["LocalCluster", "LocalControl", "LocalNemesis"]


class LocalControl:
    """deploy.chaos.nemesis.NodeControl over the processes of a `trioka cluster` directory."""

    def __init__(self, cluster_dir: Path) -> None:
        self.dir = Path(cluster_dir)
        self.mode = self.state().mode

    def state(self) -> ClusterState:
        return read_state(self.dir)

    def brokers(self) -> list[int]:
        return [b.node_id for b in self.state().brokers]

    def controllers(self) -> list[int]:
        return [c.node_id for c in self.state().controllers]

    def metadata_nodes(self) -> list[int]:
        return [0] if self.mode == "zk" else self.controllers()

    def node_name(self, node_id: int) -> str:
        return self.state().node(node_id).name

    def broker_bootstrap(self, exclude: Collection[int] = ()) -> str:
        brokers = self.state().brokers
        up = [b for b in brokers if b.node_id not in exclude] or list(brokers)
        return ",".join(f"{b.host}:{b.port}" for b in up)

    def client_config(self) -> dict[str, str]:
        return client_config(self.state())

    async def raft_leader(self) -> int:
        state = self.state()
        report = await quorum_report(
            state.controller_bootstrap, client=controller_client_config(state)
        )
        return report.leader_id

    async def alive(self, node_id: int) -> bool:
        return node_alive(self.state().node(node_id))

    async def _signal(self, node_id: int, sig: signal.Signals) -> dict[str, Any]:
        node = await to_thread(kill_node, self.dir, node_id, sig)
        return {"signal": sig.name, "pid": node.pid}

    async def kill(self, node_id: int) -> dict[str, Any]:
        return await self._signal(node_id, signal.SIGKILL)

    async def start(self, node_id: int) -> dict[str, Any]:
        node = await to_thread(start_node, self.dir, node_id, timeout=RESTART_TIMEOUT_S)
        return {"pid": node.pid}

    async def pause(self, node_id: int) -> dict[str, Any]:
        return await self._signal(node_id, signal.SIGSTOP)

    async def resume(self, node_id: int) -> dict[str, Any]:
        return await self._signal(node_id, signal.SIGCONT)

    async def cut(self, side: list[int], other: list[int]) -> dict[str, Any]:
        await to_thread(partition_nodes, self.dir, side, other)
        return {"how": "iptables DROP in the nodes' network namespaces"}

    async def heal_network(self) -> bool:
        state = self.state()
        if state.network is None or not state.cuts:
            return False
        await to_thread(heal_network, self.dir)
        return True

    async def probe(self, a: int, b: int) -> bool:
        ok: bool = await to_thread(probe_nodes, self.dir, a, b)
        return ok


class LocalNemesis(Nemesis):
    """The nemesis of a chaos run against a local cluster."""

    def __init__(self, cluster_dir: Path, history: History, *, topic: str, seed: int,
                 acks: Acknowledgements | None = None,
                 proxies: ProxySet | None = None) -> None:  # fmt: skip
        super().__init__(LocalControl(cluster_dir), history, topic=topic, seed=seed, acks=acks,
                         proxies=proxies)  # fmt: skip


class LocalCluster:
    """A chaos run's own local cluster (deploy.cluster.supervisor) in `base`: brought up, and down at
    the end."""

    def __init__(self, base: Path, *, mode: str, brokers: int, controllers: int,
                 session_timeout_ms: int, overrides: Mapping[str, str],
                 broker_overrides: Mapping[int, Mapping[str, str]], netns: bool,
                 timeout: float, say: Callable[[str], None],
                 secure: bool = False) -> None:  # fmt: skip
        self.base = base
        self.mode, self.brokers, self.controllers = mode, brokers, controllers
        self.session_timeout_ms = session_timeout_ms
        self.overrides, self.broker_overrides = dict(overrides), dict(broker_overrides)
        self.netns, self.timeout, self.say = netns, timeout, say
        self.secure = secure
        self._state: ClusterState | None = None

    @property
    def where(self) -> str:
        return f"a local cluster in {self.base}"

    async def up(self) -> str:
        self.say(f"cluster: {self.mode} mode in {self.base}")
        state = self._state = await to_thread(
            cluster_up,
            self.base,
            mode=self.mode,
            brokers=self.brokers,
            controllers=self.controllers,
            session_timeout_ms=self.session_timeout_ms,
            overrides=self.overrides,
            timeout=self.timeout,
            broker_overrides=self.broker_overrides,
            netns=self.netns,
            secure=self.secure,
        )
        await wait_ready(state, within=60)
        return state.bootstrap

    def client_config(self) -> dict[str, str]:
        return client_config(self._state) if self._state is not None else {}

    async def down(self) -> None:
        if self._state is not None:  # cluster_up stops what it started when it fails
            await to_thread(cluster_down, self.base, timeout=10.0)

    def nemesis(self, history: History, *, topic: str, seed: int,
                acks: Acknowledgements | None = None,
                proxies: ProxySet | None = None) -> Nemesis:  # fmt: skip
        return LocalNemesis(self.base, history, topic=topic, seed=seed, acks=acks,
                            proxies=proxies)  # fmt: skip
