"""Leadership and placement changes asked for by an admin, on a cluster of 3 real broker
processes.

- Preferred election gives leadership back (both modes, `cluster_factory`): the preferred
  leader's broker stops, a follower leads; the broker restarts and rejoins the ISR; `trioka
  leader-election --election-type preferred` (the CLI, as a process) makes it the leader again.
- Unclean election through the CLI (both modes): RF=2 on (L, F), F never fetches (failpoint
  `replica.fetcher.skip_source`), so L drops it from the ISR; L is SIGKILLed and the partition
  is offline (unclean.leader.election.enable=false). A preferred election cannot help; `trioka
  leader-election --election-type unclean` elects F, reports it as kafka-leader-election.sh
  does, and F serves from its own (empty) log: L's records are gone.
- Reassignment moves a partition without loss (both modes): RF=2 on brokers (1,2) with acknowledged
  records, `trioka reassign --execute ... --replicas 2,3`; once ListPartitionReassignments is
  empty the replicas are (2,3) and every acknowledged record is read from the new leader.

All three run in both modes (`cluster_factory`): in Raft mode ElectLeaders and the
reassignment APIs are forwarded to the active controller process and their effect comes to the
brokers through the metadata log.
Auto leader rebalance is off in all, so only the admin's request moves leadership.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trio

from client import Consumer, NewTopic, Producer, TopicPartition
from client.metadata import PartitionInfo
from tests.integration.cluster.conftest import ClusterFactory
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[3]
NO_REBALANCE = {"auto.leader.rebalance.enable": False}


async def trioka(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[bytes]:
    """The `trioka` CLI as a real process against the live brokers."""
    with trio.fail_after(60):
        return await trio.run_process(
            [
                sys.executable,
                "-m",
                "deploy.cli",
                *args,
                "-b",
                cluster.live_bootstrap(),
                "-X",
                "default.api.timeout.ms=20000",
            ],
            cwd=REPO,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )


async def test_preferred_election_gives_leadership_back_after_restart(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    controller = await cluster.controller_id()
    # The preferred leader is a broker that is not the controller, so stopping it moves only
    # the partition's leadership.
    preferred = next(b for b in (1, 2, 3) if b != controller)
    others = [b for b in (1, 2, 3) if b != preferred]
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("pref", replica_assignment={0: [preferred, *others]})])
    await cluster.wait_partition("pref", 0, lambda p: p.leader == preferred and len(p.isr) == 3)

    await cluster.brokers[preferred].astop(within=60)
    moved = await cluster.wait_partition(
        "pref", 0, lambda p: p.leader in others and preferred not in p.isr, within=30
    )
    assert moved.replicas[0] == preferred

    await cluster.brokers[preferred].astart(within=60)
    await cluster.wait_partition("pref", 0, lambda p: preferred in p.isr, within=30)
    assert (await cluster.partition("pref", 0)).leader != preferred  # nothing moved it back yet

    done = await trioka(
        cluster, "leader-election", "--election-type", "preferred", "--topic", "pref",
        "--partition", "0",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert "Successfully completed leader election (PREFERRED) for partitions pref-0" in (
        done.stdout.decode()
    )
    await cluster.wait_partition("pref", 0, lambda p: p.leader == preferred, within=30)

    again = await trioka(cluster, "leader-election", "--type", "preferred",
                         "--all-topic-partitions")  # fmt: skip
    assert again.returncode == 0, again.stderr.decode()
    missing = await trioka(
        cluster, "leader-election", "--type", "preferred", "--topic", "nope", "--partition", "0"
    )
    assert missing.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.stdout.decode()
    assert missing.stderr.decode().startswith("error: ")


async def test_unclean_election_through_the_cli_elects_a_replica_out_of_the_isr(
    cluster_factory: ClusterFactory,
) -> None:
    leader, follower = 1, 2
    cluster = cluster_factory(
        3,
        {**NO_REBALANCE, "replica.lag.time.max.ms": 1500},
        broker_env={
            follower: {"TRIOKA_FAILPOINTS": f"replica.fetcher.skip_source=return({leader})"}
        },
    )
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topics(
            [
                NewTopic(
                    "unclean",
                    replica_assignment={0: [leader, follower]},
                    configs={"unclean.leader.election.enable": "false"},
                )
            ]
        )
    # The follower never fetches, so the leader drops it from the ISR.
    await cluster.wait_partition(
        "unclean", 0, lambda p: p.leader == leader and p.isr == (leader,), within=30
    )
    async with Producer(
        bootstrap_servers=cluster.live_bootstrap(), acks="1", linger_ms=1
    ) as producer:
        for i in range(5):
            await producer.send_and_wait("unclean", b"only-on-the-leader-%d" % i, partition=0)

    await cluster.brokers[leader].akill()

    def offline(p: PartitionInfo) -> bool:
        return p.leader == -1 and p.offline_replicas == (leader,)

    stuck = await cluster.wait_partition("unclean", 0, offline, within=30)
    assert follower not in stuck.isr  # a clean election has no candidate

    preferred = await trioka(
        cluster, "leader-election", "--election-type", "preferred", "--topic", "unclean",
        "--partition", "0",
    )  # fmt: skip
    assert preferred.returncode == 1
    assert (
        "Error completing leader election (PREFERRED) for partition unclean-0: "
        "PREFERRED_LEADER_NOT_AVAILABLE"
    ) in preferred.stdout.decode()
    assert (await cluster.partition("unclean", 0)).leader == -1

    done = await trioka(
        cluster, "leader-election", "--election-type", "unclean", "--topic", "unclean",
        "--partition", "0",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    assert done.stdout.decode() == (
        "Successfully completed leader election (UNCLEAN) for partitions unclean-0\n"
    )
    after = await cluster.wait_partition("unclean", 0, lambda p: p.leader == follower, within=30)
    assert after.isr == (follower,) and after.leader_epoch > stuck.leader_epoch

    # The new leader serves its own log: the records only the old leader had are gone.
    async with Producer(
        bootstrap_servers=cluster.live_bootstrap(), acks="all", linger_ms=1
    ) as producer:
        written = await producer.send_and_wait("unclean", b"after", partition=0)
    assert written.offset == 0
    tp = TopicPartition("unclean", 0)
    async with Consumer(
        bootstrap_servers=cluster.live_bootstrap(), auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([tp])
        with trio.fail_after(30):
            records = []
            while not records:
                records = await consumer.poll(1000)
    assert [(r.offset, r.value) for r in records] == [(0, b"after")]

    again = await trioka(
        cluster, "leader-election", "--type", "unclean", "--topic", "unclean", "--partition", "0"
    )
    assert again.returncode == 0, again.stderr.decode()
    assert "Valid replica already elected for partitions unclean-0" in again.stdout.decode()


async def test_reassignment_moves_a_partition_without_loss(
    cluster_factory: ClusterFactory,
) -> None:
    cluster = cluster_factory(3, NO_REBALANCE)
    await cluster.wait_ready()
    async with cluster.admin() as admin:
        await admin.create_topics([NewTopic("moving", replica_assignment={0: [1, 2]})])
    await cluster.wait_partition("moving", 0, lambda p: p.leader == 1 and len(p.isr) == 2)

    acked: list[bytes] = []
    async with Producer(
        bootstrap_servers=cluster.live_bootstrap(), acks="all", linger_ms=1
    ) as producer:
        for i in range(300):
            value = b"record-%04d" % i
            await producer.send_and_wait("moving", value, partition=0)
            acked.append(value)

    started = await trioka(
        cluster, "reassign", "--execute", "--topic", "moving", "--partition", "0",
        "--replicas", "2,3",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr.decode()

    tp = TopicPartition("moving", 0)
    async with cluster.admin() as admin:

        async def finished() -> bool:
            return not await admin.list_partition_reassignments([tp])

        await wait_until(finished, within=45, every=0.1)
        assert await admin.list_partition_reassignments() == {}
    after = await cluster.wait_partition(
        "moving", 0, lambda p: tuple(p.replicas) == (2, 3) and p.leader in (2, 3), within=30
    )
    assert 1 not in after.isr

    verified = await trioka(
        cluster, "reassign", "--verify", "--topic", "moving", "--partition", "0",
        "--replicas", "2,3",
    )  # fmt: skip
    assert verified.returncode == 0, verified.stderr.decode()
    assert "is complete" in verified.stdout.decode()
    listed = await trioka(cluster, "reassign", "--list")
    assert "No partition reassignment is in progress." in listed.stdout.decode()

    consumed: list[bytes] = []
    async with Consumer(
        bootstrap_servers=cluster.live_bootstrap(), auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        assert end >= len(acked)
        position = 0
        with trio.fail_after(30):
            while position < end:
                for record in await consumer.poll(1000):
                    position = record.offset + 1
                    assert record.value is not None
                    consumed.append(record.value)
    assert consumed == acked
