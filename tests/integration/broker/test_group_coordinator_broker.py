"""The group coordinator on one real broker (the default combined process), over the wire:
FindCoordinator creates `__consumer_offsets`; two members join (KIP-394's MEMBER_ID_REQUIRED
first), sync, heartbeat, commit and fetch; a restart loads the groups and offsets back."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import trio

from broker.group.hashing import OFFSETS_TOPIC, partition_for
from protocol.errors import ErrorCode
from protocol.messages.configs import DescribeConfigsRequest, DescribeConfigsResource, ResourceType
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.groups import (
    DescribeGroupsRequest,
    JoinGroupResponse,
    LeaveGroupMember,
    LeaveGroupRequest,
    ListGroupsRequest,
)
from protocol.messages.metadata import MetadataRequest
from tests.integration.broker.broker_wire import create_topic
from tests.integration.group_wire import (
    commit,
    fetch_offsets,
    find_coordinator,
    heartbeat,
    join,
    join_request,
    new_member_id,
    sync,
)
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

GROUP_OVERRIDES = {
    "offsets.topic.num.partitions": 4,
    "offsets.topic.replication.factor": 1,
    "group.min.session.timeout.ms": 2000,
    "group.initial.rebalance.delay.ms": 300,
}


async def join_two(host: str, port: int, group: str) -> tuple[JoinGroupResponse, JoinGroupResponse]:
    """Two members join concurrently (each JoinGroup waits for the other)."""
    async with await WireClient.connect(host, port) as a, await WireClient.connect(host, port) as b:
        ids = [await new_member_id(a, group), await new_member_id(b, group)]
        answers: dict[int, JoinGroupResponse] = {}

        async def one(i: int, c: WireClient) -> None:
            answers[i] = await join(c, group, ids[i])

        with trio.fail_after(15):
            async with trio.open_nursery() as n:
                n.start_soon(one, 0, a)
                n.start_soon(one, 1, b)
        return answers[0], answers[1]


async def test_find_coordinator_creates_the_offsets_topic(broker_factory: Any) -> None:
    # No offsets.topic.replication.factor: a combined node makes it 1 (Kafka's default 3
    # could never be placed on one broker).
    overrides = {
        k: v for k, v in GROUP_OVERRIDES.items() if k != "offsets.topic.replication.factor"
    }
    proc = broker_factory(overrides)
    found = await find_coordinator(proc.host, proc.port, "g1")
    assert (found.node_id, found.host, found.port) == (1, proc.host, proc.port)
    async with await WireClient.connect(proc.host, proc.port) as c:
        meta = await c.request(MetadataRequest(topics=(OFFSETS_TOPIC,)))
        (topic,) = meta.topics
        assert topic.error_code == 0 and topic.is_internal
        assert len(topic.partitions) == 4
        assert {len(p.replica_nodes) for p in topic.partitions} == {1}
        configs = await c.request(
            DescribeConfigsRequest(
                resources=(
                    DescribeConfigsResource(
                        resource_type=ResourceType.TOPIC, resource_name=OFFSETS_TOPIC
                    ),
                )
            )
        )
        values = {e.name: e.value for e in configs.results[0].configs}
        assert values["cleanup.policy"] == "compact"
        assert values["segment.bytes"] == "104857600"
        assert partition_for("g1", 4) in {p.index for p in topic.partitions}


async def test_two_members_join_sync_heartbeat_commit_fetch(broker_factory: Any) -> None:
    proc = broker_factory(GROUP_OVERRIDES)
    group = "readers"
    await find_coordinator(proc.host, proc.port, group)
    async with await WireClient.connect(proc.host, proc.port) as c:
        await create_topic(c, "events", partitions=2)
        await wait_until(lambda: _loaded(c, group), within=15, every=0.1)
        first, second = await join_two(proc.host, proc.port, group)
        assert first.error_code == second.error_code == 0, (first, second)
        assert first.generation_id == second.generation_id == 1
        assert first.protocol_name == "range" and first.leader == second.leader
        leader, other = (first, second) if first.leader == first.member_id else (second, first)
        assert {m.member_id for m in leader.members} == {first.member_id, second.member_id}
        assert other.members == ()
        gen = leader.generation_id
        async with trio.open_nursery() as n:  # the follower's sync waits for the leader's
            got: dict[str, bytes] = {}

            async def follower_sync() -> None:
                async with await WireClient.connect(proc.host, proc.port) as f:
                    got["f"] = (await sync(f, group, gen, other.member_id)).assignment

            n.start_soon(follower_sync)
            answer = await sync(
                c, group, gen, leader.member_id, {leader.member_id: b"p0", other.member_id: b"p1"}
            )
            assert answer.error_code == 0 and answer.assignment == b"p0"
        assert got["f"] == b"p1"
        assert await heartbeat(c, group, gen, leader.member_id) == 0
        assert await heartbeat(c, group, gen + 1, leader.member_id) == ErrorCode.ILLEGAL_GENERATION
        assert await heartbeat(c, group, gen, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
        assert await commit(c, group, gen, leader.member_id, "events", {0: 5, 1: 7}) == {0: 0, 1: 0}
        assert await commit(c, group, gen - 1, leader.member_id, "events", {0: 9}) == {
            0: ErrorCode.ILLEGAL_GENERATION
        }
        assert await commit(c, group, gen, leader.member_id, "nosuch", {0: 1}) == {
            0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        }
        assert await fetch_offsets(c, group, "events", [0, 1, 2]) == (0, {0: 5, 1: 7, 2: -1})
        described = (await c.request(DescribeGroupsRequest(groups=(group,)))).groups[0]
        assert (described.group_state, described.protocol_data) == ("Stable", "range")
        assert len(described.members) == 2
        listed = await c.request(ListGroupsRequest())
        assert [(g.group_id, g.group_state) for g in listed.groups] == [(group, "Stable")]
        left = await c.request(
            LeaveGroupRequest(
                group_id=group, members=(LeaveGroupMember(member_id=other.member_id),)
            )
        )
        assert left.error_code == 0 and left.members[0].error_code == 0
        assert await heartbeat(c, group, gen, leader.member_id) == ErrorCode.REBALANCE_IN_PROGRESS


async def test_restart_loads_groups_and_offsets(broker_factory: Any) -> None:
    proc = broker_factory(GROUP_OVERRIDES)
    await find_coordinator(proc.host, proc.port, "solo")
    async with await WireClient.connect(proc.host, proc.port) as c:
        await create_topic(c, "events", partitions=1)
        await wait_until(lambda: _loaded(c, "simple"), within=15, every=0.1)
        assert await commit(c, "simple", -1, "", "events", {0: 42}) == {0: 0}
    first, second = await join_two(proc.host, proc.port, "solo")
    leader = first if first.leader == first.member_id else second
    async with await WireClient.connect(proc.host, proc.port) as c:
        assert (await sync(c, "solo", 1, leader.member_id, {})).error_code == 0
        assert await commit(c, "solo", 1, leader.member_id, "events", {0: 3}) == {0: 0}
    await proc.akill()
    await proc.astart()
    async with await WireClient.connect(proc.host, proc.port) as c:
        await wait_until(lambda: _loaded(c, "simple"), within=15, every=0.1)
        assert await fetch_offsets(c, "simple", "events", [0]) == (0, {0: 42})
        assert await fetch_offsets(c, "solo", "events", [0]) == (0, {0: 3})
        # The generation and members came back: the leader's heartbeat is accepted.
        assert await heartbeat(c, "solo", 1, leader.member_id) == 0
        described = (await c.request(DescribeGroupsRequest(groups=("solo",)))).groups[0]
        assert described.group_state == "Stable" and len(described.members) == 2


async def _loaded(c: WireClient, group: str) -> bool:
    """The coordinator serves the group (its partition is loaded)."""
    code, _ = await fetch_offsets(c, group, "events", [0])
    assert code in (0, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR), code
    return code == 0


async def test_offsets_topic_needs_as_many_brokers_as_its_replication_factor(
    broker_factory: Any,
) -> None:
    proc = broker_factory({**GROUP_OVERRIDES, "offsets.topic.replication.factor": 3})
    async with await WireClient.connect(proc.host, proc.port) as c:
        for _ in range(2):  # the process stays up and keeps answering
            resp = await c.request(FindCoordinatorRequest(key="g"))
            assert resp.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE, resp
            assert "__consumer_offsets" in resp.error_message
            assert "3" in resp.error_message, resp.error_message
        meta = await c.request(MetadataRequest(topics=(OFFSETS_TOPIC,)))
        assert meta.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        bad = await c.request(FindCoordinatorRequest(key=""))
        assert bad.error_code == ErrorCode.INVALID_REQUEST


async def test_sigterm_answers_a_parked_join_at_once(broker_factory: Any) -> None:
    # The first rebalance of a new group would wait 120 s (initial delay = rebalance timeout).
    proc = broker_factory({**GROUP_OVERRIDES, "group.initial.rebalance.delay.ms": 120_000})
    await find_coordinator(proc.host, proc.port, "slow")
    async with await WireClient.connect(proc.host, proc.port) as c:
        await wait_until(lambda: _loaded(c, "slow"), within=15, every=0.1)
        member = await new_member_id(c, "slow")
        request = replace(join_request("slow", member), rebalance_timeout_ms=120_000)
        await c.send(request)

        async def parked() -> bool:  # the broker read the join and parked it
            async with await WireClient.connect(proc.host, proc.port) as other:
                resp = await other.request(DescribeGroupsRequest(groups=("slow",)))
            return resp.groups[0].group_state == "PreparingRebalance"

        await wait_until(parked, within=10, every=0.05)
        async with trio.open_nursery() as n:
            n.start_soon(proc.astop, 20.0)
            with trio.fail_after(15):  # far below the 120 s the join would otherwise wait
                _, resp = await c.receive(JoinGroupResponse)
        assert resp.error_code == ErrorCode.NOT_COORDINATOR, resp
    assert proc.proc is not None and proc.proc.returncode == 0
