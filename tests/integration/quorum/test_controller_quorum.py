"""Three real controller processes (`python -m deploy.node.controller`) on loopback: they elect
a leader (DescribeQuorum over a real socket shows it), the leader is SIGKILLed and another is
elected in a higher epoch, the old one restarts and rejoins as a follower with the same log;
`trioka quorum describe` as a subprocess. Every process is cleaned up by pid; every wait is a
condition under a deadline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from deploy.cluster.process import ManagedProcess
from deploy.cluster.zookeeper import free_port
from deploy.node.transport import PooledTransport
from protocol.errors import KafkaError
from protocol.messages.describe_quorum import DescribeQuorumPartitionResponse
from raft import wire
from raft.disk_log_store import DiskLogStore
from tests.support.waiting import wait_until

REPO_ROOT = Path(__file__).resolve().parents[3]
HOST = "127.0.0.1"
POLL_S = 0.05


class ControllerProcess(ManagedProcess):
    what = "controller"

    def __init__(
        self, tmp_dir: Path, node_id: int, port: int, voters: str, extra_config: str = ""
    ) -> None:
        self.tmp_dir = tmp_dir
        self.extra_config = extra_config
        """More TOML lines for controller.toml (e.g. the QuorumController's keys)."""
        self.node_id = node_id
        self.port = port
        self.voters = voters
        self.data_dir = tmp_dir / f"controller-{node_id}"
        self.config_file = tmp_dir / f"controller-{node_id}.toml"
        self.log_file = tmp_dir / f"controller-{node_id}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        self.config_file.write_text(
            'process.roles = ["controller"]\n'
            f"node.id = {self.node_id}\n"
            'cluster.id = "quorum-test"\n'
            f'"controller.quorum.voters" = "{self.voters}"\n'
            f'listeners = ["CONTROLLER://{HOST}:{self.port}"]\n'
            f'"metadata.log.dir" = "{self.data_dir}"\n'
            # Kafka's defaults scaled down so a failover takes about a second.
            '"controller.quorum.election.timeout.ms" = 300\n'
            '"controller.quorum.fetch.timeout.ms" = 600\n'
            '"controller.quorum.election.backoff.max.ms" = 300\n'
            '"controller.quorum.request.timeout.ms" = 600\n' + self.extra_config
        )
        env = {**os.environ, "TRIOKA_LOG_FORMAT": "json", "PYTHONPATH": str(REPO_ROOT)}
        # This start's events are the ones after what the log already holds.
        offset = self.log_file.stat().st_size if self.log_file.exists() else 0
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "deploy.node.controller", "--config", str(self.config_file)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:  # polling a condition under a deadline
            if self.proc.poll() is not None:
                raise RuntimeError(f"controller {self.node_id} exited:\n{self.log_tail()}")
            with self.log_file.open("rb") as f:
                f.seek(offset)
                if b'"controller started"' in f.read():
                    return
            if time.monotonic() > deadline:
                self.cleanup()
                raise RuntimeError(f"controller {self.node_id} did not start:\n{self.log_tail()}")
            time.sleep(POLL_S)

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_file.exists():
            return "(no log)"
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture
def controllers(tmp_path: Path) -> Iterator[dict[int, ControllerProcess]]:
    ports = {i: free_port(HOST) for i in (1, 2, 3)}
    voters = ",".join(f"{i}@{HOST}:{p}" for i, p in ports.items())
    procs = {i: ControllerProcess(tmp_path, i, ports[i], voters) for i in ports}
    try:
        for proc in procs.values():
            proc.start()
        yield procs
    finally:
        for proc in procs.values():
            proc.cleanup()


async def describe(
    transport: PooledTransport, procs: dict[int, ControllerProcess]
) -> dict[int, DescribeQuorumPartitionResponse]:
    """Each running controller's DescribeQuorum answer (the leader's has data)."""
    out = {}
    for i, proc in procs.items():
        if not proc.running:
            continue
        try:
            response = await transport.send(
                HOST, proc.port, wire.describe_quorum_request(), timeout_s=2
            )
        except KafkaError:
            continue
        out[i] = response.topics[0].partitions[0]  # type: ignore[attr-defined]
    return out


async def wait_for_leader(
    transport: PooledTransport,
    procs: dict[int, ControllerProcess],
    *,
    above_epoch: int = 0,
    within: float = 20,
) -> DescribeQuorumPartitionResponse:
    found: list[DescribeQuorumPartitionResponse] = []

    async def one_leader_all_agree() -> bool:
        answers = await describe(transport, procs)
        leaders = [p for p in answers.values() if p.error_code == 0]
        if len(leaders) != 1 or leaders[0].leader_epoch <= above_epoch:
            return False
        lead = leaders[0]
        # Every running node knows that leader and epoch, and the HW is in its epoch (the
        # leader's NoOpRecord committed).
        agree = all(
            (p.leader_id, p.leader_epoch) == (lead.leader_id, lead.leader_epoch)
            for p in answers.values()
        )
        if agree and lead.high_watermark > 0:
            found[:] = [lead]
            return True
        return False

    await wait_until(one_leader_all_agree, within=within, every=0.05)
    return found[0]


def log_entries(proc: ControllerProcess) -> list[tuple[int, int, bytes]]:
    store = DiskLogStore(proc.data_dir)
    try:
        return [(e.offset, e.epoch, e.data) for e in store.read(store.start_offset)]
    finally:
        store.close()


async def test_three_controllers_elect_fail_over_and_rejoin(
    controllers: dict[int, ControllerProcess],
) -> None:
    async with PooledTransport.open(client_id="quorum-test") as transport:
        first = await wait_for_leader(transport, controllers)
        assert [v.replica_id for v in first.current_voters] == [1, 2, 3]
        # Every voter has fetched up to the leader's log end.
        await wait_until(lambda: _all_caught_up(transport, controllers, first.leader_id), within=10)

        old = controllers[first.leader_id]
        await trio.to_thread.run_sync(old.kill)
        second = await wait_for_leader(transport, controllers, above_epoch=first.leader_epoch)
        assert second.leader_id != first.leader_id
        assert second.leader_epoch > first.leader_epoch
        dead = next(v for v in second.current_voters if v.replica_id == first.leader_id)
        assert dead.log_end_offset == -1  # never fetched in the new epoch

        await trio.to_thread.run_sync(old.start)
        # It rejoins as a follower of the new leader and catches up to its log end.
        await wait_until(
            lambda: _follows(transport, controllers, first.leader_id, second), within=20
        )
        await wait_until(
            lambda: _all_caught_up(transport, controllers, second.leader_id), within=20
        )
    # Stopped (SIGTERM: graceful), followers first: the active controller appends a NoOpRecord
    # whenever it is idle, so a node stopped earlier has a prefix of the leader's log.
    leader = second.leader_id
    for i in sorted(controllers, key=lambda i: i == leader):
        proc = controllers[i]
        assert await trio.to_thread.run_sync(proc.stop) == 0, proc.log_tail()
    logs = {i: log_entries(p) for i, p in controllers.items()}
    for entries in logs.values():
        assert entries == logs[leader][: len(entries)]
    epochs = sorted({epoch for _, epoch, _ in logs[leader]})
    assert first.leader_epoch in epochs and second.leader_epoch in epochs


async def _all_caught_up(
    transport: PooledTransport, procs: dict[int, ControllerProcess], leader: int
) -> bool:
    answers = await describe(transport, procs)
    lead = answers.get(leader)
    if lead is None or lead.error_code != 0:
        return False
    ends = {v.replica_id: v.log_end_offset for v in lead.current_voters}
    return len(set(ends.values())) == 1 and lead.high_watermark == ends[leader]


async def _follows(
    transport: PooledTransport,
    procs: dict[int, ControllerProcess],
    node: int,
    leader: DescribeQuorumPartitionResponse,
) -> bool:
    answers = await describe(transport, procs)
    mine = answers.get(node)
    return (
        mine is not None
        and mine.error_code != 0
        and (mine.leader_id, mine.leader_epoch) == (leader.leader_id, leader.leader_epoch)
    )


def _trioka(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "deploy.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        timeout=60,
    )


async def test_trioka_quorum_describe(controllers: dict[int, ControllerProcess]) -> None:
    async with PooledTransport.open(client_id="quorum-test") as transport:
        lead = await wait_for_leader(transport, controllers)
        await wait_until(lambda: _all_caught_up(transport, controllers, lead.leader_id), within=10)
    everyone = ",".join(f"{HOST}:{p.port}" for p in controllers.values())
    result = await trio.to_thread.run_sync(_trioka, "quorum", "describe",
                                           "--bootstrap-controller", everyone, "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    assert report["leader_id"] == lead.leader_id
    assert report["leader_epoch"] == lead.leader_epoch
    assert report["current_voters"] == [1, 2, 3]
    assert report["high_watermark"] >= lead.high_watermark
    statuses = {r["node_id"]: r["status"] for r in report["replicas"]}
    assert statuses[lead.leader_id] == "Leader"
    assert sorted(s for s in statuses.values()) == ["Follower", "Follower", "Leader"]

    table = await trio.to_thread.run_sync(_trioka, "quorum", "describe",
                                          "--bootstrap-controller", everyone)  # fmt: skip
    assert table.returncode == 0, table.stderr
    for word in ("LeaderId:", "HighWatermark:", "MaxFollowerLag:", "LogEndOffset", "Leader"):
        assert word in table.stdout

    # A follower alone is enough: its answer names the leader and where the voters listen.
    follower = next(p for i, p in controllers.items() if i != lead.leader_id)
    via = await trio.to_thread.run_sync(_trioka, "quorum", "describe", "--json",
                                        "--bootstrap-controller", f"{HOST}:{follower.port}")  # fmt: skip
    assert via.returncode == 0, via.stderr
    assert json.loads(via.stdout)["leader_id"] == lead.leader_id
    # Nobody answering: a clear error naming the address.
    nobody = f"{HOST}:{free_port(HOST)}"
    refused = await trio.to_thread.run_sync(_trioka, "quorum", "describe",
                                            "--bootstrap-controller", nobody)  # fmt: skip
    assert refused.returncode == 1
    assert f"no quorum leader among the bootstrap controllers: {nobody}" in refused.stderr
    bad = await trio.to_thread.run_sync(_trioka, "quorum", "describe",
                                        "--bootstrap-controller", "nohostport")  # fmt: skip
    assert bad.returncode == 2
    assert "'nohostport' is not host:port" in bad.stderr


def test_controller_refuses_a_bad_config(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "deploy.node.controller",
         "--override", "node.id=4", "--override", "metadata.log.dir=" + str(tmp_path),
         "--override", "controller.quorum.voters=1@127.0.0.1:1,2@127.0.0.1:2"],
        capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2
    assert "node.id: 4 is not one of controller.quorum.voters (1, 2)" in result.stderr
