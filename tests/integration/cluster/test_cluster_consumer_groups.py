"""Consumer groups on a 3-broker cluster, in both metadata modes (`cluster_factory`):

- three `trioka consume --group` processes share six partitions (two each, every record read
  once); one is SIGKILLed and, once its session expired, the others take its partitions over
  at the offsets it had committed: nothing skipped, nothing re-read before the commit;
  `trioka group describe` then shows, per partition, what was produced minus what was
  committed as the lag;
- the coordinator's broker is SIGKILLed under two in-process members committing after every
  poll: the offsets partition's new leader loads the group (held 2 s by the failpoint
  `group.coordinator.hold_load`, so COORDINATOR_LOAD_IN_PROGRESS is met), the members find it
  and carry on; every record is read, and only records whose commit failed are read twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from client import Consumer, Producer
from client.errors import CommitFailedError, RebalanceInProgressError
from tests.integration.cluster.conftest import ClusterFactory
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until

TOPIC = "work"
PARTITIONS = 6
GROUP_BROKER_CONFIGS = {
    "offsets.topic.num.partitions": 6,
    "offsets.topic.replication.factor": 3,
    "group.min.session.timeout.ms": 2000,
    "group.initial.rebalance.delay.ms": 0,
}
SESSION = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


async def create_topic(cluster: Cluster) -> None:
    async with cluster.admin() as admin:
        await admin.create_topic(TOPIC, PARTITIONS, 3, {})
    for p in range(PARTITIONS):
        await cluster.wait_partition(TOPIC, p, lambda i: i.leader >= 0 and len(i.isr) == 3)


async def produce(cluster: Cluster, start: int, count: int) -> None:
    """Values start..start+count-1, value v to partition v % PARTITIONS."""
    async with Producer(bootstrap_servers=cluster.live_bootstrap(), linger_ms=0) as producer:
        for v in range(start, start + count):
            await producer.send(TOPIC, b"%d" % v, partition=v % PARTITIONS)
        await producer.flush()


class ConsoleConsumer:
    """`trioka consume TOPIC --group G --follow --format json` as a process, stdout in a file."""

    def __init__(self, tmp: Path, name: str, bootstrap: str, group: str) -> None:
        self.name = name
        self.out_path = tmp / f"{name}.jsonl"
        self.err_path = tmp / f"{name}.log"
        props = {**SESSION, "auto.commit.interval.ms": 200, "client.id": name}
        args = [sys.executable, "-m", "deploy.cli", "consume", TOPIC, "--group", group,
                "--follow", "--from-beginning", "--format", "json", "-b", bootstrap]  # fmt: skip
        for key, value in props.items():
            args += ["-X", f"{key}={value}"]
        with self.out_path.open("wb") as out, self.err_path.open("wb") as err:
            self.proc = subprocess.Popen(args, stdout=out, stderr=err, env=dict(os.environ))

    def records(self) -> list[tuple[int, int, int]]:
        """(partition, offset, value) of each record printed so far (complete lines only)."""
        text = self.out_path.read_text()
        lines = text.splitlines()[: text.count("\n")]
        return [(r["partition"], r["offset"], int(r["value"])) for r in map(json.loads, lines) if r]

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def cleanup(self) -> None:
        self.kill()
        self.proc.wait(10)


@pytest.fixture
def consoles(tmp_path: Path) -> Iterator[list[ConsoleConsumer]]:
    made: list[ConsoleConsumer] = []
    yield made
    for c in made:
        c.cleanup()


def all_records(consumers: list[ConsoleConsumer]) -> list[tuple[int, int, int]]:
    return [r for c in consumers for r in c.records()]


async def committed(cluster: Cluster, group: str) -> dict[int, int]:
    async with cluster.admin() as admin:
        offsets = await admin.list_group_offsets(group)
    return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == TOPIC}


async def members(cluster: Cluster, group: str) -> dict[str, set[int]]:
    async with cluster.admin() as admin:
        described = (await admin.describe_groups([group]))[group]
    if described.state != "Stable":
        return {}
    return {m.client_id: {tp.partition for tp in m.assignment} for m in described.members}


async def test_three_members_share_six_partitions_and_survive_a_killed_member(
    cluster_factory: ClusterFactory, consoles: list[ConsoleConsumer], tmp_path: Path
) -> None:
    cluster = cluster_factory(3, GROUP_BROKER_CONFIGS)
    await cluster.wait_ready()
    await create_topic(cluster)
    for name in ("c1", "c2", "c3"):
        consoles.append(ConsoleConsumer(tmp_path, name, cluster.bootstrap, "shared"))

    async def shared_evenly() -> bool:
        owned = await members(cluster, "shared")
        return sorted(len(ps) for ps in owned.values()) == [2, 2, 2]

    await wait_until(shared_evenly, within=60, every=0.2)
    await produce(cluster, 0, 600)
    await wait_until(lambda: len(all_records(consoles)) >= 600, within=60, every=0.1)
    # every record once, each from the member that owns its partition
    first = all_records(consoles)
    assert sorted(v for _, _, v in first) == list(range(600))
    owned = await members(cluster, "shared")
    for c in consoles:
        assert {p for p, _, _ in c.records()} == owned[c.name]
    await wait_until(lambda: _all_committed(cluster, "shared", 100), within=30, every=0.2)

    # SIGKILL a member: its partitions wait for its session to expire, then move over
    victim = consoles[0]
    victim_partitions = owned["c1"]
    victim.kill()
    victim.proc.wait(10)
    at_kill = await committed(cluster, "shared")
    await produce(cluster, 600, 300)
    survivors = consoles[1:]

    async def taken_over() -> bool:
        owned = await members(cluster, "shared")
        return set(owned) == {"c2", "c3"} and sorted(len(ps) for ps in owned.values()) == [3, 3]

    await wait_until(taken_over, within=60, every=0.2)
    await wait_until(lambda: len(all_records(survivors)) >= 600 + 300 - 200, within=60, every=0.1)
    after = [r for c in survivors for r in c.records()]
    assert sorted({v for _, _, v in first + after}) == list(range(900))  # nothing skipped
    for p in victim_partitions:
        taken = [o for part, o, _ in after if part == p]
        # no re-reading before the victim's commit: the survivors start exactly there
        assert min(taken) == at_kill[p], (p, min(taken), at_kill)
    assert len(after) == len({(p, o) for p, o, _ in after})  # and no survivor read twice

    # graceful stop (SIGINT: close() commits and leaves), then lag = produced - committed
    for c in survivors:
        c.kill(signal.SIGINT)
        c.proc.wait(30)
    await produce(cluster, 900, 12)  # two more records in every partition
    final = await committed(cluster, "shared")
    assert final == dict.fromkeys(range(PARTITIONS), 150)
    described = await trio.to_thread.run_sync(
        _trioka, "group", "describe", "shared", "-b", cluster.live_bootstrap()
    )
    assert described.returncode == 0, described.stderr
    assert "has no active members" in described.stderr
    rows = [line.split() for line in described.stdout.splitlines()[1:]]
    produced = 912 // PARTITIONS
    assert {int(r[2]): (int(r[3]), int(r[4]), int(r[5])) for r in rows} == {
        p: (final[p], produced, produced - final[p]) for p in range(PARTITIONS)
    }


async def _all_committed(cluster: Cluster, group: str, per_partition: int) -> bool:
    return await committed(cluster, group) == dict.fromkeys(range(PARTITIONS), per_partition)


def _trioka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deploy.cli", *args], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


async def test_the_group_resumes_at_its_commits_after_its_coordinator_is_killed(
    cluster_factory: ClusterFactory,
) -> None:
    # every load of an offsets partition waits 2 s: the members meet COORDINATOR_LOAD_IN_PROGRESS
    # on the new coordinator (commits, heartbeats, joins) and must wait it out
    hold = {"TRIOKA_FAILPOINTS": "group.coordinator.hold_load=return(2)"}
    cluster = cluster_factory(3, GROUP_BROKER_CONFIGS, env=hold)
    await cluster.wait_ready()
    await create_topic(cluster)
    await produce(cluster, 0, 300)
    seen: list[tuple[int, int, int]] = []
    uncommitted: set[tuple[int, int]] = set()
    """Records of polls whose commit failed (a rebalance): those may be read again."""
    stop = trio.Event()

    async def member(name: str) -> None:
        config: dict[str, Any] = {**SESSION, "bootstrap.servers": cluster.bootstrap,
                                  "group.id": "resilient", "client.id": name,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False}  # fmt: skip
        async with Consumer(config) as c:
            c.subscribe([TOPIC])
            while not stop.is_set():
                records = await c.poll(200)
                got = [(r.partition, r.offset, int(r.value)) for r in records]
                seen.extend(got)
                try:
                    await c.commit()
                except (CommitFailedError, RebalanceInProgressError):
                    uncommitted.update((p, o) for p, o, _ in got)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(member, "m1")
        nursery.start_soon(member, "m2")
        await wait_until(lambda: len({v for *_, v in seen}) >= 300, within=60, every=0.1)
        await wait_until(lambda: _all_committed(cluster, "resilient", 50), within=30, every=0.2)
        async with cluster.admin() as admin:
            coordinator = (await admin.describe_groups(["resilient"]))["resilient"].coordinator
        await cluster.brokers[coordinator].akill()
        await produce(cluster, 300, 300)
        await wait_until(lambda: len({v for *_, v in seen}) >= 600, within=90, every=0.1)
        await wait_until(lambda: _all_committed(cluster, "resilient", 100), within=60, every=0.2)
        async with cluster.admin() as admin:
            moved = (await admin.describe_groups(["resilient"]))["resilient"].coordinator
        stop.set()
    assert moved != coordinator
    assert sorted({v for *_, v in seen}) == list(range(600))
    counts: dict[tuple[int, int], int] = {}
    for p, o, _ in seen:
        counts[(p, o)] = counts.get((p, o), 0) + 1
    twice = {k for k, n in counts.items() if n > 1}
    assert twice <= uncommitted, sorted(twice - uncommitted)[:10]
