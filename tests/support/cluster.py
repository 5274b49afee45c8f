"""Test harness: clusters of real broker processes, in ZK mode (on a real ZooKeeper) or in Raft
mode (on a quorum of real controller processes), with one interface so a test runs in both.

    cluster = ZkCluster(tmp_path, zookeeper.hosts, brokers=3, overrides={...})
    cluster.start()                     # every broker answers ApiVersions (deadline)
    await cluster.wait_ready()          # a controller, and every broker known to the cluster
    cluster.bootstrap                   # "127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"
    cluster.brokers[2]                  # tests.support.broker_process.BrokerProcess (kill, stop)
    cluster.pause(2); cluster.resume(2) # SIGSTOP/SIGCONT; live_bootstrap() leaves paused ones out
    await cluster.controller_id()       # from a Metadata response
    await cluster.partition("t", 0)     # client.metadata.PartitionInfo: leader, replicas, ISR
    await cluster.wait_partition("t", 0, lambda p: p.leader != 1, within=30)
    cluster.cleanup()                   # SIGKILL by pid every broker still alive

The brokers are `python -m deploy.node.broker` with `metadata.mode=zk`, node ids 1..N, each with
its own log dir; the ZooKeeper is the caller's (usually the `zookeeper` fixture's chroot, so
clusters of different tests never meet). The session timeout defaults to 3 s (the house rules
ask for >= 2 s), so a SIGKILLed broker leaves the cluster within seconds.

Environment: `env` goes to every broker, `broker_env={node_id: {...}}` to one broker on top
(e.g. `TRIOKA_FAILPOINTS`, deploy/node/failpoints.py); `cluster.brokers[i].extra_env` may be
changed before a restart.

Raft mode: `RaftCluster(tmp_dir, brokers=3, controllers=3, overrides=..., ...)` starts the
controllers (`tests.support.controller_process.ControllerProcess`, ids 3001.., a cluster id of
its own) and then Raft-mode brokers (`metadata.mode=raft`, the voters, the CONTROLLER listener
name, a metadata log dir each). Same methods as ZkCluster, plus `controllers` ({id:
ControllerProcess}), `controller_bootstrap`, `await active_controller_id()` (the quorum leader,
from DescribeQuorum) and `await wait_active_controller(condition)`; `wait_ready` also waits for a
quorum leader; `controller_id()` stays what Metadata says (in Raft mode a live broker's id, as
KRaft brokers report). Settings in `overrides` that a controller knows too (num.partitions,
default.replication.factor, auto.leader.rebalance.enable, log.* defaults, ...) reach the
controllers as well: they apply them in Raft mode; `controller_overrides` only the controllers.
Short lifecycle timeouts: broker.session.timeout.ms 3000, broker.heartbeat.interval.ms 750.

Fixtures (tests/integration/cluster/conftest.py): `zk_cluster_factory(brokers=3, overrides=None,
start=True, env=None, broker_env=None) -> ZkCluster`, `raft_cluster_factory(...) -> RaftCluster`
and `cluster_factory` (parametrized: ids `zk` and `raft`), every process killed at teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from client import Admin
from client.metadata import PartitionInfo
from deploy.cluster.quorum import QuorumReport
from deploy.cluster.raft import (
    CONTROLLER_BASE_ID,
    broker_raft_lines,
    controller_part,
    new_cluster_id,
    quorum_report,
    voters_string,
)
from deploy.cluster.zookeeper import free_port
from protocol.errors import KafkaError
from tests.support.broker_process import BrokerProcess
from tests.support.controller_process import ControllerProcess

DEFAULT_SESSION_TIMEOUT_MS = 3000
DEFAULT_HEARTBEAT_INTERVAL_MS = 750

__all__ = [
    "DEFAULT_HEARTBEAT_INTERVAL_MS",
    "DEFAULT_SESSION_TIMEOUT_MS",
    "Cluster",
    "RaftCluster",
    "ZkCluster",
]


class Cluster:
    """What ZK-mode and Raft-mode clusters share: the brokers, and asking them (Metadata)."""

    mode = ""
    brokers: dict[int, BrokerProcess]
    paused: set[int]

    def _make_brokers(
        self,
        count: int,
        common: Mapping[str, Any],
        env: Mapping[str, str] | None,
        broker_overrides: Mapping[int, Mapping[str, Any]] | None,
        broker_env: Mapping[int, Mapping[str, str]] | None,
    ) -> None:
        self.paused = set()
        self.brokers = {
            node_id: BrokerProcess(
                self.tmp_dir / f"broker-{node_id}",
                {**common, **(broker_overrides or {}).get(node_id, {})},
                node_id=node_id,
                env={**(env or {}), **(broker_env or {}).get(node_id, {})},
            )
            for node_id in range(1, count + 1)
        }

    tmp_dir: Path

    # -- processes -------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.port)

    def live_bootstrap(self) -> str:
        """Only the brokers whose process runs and is not paused (a client must not start on a
        dead or frozen one)."""
        return ",".join(
            b.bootstrap for i, b in self.brokers.items() if b.running and i not in self.paused
        )

    def pause(self, node_id: int) -> None:
        """SIGSTOP broker `node_id` (its ZooKeeper session expires after the timeout)."""
        self.brokers[node_id].pause()
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        self.brokers[node_id].resume()
        self.paused.discard(node_id)

    def start(self, timeout: float = 60.0) -> None:
        for proc in self.brokers.values():
            proc.start(timeout)

    async def astart(self, within: float = 60.0) -> None:
        await trio.to_thread.run_sync(self.start, within)

    def cleanup(self) -> None:
        for proc in self.brokers.values():
            proc.cleanup()

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(
            f"--- broker {i} ---\n{p.log_tail(lines)}" for i, p in self.brokers.items()
        )

    # -- asking the cluster ----------------------------------------------------------------

    def admin(self, **config: Any) -> Admin:
        return Admin(
            {
                "bootstrap.servers": self.live_bootstrap(),
                "default.api.timeout.ms": 10_000,
                "socket.connection.setup.timeout.ms": 1000,
                "request.timeout.ms": 5000,
                **config,
            }
        )

    async def _metadata(self) -> tuple[int, list[int], dict[tuple[str, int], PartitionInfo]]:
        async with self.admin() as admin:
            cluster = await admin.describe_cluster()
            topics = await admin.describe_topics()
        parts = {(p.topic, p.partition): p for t in topics for p in t.partitions}
        return cluster.controller_id, [b.node_id for b in cluster.brokers], parts

    async def controller_id(self) -> int:
        return (await self._metadata())[0]

    async def live_broker_ids(self) -> list[int]:
        return (await self._metadata())[1]

    async def partition(self, topic: str, partition: int) -> PartitionInfo:
        parts = (await self._metadata())[2]
        return parts[(topic, partition)]

    async def wait_ready(self, within: float = 60.0, *, brokers: int | None = None) -> None:
        """Until a controller exists and `brokers` (default: all running) are live."""
        wanted = (
            brokers
            if brokers is not None
            else sum(p.running and i not in self.paused for i, p in self.brokers.items())
        )
        await self._wait(
            lambda meta: meta[0] >= 0 and len(meta[1]) >= wanted,
            within,
            f"a controller and {wanted} live brokers",
        )

    async def wait_controller(self, condition: Callable[[int], bool], within: float = 60.0) -> int:
        found: list[int] = []

        def check(meta: tuple[int, list[int], Any]) -> bool:
            if meta[0] >= 0 and condition(meta[0]):
                found.append(meta[0])
                return True
            return False

        await self._wait(check, within, "the controller to change")
        return found[-1]

    async def wait_partition(
        self,
        topic: str,
        partition: int,
        condition: Callable[[PartitionInfo], bool],
        within: float = 60.0,
    ) -> PartitionInfo:
        found: list[PartitionInfo] = []

        def check(meta: tuple[int, list[int], dict[tuple[str, int], PartitionInfo]]) -> bool:
            p = meta[2].get((topic, partition))
            if p is not None and condition(p):
                found.append(p)
                return True
            return False

        await self._wait(check, within, f"{topic}-{partition} to reach the expected state")
        return found[-1]

    async def _wait(self, check: Callable[[Any], bool], within: float, what: str) -> None:
        last: Any = None
        with trio.move_on_after(within):
            while True:
                try:
                    last = await self._metadata()
                    if check(last):
                        return
                except Exception as exc:  # the cluster is moving: ask again
                    last = exc
                await trio.sleep(0.1)
        raise AssertionError(
            f"no {what} within {within:g} s (last seen: {last!r})\n{self.log_tails()}"
        )


class ZkCluster(Cluster):
    """N ZK-mode brokers on the caller's ZooKeeper (chroot)."""

    mode = "zk"

    def __init__(
        self,
        tmp_dir: str | Path,
        zookeeper_connect: str,
        *,
        brokers: int = 3,
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        broker_overrides: Mapping[int, Mapping[str, Any]] | None = None,
        broker_env: Mapping[int, Mapping[str, str]] | None = None,
    ) -> None:
        """`broker_overrides[node_id]`: that broker's own configs on top of `overrides` (its
        listeners, advertised.listeners, ...); `broker_env[node_id]`: its environment on top
        of `env` (e.g. TRIOKA_FAILPOINTS)."""
        self.tmp_dir = Path(tmp_dir)
        self.zookeeper_connect = zookeeper_connect
        common = {
            "metadata.mode": "zk",
            "zookeeper.connect": zookeeper_connect,
            "zookeeper.session.timeout.ms": session_timeout_ms,
            "default.replication.factor": min(3, brokers),
            "offsets.topic.replication.factor": min(3, brokers),
            "trioka.telemetry.replication.factor": min(3, brokers),
            # Followers come back quickly after a failure (Kafka's 1 s is long for tests).
            "replica.fetch.backoff.ms": 100,
            **(overrides or {}),
        }
        self._make_brokers(brokers, common, env, broker_overrides, broker_env)


class RaftCluster(Cluster):
    """N controller processes (a Raft quorum, ids 3001..) and M Raft-mode brokers."""

    mode = "raft"

    def __init__(
        self,
        tmp_dir: str | Path,
        *,
        brokers: int = 3,
        controllers: int = 3,
        overrides: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
        broker_overrides: Mapping[int, Mapping[str, Any]] | None = None,
        broker_env: Mapping[int, Mapping[str, str]] | None = None,
        controller_overrides: Mapping[str, Any] | None = None,
        controller_env: Mapping[str, str] | None = None,
    ) -> None:
        """`overrides` go to every broker and, for the keys a controller knows, to every
        controller; `controller_overrides` to the controllers only; `broker_overrides[id]` and
        `broker_env[id]` to one broker on top."""
        self.tmp_dir = Path(tmp_dir)
        self.cluster_id = new_cluster_id()
        host = "127.0.0.1"
        ports = {CONTROLLER_BASE_ID + i: free_port(host) for i in range(controllers)}
        self.voters = voters_string([(i, host, p) for i, p in ports.items()])
        lifecycle = {
            "broker.session.timeout.ms": session_timeout_ms,
            "broker.heartbeat.interval.ms": heartbeat_interval_ms,
        }
        shared = {
            "default.replication.factor": max(1, min(3, brokers)),
            "offsets.topic.replication.factor": max(1, min(3, brokers)),
            "trioka.telemetry.replication.factor": max(1, min(3, brokers)),
            **(overrides or {}),
        }
        ctl_settings = {
            **lifecycle,
            **controller_part({k: str(v) for k, v in shared.items()}),
            **(controller_overrides or {}),
        }
        self.controllers: dict[int, ControllerProcess] = {
            node_id: ControllerProcess(
                self.tmp_dir / f"controller-{node_id}",
                node_id,
                port,
                voters=self.voters,
                cluster_id=self.cluster_id,
                overrides=ctl_settings,
                env=controller_env,
            )
            for node_id, port in ports.items()
        }
        common: dict[str, Any] = {
            **self._raft_broker_settings(lifecycle),
            # Followers come back quickly after a failure (Kafka's 1 s is long for tests).
            "replica.fetch.backoff.ms": 100,
            **shared,
        }
        self._make_brokers(brokers, common, env, broker_overrides, broker_env)
        for proc in self.brokers.values():
            proc.overrides.setdefault("metadata.log.dir", str(proc.tmp_dir / "metadata"))

    def _raft_broker_settings(self, lifecycle: Mapping[str, int]) -> dict[str, str]:
        """broker_raft_lines' keys as --override values (lists comma-separated)."""
        import tomllib

        toml = broker_raft_lines(self.voters, Path("unused"), self.cluster_id, lifecycle)
        out = {}
        for key, value in tomllib.loads(toml).items():
            if key == "metadata.log.dir":
                continue  # one per broker (below)
            out[key] = ",".join(value) if isinstance(value, list) else str(value)
        return out

    # -- processes -------------------------------------------------------------------------

    @property
    def controller_bootstrap(self) -> str:
        return ",".join(c.bootstrap for c in self.controllers.values())

    def live_controller_bootstrap(self) -> str:
        return ",".join(c.bootstrap for c in self.controllers.values() if c.running)

    def start(self, timeout: float = 60.0) -> None:
        """The controllers first (together: a voter alone cannot elect), then the brokers."""
        for ctl in self.controllers.values():
            ctl.start(timeout)
        super().start(timeout)

    def cleanup(self) -> None:
        super().cleanup()
        for ctl in self.controllers.values():
            ctl.cleanup()

    def log_tails(self, lines: int = 30) -> str:
        return "\n".join(
            [f"--- controller {i} ---\n{c.log_tail(lines)}" for i, c in self.controllers.items()]
            + [super().log_tails(lines)]
        )

    # -- asking the quorum -----------------------------------------------------------------

    async def quorum(self) -> QuorumReport:
        """DescribeQuorum from the leader (`trioka quorum describe`'s code); KafkaError when
        no running controller knows a leader."""
        return await quorum_report(self.live_controller_bootstrap())

    async def active_controller_id(self) -> int:
        """The quorum leader's id: the active controller (-1: none known)."""
        try:
            return (await self.quorum()).leader_id
        except (KafkaError, OSError):
            return -1

    async def wait_active_controller(
        self, condition: Callable[[int], bool] = lambda _: True, within: float = 60.0
    ) -> int:
        """Until the quorum has a leader that satisfies `condition`; returns its id."""
        last = -1
        with trio.move_on_after(within):
            while True:
                last = await self.active_controller_id()
                if last >= 0 and condition(last):
                    return last
                await trio.sleep(0.1)
        raise AssertionError(
            f"no such active controller within {within:g} s (last: {last})\n{self.log_tails()}"
        )

    async def wait_ready(self, within: float = 60.0, *, brokers: int | None = None) -> None:
        """Until the quorum has a leader and `brokers` (default: all running) are live
        (registered and unfenced: listed in Metadata)."""
        deadline = trio.current_time() + within
        await self.wait_active_controller(within=within)
        await super().wait_ready(max(0.1, deadline - trio.current_time()), brokers=brokers)
