"""raft.metrics fed by a real RaftDriver (one voter on a DiskLogStore, its own registry), under
Strimzi's names (kafka_server_raftmetrics_*): commit latency per committed proposal (histogram,
and KRaft's windowed avg/max), the state/epoch/leader/vote/HW/LEO gauges read from the running
driver, leader changes; unbound gauges when the driver stops."""

from __future__ import annotations

import math
import random
from pathlib import Path

import trio
from prometheus_client import CollectorRegistry

from protocol.messages import Request, Response
from raft.core import RaftConfig, Role
from raft.disk_log_store import DiskLogStore
from raft.driver import RaftDriver
from raft.metrics import RaftMetrics, WindowedStat
from raft.quorum_state import FileQuorumStateStore
from tests.support.waiting import wait_until

P = "kafka_server_raftmetrics_"


class NoPeers:
    async def send(self, to_node: int, request: Request, *, timeout_s: float) -> Response:
        raise OSError(f"node {to_node} is not reachable")


def sample(registry: CollectorRegistry, name: str) -> float:
    got = registry.get_sample_value(P + name)
    assert got is not None, name
    return got


async def test_a_voter_feeds_commit_latency_leader_changes_and_its_gauges(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    metrics = RaftMetrics(registry)
    assert sample(registry, "current_leader") == -1  # nothing bound yet
    assert registry.get_sample_value(P + "current_state", {"current_state": "leader"}) is None
    assert math.isnan(sample(registry, "commit_latency_avg"))  # no commit yet, as KRaft's
    store = DiskLogStore(tmp_path / "meta")
    config = RaftConfig(
        node_id=1, voters=frozenset({1}), election_timeout_ms=100, append_linger_ms=1
    )
    driver = RaftDriver(
        config,
        store,
        FileQuorumStateStore(store.directory, voters=(1,)),
        NoPeers(),
        rng=random.Random(1),
        metrics=metrics,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        # The driver notes a new view once it has applied the Ready that made it leader.
        await wait_until(
            lambda: driver.role is Role.LEADER and sample(registry, "leader_changes_total") > 0,
            within=10,
        )
        assert sample(registry, "leader_changes_total") == 1
        assert sample(registry, "current_leader") == 1
        assert sample(registry, "current_epoch") == driver.epoch >= 1
        assert sample(registry, "current_vote") == 1  # it voted for itself
        assert registry.get_sample_value(P + "current_state", {"current_state": "leader"}) == 1
        for n in range(3):
            await driver.propose([f"r{n}".encode()])
        # One observation per committed proposal.
        assert sample(registry, "commit_latency_ms_count") == 3
        assert sample(registry, "commit_latency_ms_sum") >= 0
        assert 0 <= sample(registry, "commit_latency_avg") <= sample(registry, "commit_latency_max")
        assert sample(registry, "high_watermark") == driver.high_watermark
        assert sample(registry, "log_end_offset") == store.end_offset >= 3
        nursery.cancel_scope.cancel()
    assert sample(registry, "current_leader") == -1
    assert sample(registry, "current_epoch") == 0
    assert sample(registry, "current_vote") == -1
    assert registry.get_sample_value(P + "current_state", {"current_state": "leader"}) is None
    store.close()


def test_commit_latency_avg_and_max_cover_the_last_two_windows_as_kafkas_sensors() -> None:
    now = [0.0]
    stat = WindowedStat(window_s=30, samples=2, clock=lambda: now[0])
    assert all(math.isnan(v) for v in stat.read())
    stat.record(10)
    stat.record(30)
    now[0] = 31  # a second window
    stat.record(2)
    assert stat.read() == (14, 30)
    now[0] = 61  # the first window is out
    assert stat.read() == (2, 2)
    now[0] = 95  # both are
    assert all(math.isnan(v) for v in stat.read())
