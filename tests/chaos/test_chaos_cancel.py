"""A chaos run cancelled in the middle of a fault (Ctrl-C reaches the runner as a
cancellation of its trio task) still stops every process of its cluster, the paused one too."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from deploy.chaos.run import RunConfig, run_chaos
from deploy.cluster.pids import node_alive
from deploy.cluster.state import state_path
from deploy.cluster.supervisor import read_state
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow


def paused(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "T"


async def test_a_run_cancelled_during_a_pause_stops_its_cluster(tmp_path: Path) -> None:
    base = tmp_path / "c"
    config = RunConfig(mode="raft", nemeses=("pause",), time_limit_s=60, seed=0, dir=base)
    with trio.fail_after(180):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_chaos, config, print)
            await wait_until(lambda: state_path(base).exists(), within=90, every=0.2)

            def some_node_paused() -> bool:
                return any(paused(n.pid) for n in read_state(base).nodes if node_alive(n))

            await wait_until(some_node_paused, within=90, every=0.1)
            nursery.cancel_scope.cancel()
    state = read_state(base)
    assert state.brokers and state.controllers
    assert not [n.name for n in state.nodes if node_alive(n)]
