"""Raft-mode brokers (metadata.mode=raft) against 3 real controller processes on loopback.

3 controllers (ids 3001-3003, a Raft quorum) and 3 broker processes (ids 1-3) that follow the
metadata log as observers, register and heartbeat: they become unfenced (Metadata lists them),
`Admin.create_topic` through a broker makes an RF=3 topic (forwarded to the active
controller), acks=all records are produced and consumed; SIGKILL of a leader broker: its
partitions move once broker.session.timeout.ms (3 s here) has passed, and no acknowledged
record is lost. Every process is cleaned up by pid; every wait is a condition under a deadline.

(A small local harness; tests/support/cluster.RaftCluster is CL's and replaces it once landed.)
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from broker.lifecycle import SHUTDOWN_ALLOWED
from client import Admin, Consumer, Producer
from deploy.zookeeper_process import free_port
from protocol.names import TopicPartition
from tests.support.broker_process import REPO_ROOT, BrokerProcess
from tests.support.waiting import wait_until

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("deploy.raft_controller") is None,
    reason="the controller side (deploy.raft_controller, QC's slice) has not landed yet",
)

HOST = "127.0.0.1"
CLUSTER_ID = "raft-broker-test-cluster"
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_MS = 500


class LocalControllerProcess(BrokerProcess):
    """One `python -m deploy.controller_app` voter; ready once it logged 'controller started'."""

    what = "controller"

    def __init__(self, tmp_dir: Path, node_id: int, port: int, voters: str) -> None:
        super().__init__(tmp_dir / f"controller-{node_id}", node_id=node_id)
        self.port = port
        self.voters = voters
        self.config_file = self.tmp_dir / "controller.toml"
        self.log_file = self.tmp_dir / "controller.log"

    def _write_config(self) -> None:
        self.config_file.write_text(
            'process.roles = ["controller"]\n'
            f'"node.id" = {self.node_id}\n'
            f'"cluster.id" = "{CLUSTER_ID}"\n'
            f'"controller.quorum.voters" = "{self.voters}"\n'
            f'listeners = ["CONTROLLER://{HOST}:{self.port}"]\n'
            f'"metadata.log.dir" = "{self.tmp_dir / "metadata"}"\n'
            f'"broker.session.timeout.ms" = {SESSION_TIMEOUT_MS}\n'
            f'"broker.heartbeat.interval.ms" = {HEARTBEAT_MS}\n'
        )

    def command(self) -> list[str]:
        return [sys.executable, "-m", "deploy.controller_app", "--config", str(self.config_file)]

    def start(self, timeout: float = 30.0) -> None:
        self._write_config()
        env = {**os.environ, "TRIOKA_LOG_FORMAT": "json", "PYTHONPATH": str(REPO_ROOT)}
        self._log_offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
                env=env,
                start_new_session=True,
            )
        self.starts += 1
        try:
            deadline = time.monotonic() + timeout
            while not any(e.get("event") == "controller started" for e in self.events()):
                if self._exited():
                    raise RuntimeError(f"controller {self.node_id} exited:\n{self.log_tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"controller {self.node_id} did not start")
                time.sleep(0.05)  # polling a condition under a deadline
        except BaseException:
            self.cleanup()
            raise

    def _exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None


class RaftBrokers:
    def __init__(self, tmp: Path) -> None:
        ports = {i: free_port(HOST) for i in (3001, 3002, 3003)}
        self.voters = ",".join(f"{i}@{HOST}:{p}" for i, p in ports.items())
        self.controllers = {
            i: LocalControllerProcess(tmp, i, p, self.voters) for i, p in ports.items()
        }
        overrides = {
            "metadata.mode": "raft",
            "process.roles": "broker",
            "controller.quorum.voters": self.voters,
            "controller.listener.names": "CONTROLLER",
            "cluster.id": CLUSTER_ID,
            "broker.heartbeat.interval.ms": HEARTBEAT_MS,
            "broker.session.timeout.ms": SESSION_TIMEOUT_MS,
            "default.replication.factor": 3,
            "replica.lag.time.max.ms": 4000,
        }
        self.brokers = {
            i: BrokerProcess(tmp / f"broker-{i}", overrides, node_id=i) for i in (1, 2, 3)
        }

    def start(self) -> None:
        for c in self.controllers.values():
            c.start()
        for b in self.brokers.values():
            b.start()

    def cleanup(self) -> None:
        for p in [*self.brokers.values(), *self.controllers.values()]:
            p.cleanup()

    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.running)

    def admin(self) -> Admin:
        return Admin(
            {
                "bootstrap.servers": self.bootstrap(),
                "default.api.timeout.ms": 20_000,
                "request.timeout.ms": 5000,
            }
        )

    async def wait_live(self, ids: set[int], within: float = 60.0) -> None:
        async def live() -> set[int]:
            async with self.admin() as admin:
                return {b.node_id for b in (await admin.describe_cluster()).brokers}

        async def all_live() -> bool:
            return await live() == ids

        await wait_until(all_live, within=within, every=0.2)

    async def partition(self, topic: str, p: int):  # -> PartitionInfo
        async with self.admin() as admin:
            topics = await admin.describe_topics([topic])
        return next(x for x in topics[0].partitions if x.partition == p)


@pytest.fixture
def raft_brokers(tmp_path: Path) -> Iterator[RaftBrokers]:
    cluster = RaftBrokers(tmp_path)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.cleanup()


async def consume_all(cluster: RaftBrokers, topic: str) -> list[bytes]:
    out: list[bytes] = []
    async with Consumer(
        bootstrap_servers=cluster.bootstrap(), auto_offset_reset="earliest"
    ) as consumer:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        position = 0
        with trio.fail_after(60):
            while position < end:
                for record in await consumer.poll(1000):
                    position = record.offset + 1
                    out.append(record.value)
    return out


async def produce(cluster: RaftBrokers, topic: str, values: list[bytes]) -> None:
    async with Producer(
        bootstrap_servers=cluster.bootstrap(),
        acks="all",
        linger_ms=1,
        request_timeout_ms=5000,
        delivery_timeout_ms=60000,
        metadata_max_age_ms=1000,
    ) as producer:
        for value in values:
            await producer.send_and_wait(topic, value, partition=0)


async def test_raft_brokers_register_create_topic_and_survive_a_leader_kill(
    raft_brokers: RaftBrokers,
) -> None:
    cluster = raft_brokers
    await cluster.wait_live({1, 2, 3})
    async with cluster.admin() as admin:
        await admin.create_topic("events", 1, 3, {"min.insync.replicas": "2"})

    async def fully_replicated() -> bool:
        info = await cluster.partition("events", 0)
        return info.leader >= 0 and len(info.isr) == 3

    await wait_until(fully_replicated, within=30, every=0.2)
    first = [b"a%d" % i for i in range(20)]
    await produce(cluster, "events", first)
    assert await consume_all(cluster, "events") == first

    leader = (await cluster.partition("events", 0)).leader
    cluster.brokers[leader].kill()

    # Fenced after broker.session.timeout.ms without heartbeats; the partition moves.
    async def moved() -> bool:
        return (await cluster.partition("events", 0)).leader not in (leader, -1)

    await wait_until(moved, within=SESSION_TIMEOUT_MS / 1000 + 30, every=0.2)
    assert leader not in (await cluster.partition("events", 0)).isr
    second = [b"b%d" % i for i in range(20)]
    await produce(cluster, "events", second)
    assert await consume_all(cluster, "events") == first + second


async def test_sigterm_moves_leadership_through_the_heartbeat_before_exit(
    raft_brokers: RaftBrokers,
) -> None:
    """Controlled shutdown through the heartbeat (want_shut_down until should_shut_down): the
    leader's partitions move while it is still up, well before a session timeout."""
    cluster = raft_brokers
    await cluster.wait_live({1, 2, 3})
    async with cluster.admin() as admin:
        await admin.create_topic("orders", 1, 3)

    async def fully_replicated() -> bool:
        info = await cluster.partition("orders", 0)
        return info.leader >= 0 and len(info.isr) == 3

    await wait_until(fully_replicated, within=30, every=0.2)
    await produce(cluster, "orders", [b"x"])
    leader = (await cluster.partition("orders", 0)).leader
    assert cluster.brokers[leader].stop(timeout=30) == 0
    events = [e.get("event") for e in cluster.brokers[leader].events()]
    assert SHUTDOWN_ALLOWED in events
    info = await cluster.partition("orders", 0)
    assert info.leader not in (leader, -1) and leader not in info.isr
    assert await consume_all(cluster, "orders") == [b"x"]
