"""Seeded chaos runs, both metadata modes, with kill, pause and controller faults: the history
must be valid (nothing acknowledged lost, no duplicate, ...) AND the faults must have taken
effect (leaders moved, enough writes acknowledged, final reads done). ~45-60 s each."""

from __future__ import annotations

import pytest

from deploy.chaos.run import HISTORY_TOPIC, RunConfig, RunResult
from deploy.cluster import netns
from tests.chaos.conftest import ChaosRun

pytestmark = pytest.mark.slow


def assert_took_effect(result: RunResult, *, min_acknowledged: int, faults: int) -> None:
    run = result.verdict["run"]
    stats = result.verdict["stats"]
    assert stats["acknowledged"] >= min_acknowledged, result.summary
    assert stats["final_reads"], result.summary
    assert run["leader_changes"] >= 1, result.summary
    assert run["faults"]["injected"] >= faults, result.summary
    assert run["faults"]["failed"] == 0, result.summary
    assert run["shipped"].get("records", 0) > 0, run["shipped"]
    assert run["shipped"]["topic"] == HISTORY_TOPIC


@pytest.mark.parametrize(("mode", "secure"), [("raft", True), ("zk", False)])
async def test_kill_pause_controller(chaos_run: ChaosRun, mode: str, secure: bool) -> None:
    # Seed 39's schedule: SIGKILL a partition leader, SIGSTOP another past the session
    # timeout (a zombie leader), SIGKILL the active controller (Raft: the quorum leader; ZK:
    # the controller broker). The Raft run is on `cluster up --secure`'s cluster: TLS on every
    # listener, the workload logging in with SCRAM, the nodes with certificates, the
    # authorizer on (plaintext Raft runs: the other tests here).
    result = await chaos_run(
        RunConfig(
            mode=mode, nemeses=("kill", "pause", "controller"), time_limit_s=25, seed=39,
            rate=100, secure=secure,
        )
    )  # fmt: skip
    assert result.exit_code == 0, result.summary
    assert result.verdict["valid"], result.summary
    assert_took_effect(result, min_acknowledged=500, faults=3)
    verified = result.verdict["run"]["faults"]["verified"]
    assert (
        verified.get("leader-moved-from-paused", 0) + verified.get("leader-moved-from-killed", 0)
        >= 1
    ), verified
    # Retries reach new leaders here: each is answered with its original offset (issue 6: no
    # DUPLICATE_SEQUENCE_NUMBER, offset -1, since an idempotent retry is sent alone).
    assert result.verdict["run"]["operations"].get("send-ok-without-offset", 0) == 0, result.summary
    # The client-observed gaps around the faults are measured (not judged: figures).
    gaps = result.verdict["unavailability"]
    assert gaps["measured"] >= 1 and gaps["max_s"] > 0, gaps
    assert "unavailability after a fault" in result.summary
    assert result.out is not None
    assert (result.out / "history.jsonl").stat().st_size > 0
    assert (result.out / "verdict.json").exists()
    if secure:
        cluster_dir = result.out.parent
        assert (cluster_dir / "client.properties").stat().st_mode & 0o077 == 0
        broker = (cluster_dir / "broker-1" / "broker.toml").read_text()
        assert '"EXTERNAL:SASL_SSL", "INTERNAL:SSL", "CONTROLLER:SSL"' in broker


async def test_latency_then_kill_behind_the_fault_proxies(chaos_run: ChaosRun) -> None:
    # Seed 2's schedule: +100 ms (±25) on every broker's requests through its proxy (clients
    # and followers alike), then SIGKILL a random broker.
    result = await chaos_run(
        RunConfig(mode="raft", nemeses=("latency", "kill"), time_limit_s=20, seed=2, rate=100)
    )
    assert result.exit_code == 0, result.summary
    assert_took_effect(result, min_acknowledged=300, faults=2)
    assert result.verdict["run"]["faults"]["verified"].get("delayed", 0) >= 1
    delayed = sum(p["frames_delayed"] for p in result.verdict["run"]["proxies"].values())
    assert delayed > 0, result.verdict["run"]["proxies"]


@pytest.mark.parametrize("mode", ["raft", "zk"])
async def test_partition_and_expiry_in_network_namespaces(chaos_run: ChaosRun, mode: str) -> None:
    # Seed 6's schedule: SIGKILL a partition leader; cut a broker from ZooKeeper / the
    # controllers; cut the controller broker (zk; raft: a broker) from them past the session
    # timeout (expiry, fencing). Every node runs in its own network namespace.
    if netns.available() is not None:
        pytest.skip(f"network namespaces: {netns.available()}")
    result = await chaos_run(
        RunConfig(
            mode=mode, nemeses=("partition", "zk-expiry", "kill"), time_limit_s=30, seed=6, rate=100
        )
    )
    assert result.exit_code == 0, result.summary
    assert_took_effect(result, min_acknowledged=500, faults=3)
    verified = result.verdict["run"]["faults"]["verified"]
    assert verified.get("cut", 0) == 2, verified  # a TCP probe across failed during each cut
    assert verified.get("out-of-live-brokers", 0) >= 1, verified  # a session expired / fenced
    assert verified.get("healed", 0) == 2, verified
