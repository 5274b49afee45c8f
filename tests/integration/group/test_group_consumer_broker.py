"""The client's consumer groups against one real broker (the default combined process): a
subscribed consumer joins, consumes and commits, the next one resumes at the commit; two
members share the partitions; the Admin client and `trioka group` describe it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import trio

from client import Admin, Consumer, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from client.errors import KafkaError
from protocol.errors import ErrorCode

GROUP_OVERRIDES = {
    "offsets.topic.num.partitions": 4,
    "offsets.topic.replication.factor": 1,
    "group.min.session.timeout.ms": 2000,
    "group.initial.rebalance.delay.ms": 0,
}
TIMINGS = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "retry.backoff.ms": 50}


async def produce(bootstrap: str, topic: str, values: list[int], partitions: int) -> None:
    async with Producer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        for v in values:
            await producer.send(topic, b"%d" % v, partition=v % partitions)
        await producer.flush()


def member(bootstrap: str, group: str, **extra: Any) -> Consumer:
    dotted = {k.replace("_", "."): v for k, v in extra.items()}
    return Consumer({**TIMINGS, "bootstrap.servers": bootstrap, "group.id": group,
                     "auto.offset.reset": "earliest", **dotted})  # fmt: skip


async def poll_until(c: Consumer, done: Any, within: float = 30) -> list:
    out: list = []
    with trio.fail_after(within):
        while not done(out):
            out += await c.poll(200)
    return out


def trioka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "deploy.cli", *args], capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


async def test_a_member_consumes_commits_and_the_next_resumes_there(broker_factory: Any) -> None:
    proc = broker_factory(GROUP_OVERRIDES)
    async with Admin(bootstrap_servers=proc.bootstrap) as admin:
        await admin.create_topics([NewTopic("orders", 3, 1)])
    await produce(proc.bootstrap, "orders", list(range(30)), 3)
    async with member(proc.bootstrap, "billing", enable_auto_commit=False) as c:
        c.subscribe(["orders"])
        first = await poll_until(c, lambda out: len(out) >= 30)
        await c.commit()
        assert c.assignment() == {TopicPartition("orders", p) for p in range(3)}
    assert sorted(int(r.value) for r in first) == list(range(30))
    await produce(proc.bootstrap, "orders", list(range(30, 36)), 3)
    async with member(proc.bootstrap, "billing") as c:
        c.subscribe(["orders"])
        second = await poll_until(c, lambda out: len(out) >= 6)
        assert sorted(int(r.value) for r in second) == list(range(30, 36))
        assert await c.poll(300) == []
        # close() commits (enable.auto.commit) and leaves
    async with Admin(bootstrap_servers=proc.bootstrap) as admin:
        offsets = await admin.list_group_offsets("billing")
        assert {tp: om.offset for tp, om in offsets.items()} == {
            TopicPartition("orders", p): 12 for p in range(3)
        }
        (described,) = (await admin.describe_groups(["billing"])).values()
        assert described.state == "Empty" and described.members == ()
        assert "billing" in [g.group_id for g in await admin.list_groups()]
        await admin.alter_group_offsets("billing", {TopicPartition("orders", 0): 3})
        assert (await admin.list_group_offsets("billing"))[
            TopicPartition("orders", 0)
        ] == OffsetAndMetadata(3)


async def test_two_members_share_and_the_group_is_described(broker_factory: Any) -> None:
    proc = broker_factory(GROUP_OVERRIDES)
    async with Admin(bootstrap_servers=proc.bootstrap) as admin:
        await admin.create_topics([NewTopic("events", 4, 1)])
    await produce(proc.bootstrap, "events", list(range(40)), 4)
    async with (
        member(proc.bootstrap, "pair", partition_assignment_strategy="roundrobin") as a,
        member(proc.bootstrap, "pair", partition_assignment_strategy="roundrobin") as b,
    ):
        a.subscribe(["events"])
        b.subscribe(["events"])
        got: dict[str, list] = {"a": [], "b": []}

        async def run(name: str, c: Consumer) -> None:
            with trio.fail_after(30):
                while not (
                    len(a.assignment()) == 2
                    and len(b.assignment()) == 2
                    and len(got["a"]) + len(got["b"]) >= 40
                ):
                    got[name] += await c.poll(200)

        async with trio.open_nursery() as n:
            n.start_soon(run, "a", a)
            n.start_soon(run, "b", b)
        assert a.assignment().isdisjoint(b.assignment())
        values = sorted(int(r.value) for r in got["a"] + got["b"])
        assert values == list(range(40))  # every record once
        await a.commit()
        await b.commit()
        async with Admin(bootstrap_servers=proc.bootstrap) as admin:
            (described,) = (await admin.describe_groups(["pair"])).values()
            assert described.state == "Stable" and described.assignor == "roundrobin"
            assert {tp for m in described.members for tp in m.assignment} == {
                TopicPartition("events", p) for p in range(4)
            }
            try:
                await admin.alter_group_offsets("pair", {TopicPartition("events", 0): 0})
                raise AssertionError("altering a live group's offsets must be refused")
            except KafkaError as exc:
                assert exc.code is ErrorCode.NON_EMPTY_GROUP
        await produce(proc.bootstrap, "events", list(range(40, 45)), 4)  # lag 5 in all
        described_cli = await trio.to_thread.run_sync(
            trioka, "group", "describe", "pair", "-b", proc.bootstrap
        )
        assert described_cli.returncode == 0, described_cli.stderr
        lines = [line.split() for line in described_cli.stdout.splitlines()[1:]]
        lags = {int(line[2]): int(line[5]) for line in lines}
        assert sum(lags.values()) == 5 and set(lags) == {0, 1, 2, 3}
        assert all(line[6] != "-" for line in lines)  # each row names its consumer
        state = await trio.to_thread.run_sync(
            trioka, "group", "describe", "pair", "--state", "-b", proc.bootstrap
        )
        assert "Stable" in state.stdout and "roundrobin" in state.stdout
    listed = await trio.to_thread.run_sync(trioka, "group", "list", "-b", proc.bootstrap)
    assert listed.stdout.split() == ["pair"]
    plan = await trio.to_thread.run_sync(
        trioka, "group", "reset-offsets", "--group", "pair", "--topic", "events:0",
        "--to-earliest", "-b", proc.bootstrap,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert "--execute option is missing" in plan.stderr
    assert plan.stdout.splitlines()[1].split() == ["pair", "events", "0", "0"]
    done = await trio.to_thread.run_sync(
        trioka, "group", "reset-offsets", "--group", "pair", "--topic", "events",
        "--shift-by", "-2", "--execute", "-b", proc.bootstrap,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    async with Admin(bootstrap_servers=proc.bootstrap) as admin:
        offsets = await admin.list_group_offsets("pair")
    assert sorted(om.offset for om in offsets.values()) == [8, 8, 8, 8]


async def test_console_consumer_with_a_group_reads_to_the_end_and_commits(
    broker_factory: Any,
) -> None:
    proc = broker_factory(GROUP_OVERRIDES)
    async with Admin(bootstrap_servers=proc.bootstrap) as admin:
        await admin.create_topics([NewTopic("lines", 2, 1)])
    await produce(proc.bootstrap, "lines", list(range(10)), 2)
    first = await trio.to_thread.run_sync(
        trioka, "consume", "lines", "--group", "cli", "--from-beginning", "-b", proc.bootstrap
    )
    assert first.returncode == 0, first.stderr
    assert sorted(int(v) for v in first.stdout.split()) == list(range(10))
    assert "Processed a total of 10 messages." in first.stderr
    await produce(proc.bootstrap, "lines", [10, 11], 2)
    again = await trio.to_thread.run_sync(
        trioka, "consume", "lines", "--group", "cli", "--from-beginning", "-b", proc.bootstrap
    )
    assert sorted(int(v) for v in again.stdout.split()) == [10, 11]  # from the commits on
    refused = await trio.to_thread.run_sync(
        trioka, "consume", "lines", "--group", "cli", "--partition", "0", "-b", proc.bootstrap
    )
    assert (
        refused.returncode == 2 and "--group (or -X group.id) cannot be used with" in refused.stderr
    )
