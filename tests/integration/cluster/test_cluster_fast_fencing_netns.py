"""Fast fencing against network faults, both metadata modes, every node in its own network
namespace (`cluster_up(netns=...)`), with a 30 s session so that only the fast fencing can fence
within the test's bounds (controller.liveness has the rule):

- A REJECT rule on everything from the controllers forges ECONNREFUSED: the rule cannot tell it
  from a dead process, so the broker is fenced early (documented); once the rule goes it comes
  back by itself: Raft mode at its next heartbeat, ZK mode when it answers the controller's
  probe with its epoch (ZkMode.reread_brokers), and it rejoins the ISR.
- A reset of every established connection while the broker lives (iptables REJECT tcp-reset on
  all but SYNs, as a fault proxy's RST): the controller sees the connection end, probes, gets
  no answer, and does not fence ("broker connection lost; not fenced early").
- DROP (a partition from the controllers): no connection ends, nothing is probed; the broker
  keeps its leadership through a 10 s watch.

The REJECT comes first, on a fresh cluster: a fault only acts on connections that exist, and
each later one runs on a partition the victim leads, whose connections carry traffic.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from client import Admin, NewTopic
from client.metadata import PartitionInfo
from deploy.cluster import netns
from deploy.cluster.layout import plan_cluster_network
from deploy.cluster.supervisor import cluster_down, cluster_up, describe_cluster, read_state
from tests.support.waiting import eventually

WHY_NOT = netns.available()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"no network namespaces: {WHY_NOT}")
SESSION_MS = 30_000
WATCH_S = 10.0


def _partition(bootstrap: str, topic: str, index: int) -> PartitionInfo:
    async def go() -> PartitionInfo:
        props = {"bootstrap.servers": bootstrap, "default.api.timeout.ms": 5000,
                 "request.timeout.ms": 5000}  # fmt: skip
        async with Admin(props) as admin:
            (description,) = await admin.describe_topics([topic])
            return next(p for p in description.partitions if p.partition == index)

    return trio.run(go)


def _events(log_path: str, name: str) -> list[dict[str, Any]]:
    out = []
    for line in Path(log_path).read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == name:
            out.append(event)
    return out


def _create(bootstrap: str, assignment: dict[int, list[int]], name: str) -> None:
    async def go() -> None:
        async with Admin({"bootstrap.servers": bootstrap}) as admin:
            await admin.create_topics([NewTopic(name, replica_assignment=assignment)])

    trio.run(go)


@pytest.mark.parametrize("mode", ["zk", "raft"])
def test_network_faults_fence_only_what_the_rule_cannot_tell_from_death(
    tmp_path: Path, mode: str
) -> None:
    cluster_dir = tmp_path / "c"
    plan = plan_cluster_network(cluster_dir, mode=mode, brokers=3)
    try:
        state = cluster_up(cluster_dir, mode=mode, brokers=3, network=plan,
                           session_timeout_ms=SESSION_MS,
                           overrides=["auto.leader.rebalance.enable=false"], timeout=120)  # fmt: skip
        bootstrap = state.bootstrap
        eventually(lambda: trio.run(describe_cluster, bootstrap),
                    lambda r: len(r.brokers) == 3, "3 live brokers")  # fmt: skip
        if mode == "zk":
            controller_id = trio.run(describe_cluster, bootstrap).controller_id
            controllers = [f"broker-{controller_id}"]
            victim, bystander = (b for b in (1, 2, 3) if b != controller_id)
            logs = [state.broker(controller_id).log]
        else:
            controllers = [c.name for c in state.controllers]
            victim, bystander = 2, 1
            logs = [c.log for c in state.controllers]
        others = ",".join(f"{b.host}:{b.port}" for b in state.brokers if b.node_id != victim)
        third = next(b for b in (1, 2, 3) if b not in (victim, bystander))
        _create(bootstrap, {0: [victim, bystander, third]}, "watched")
        eventually(lambda: _partition(others, "watched", 0),
                   lambda p: p.leader == victim and len(p.isr) == 3, "the victim leading")  # fmt: skip

        # REJECT everything from the controllers: indistinguishable from death, fenced early...
        netns.reject(plan, f"broker-{victim}", controllers)
        fenced = eventually(lambda: [e for log in logs for e in _events(log, "broker fenced early")],
                            lambda found: any(e.get("broker_id") == victim for e in found),
                            "the early fence", within=15)  # fmt: skip
        assert any("refused" in e["evidence"] for e in fenced), fenced
        eventually(lambda: _partition(others, "watched", 0),
                   lambda p: p.leader != victim and victim not in p.isr, "the leadership moving")  # fmt: skip
        netns.heal(plan)
        # ...and back by itself once the rule is gone.
        eventually(lambda: _partition(others, "watched", 0), lambda p: victim in p.isr,
                   "the victim back in the ISR", within=60)  # fmt: skip

        # A partition the victim leads, which the ZK controller follows: the connections the
        # next faults act on carry traffic all the time (Raft mode: the heartbeats too).
        _create(bootstrap, {0: [victim, bystander, third]}, "led")
        eventually(lambda: _partition(others, "led", 0),
                   lambda p: p.leader == victim and len(p.isr) == 3, "the victim leading")  # fmt: skip

        # Established connections reset while the broker lives: probed, not fenced.
        netns.reject(plan, f"broker-{victim}", controllers, established_only=True)
        eventually(lambda: [e for log in logs for e in _events(log, "broker connection lost; "
                                                                 "not fenced early")],
                   lambda found: any(e.get("broker_id") == victim for e in found),
                   "a probe that found the broker alive")  # fmt: skip
        assert _partition(others, "led", 0).leader == victim
        netns.heal(plan)

        # DROP: cut from the controllers; no connection ends, nothing is probed.
        for node in controllers:
            netns.cut(plan, f"broker-{victim}", node)
        until = time.monotonic() + WATCH_S
        while time.monotonic() < until:  # a bounded observation, not a wait
            assert _partition(others, "led", 0).leader == victim, "fenced while cut off (DROP)"
            time.sleep(0.5)
        netns.heal(plan)
    finally:
        if (cluster_dir / "cluster.json").exists():
            cluster_down(cluster_dir, timeout=30)
        network = (
            read_state(cluster_dir).network if (cluster_dir / "cluster.json").exists() else None
        )
        if network is not None:
            netns.destroy(network)
