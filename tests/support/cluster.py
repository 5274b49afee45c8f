"""Test harness: a ZK-mode cluster of real broker processes on a real ZooKeeper.

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

The brokers are `python -m deploy.broker_app` with `metadata.mode=zk`, node ids 1..N, each with
its own log dir; the ZooKeeper is the caller's (usually the `zookeeper` fixture's chroot, so
clusters of different tests never meet). The session timeout defaults to 3 s (the house rules
ask for >= 2 s), so a SIGKILLed broker leaves the cluster within seconds.

Environment: `env` goes to every broker, `broker_env={node_id: {...}}` to one broker on top
(e.g. `TRIOKA_FAILPOINTS`, protocol/failpoints.py); `cluster.brokers[i].extra_env` may be
changed before a restart.

Fixture (tests/integration/cluster/conftest.py): `zk_cluster_factory(brokers=3, overrides=None,
start=True, env=None, broker_env=None) -> ZkCluster`, every process killed at teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from client import Admin
from client.metadata import PartitionInfo
from tests.support.broker_process import BrokerProcess

DEFAULT_SESSION_TIMEOUT_MS = 3000

__all__ = ["DEFAULT_SESSION_TIMEOUT_MS", "ZkCluster"]


class ZkCluster:
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
            # Followers come back quickly after a failure (Kafka's 1 s is long for tests).
            "replica.fetch.backoff.ms": 100,
            **(overrides or {}),
        }
        self.paused: set[int] = set()
        self.brokers: dict[int, BrokerProcess] = {
            node_id: BrokerProcess(
                self.tmp_dir / f"broker-{node_id}",
                {**common, **(broker_overrides or {}).get(node_id, {})},
                node_id=node_id,
                env={**(env or {}), **(broker_env or {}).get(node_id, {})},
            )
            for node_id in range(1, brokers + 1)
        }

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
