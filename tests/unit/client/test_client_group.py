"""The consumer's group membership against a scripted coordinator (tests.unit.client.fake_group):
discovery and its retries, KIP-394 member ids, the leader's assignment, rebalances with commits
before revocation, heartbeats, max.poll.interval.ms, commits and close."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from client import Admin, Consumer, Producer, TopicPartition
from client.consumer_coordinator import ConsumerRebalanceListener
from client.errors import CommitFailedError
from client.group_offsets import OffsetAndMetadata
from protocol.config_defs import ConfigError
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiKey
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.groups import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest
from tests.unit.client.fake_broker import FakeBroker, FakePartition, wait_for
from tests.unit.client.fake_group import FakeGroupCoordinator

GROUP = "g"


@pytest.fixture
async def coord(fake_broker: FakeBroker) -> AsyncIterator[FakeGroupCoordinator]:
    yield FakeGroupCoordinator(fake_broker)


async def fill(broker: FakeBroker, n: int, partitions: int) -> None:
    if "t" not in broker.topics:
        broker.create("t", partitions)
    async with Producer(bootstrap_servers=f"127.0.0.1:{broker.port}", linger_ms=0) as producer:
        for i in range(n):
            await producer.send("t", b"%d" % i, partition=i % partitions)
        await producer.flush()


def member(broker: FakeBroker, **kwargs: object) -> Consumer:
    config: dict[str, object] = {
        "bootstrap_servers": f"127.0.0.1:{broker.port}",
        "group_id": GROUP,
        "auto_offset_reset": "earliest",
        "heartbeat_interval_ms": 50,
        "session_timeout_ms": 10000,
        "retry_backoff_ms": 10,
    }
    config.update(kwargs)
    return Consumer(**config)


async def poll_until(c: Consumer, condition, limit_s: float = 5.0) -> list:
    out: list = []
    with trio.fail_after(limit_s):
        while not condition(out):
            out += await c.poll(100)
    return out


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("revoked", partitions))

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        self.events.append(("assigned", partitions))


async def test_one_member_gets_every_partition_and_resumes_at_the_commit(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    await fill(fake_broker, 30, partitions=3)
    listener = Recorder()
    async with member(fake_broker, enable_auto_commit=False) as c:
        c.subscribe(["t"], listener)
        records = await poll_until(c, lambda out: len(out) >= 30)
        assert len(records) == 30
        assert c.assignment() == {TopicPartition("t", p) for p in range(3)}
        assert listener.events == [("assigned", c.assignment())]
        await c.commit()
        assert await c.committed([TopicPartition("t", 0)]) == {
            TopicPartition("t", 0): OffsetAndMetadata(10, 0)
        }
    joins = [r for r in coord.requests if isinstance(r, JoinGroupRequest)]
    # KIP-394: the first JoinGroup has no member id, the coordinator gives one, we rejoin
    assert joins[0].member_id == "" and joins[1].member_id == "member-1"
    assert [p.name for p in joins[0].protocols] == ["range"]
    assert any(isinstance(r, LeaveGroupRequest) for r in coord.requests)
    await fill(fake_broker, 6, partitions=3)
    async with member(fake_broker) as c:
        c.subscribe(["t"])
        again = await poll_until(c, lambda out: len(out) >= 6)
        assert sorted(int(r.value) for r in again) == list(range(6))  # only the new ones
        assert {r.offset for r in again} == {10, 11}


async def test_discovery_and_join_retry_what_is_retriable(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    await fill(fake_broker, 4, partitions=1)
    coord.fail_next[ApiKey.FIND_COORDINATOR] = [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 2
    coord.fail_next[ApiKey.JOIN_GROUP] = [
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.NOT_COORDINATOR,
    ]
    coord.fail_next[ApiKey.OFFSET_FETCH] = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
    async with member(fake_broker) as c:
        c.subscribe(["t"])
        records = await poll_until(c, lambda out: len(out) >= 4)
        assert len(records) == 4
    finds = [r for r in coord.requests if isinstance(r, FindCoordinatorRequest)]
    assert len(finds) == 4  # two refused, one found, one more after NOT_COORDINATOR


async def test_a_fatal_join_error_is_raised_by_poll(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    fake_broker.create("t", 1)
    coord.fail_next[ApiKey.JOIN_GROUP] = [ErrorCode.INCONSISTENT_GROUP_PROTOCOL]
    async with member(fake_broker) as c:
        c.subscribe(["t"])
        with pytest.raises(KafkaError, match="JoinGroup for group 'g'") as info:
            await poll_until(c, lambda out: False)
        assert info.value.code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        await poll_until(c, lambda out: c.assignment())  # the next poll joins again


async def test_two_members_share_partitions_and_hand_over_at_the_committed_offsets(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    await fill(fake_broker, 60, partitions=4)
    first_listener = Recorder()
    async with member(fake_broker, partition_assignment_strategy="roundrobin") as first:
        first.subscribe(["t"], first_listener)
        seen = await poll_until(first, lambda out: len(out) >= 60)
        async with member(fake_broker, partition_assignment_strategy="roundrobin") as second:
            second.subscribe(["t"])
            async with trio.open_nursery() as nursery:
                # the first member learns of the rebalance by heartbeat and rejoins on poll
                nursery.start_soon(poll_until, first, lambda out: len(first.assignment()) == 2)
                await poll_until(second, lambda out: len(second.assignment()) == 2)
            assert first.assignment() | second.assignment() == {
                TopicPartition("t", p) for p in range(4)
            }
            assert first.assignment().isdisjoint(second.assignment())
            # the first member committed before giving its partitions up: nothing re-read
            assert await second.poll(200) == []
            await fill(fake_broker, 8, partitions=4)
            a = await poll_until(first, lambda out: len(out) >= 4)
            b = await poll_until(second, lambda out: len(out) >= 4)
            assert len(a) == len(b) == 4
            assert {r.partition for r in a} == {tp.partition for tp in first.assignment()}
    assert len(seen) == 60
    assert [e[0] for e in first_listener.events] == ["assigned", "revoked", "assigned"]


async def test_an_expired_member_rejoins_as_a_new_member(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    fake_broker.create("t", 2)
    listener = Recorder()
    async with member(fake_broker) as c:
        c.subscribe(["t"], listener)
        await poll_until(c, lambda out: len(c.assignment()) == 2)
        old = coord.group(GROUP)
        (old_member,) = old.members
        coord.expire(GROUP, old_member)
        # its heartbeat gets UNKNOWN_MEMBER_ID: it rejoins with a new id; lost, not revoked
        await poll_until(c, lambda out: set(coord.group(GROUP).members) - {old_member})
        await poll_until(c, lambda out: len(c.assignment()) == 2)
        assert ("revoked", c.assignment()) in listener.events  # on_partitions_lost's default
        assert coord.group(GROUP).generation >= 2


async def test_not_polling_within_max_poll_interval_leaves_the_group(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    fake_broker.create("t", 1)
    async with member(fake_broker, max_poll_interval_ms=400) as c:
        c.subscribe(["t"])
        await poll_until(c, lambda out: c.assignment())
        await wait_for(lambda: any(isinstance(r, LeaveGroupRequest) for r in coord.requests))
        assert coord.group(GROUP).members == {}
        heartbeats = sum(isinstance(r, HeartbeatRequest) for r in coord.requests)
        await poll_until(c, lambda out: coord.group(GROUP).members)  # polling rejoins
        assert sum(isinstance(r, HeartbeatRequest) for r in coord.requests) >= heartbeats


async def test_commit_after_the_group_moved_on_is_commit_failed(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    await fill(fake_broker, 2, partitions=1)
    async with member(fake_broker, enable_auto_commit=False) as c:
        c.subscribe(["t"])
        await poll_until(c, lambda out: len(out) >= 2)
        coord.fail_next[ApiKey.OFFSET_COMMIT] = [ErrorCode.ILLEGAL_GENERATION]
        with pytest.raises(CommitFailedError, match="already rebalanced"):
            await c.commit()
        # the member rejoins at its next poll; then commits work again
        await poll_until(c, lambda out: c.assignment() and not c._coordinator.rejoin_needed)
        await c.commit({TopicPartition("t", 0): 1})
        assert coord.offsets[(GROUP, TopicPartition("t", 0))] == (1, -1)


async def test_commit_retries_a_coordinator_that_moved(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    await fill(fake_broker, 3, partitions=1)
    async with member(fake_broker, enable_auto_commit=False) as c:
        c.subscribe(["t"])
        await poll_until(c, lambda out: len(out) >= 3)
        coord.fail_next[ApiKey.OFFSET_COMMIT] = [
            ErrorCode.NOT_COORDINATOR,
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ]
        await c.commit()
        assert coord.offsets[(GROUP, TopicPartition("t", 0))] == (3, 0)


async def test_auto_commit_commits_positions_while_polling(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    await fill(fake_broker, 5, partitions=1)
    async with member(fake_broker, auto_commit_interval_ms=100) as c:
        c.subscribe(["t"])
        await poll_until(c, lambda out: len(out) >= 5)
        await poll_until(c, lambda out: (GROUP, TopicPartition("t", 0)) in coord.offsets)
        assert coord.offsets[(GROUP, TopicPartition("t", 0))][0] == 5


async def test_manual_assignment_with_a_group_starts_at_the_commit(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    await fill(fake_broker, 5, partitions=1)
    coord.offsets[(GROUP, TopicPartition("t", 0))] = (3, -1)
    async with member(fake_broker) as c:
        c.assign([TopicPartition("t", 0)])
        records = await poll_until(c, lambda out: len(out) >= 2)
        assert [r.offset for r in records] == [3, 4]
        await c.commit()  # outside any generation: generation -1, as Kafka's
        assert coord.offsets[(GROUP, TopicPartition("t", 0))] == (5, 0)
        with pytest.raises(KafkaError, match="cannot be mixed"):
            c.subscribe(["t"])


async def test_group_configs_and_misuse_are_clear_errors(fake_broker: FakeBroker) -> None:
    with pytest.raises(ConfigError, match=r"heartbeat\.interval\.ms"):
        member(fake_broker, heartbeat_interval_ms=10000, session_timeout_ms=6000)
    with pytest.raises(ConfigError, match="unknown assignor 'sticky'"):
        member(fake_broker, partition_assignment_strategy="sticky")
    async with Consumer(bootstrap_servers=f"127.0.0.1:{fake_broker.port}") as c:
        with pytest.raises(KafkaError, match=r"needs a group\.id") as info:
            c.subscribe(["t"])
        assert info.value.code is ErrorCode.INVALID_GROUP_ID
        with pytest.raises(KafkaError, match=r"need a group\.id"):
            await c.commit()


async def test_admin_lists_describes_and_alters_group_offsets(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    fake_broker.create("t", 2)
    bootstrap = f"127.0.0.1:{fake_broker.port}"
    async with Admin(bootstrap_servers=bootstrap, retry_backoff_ms=10) as admin:
        async with member(fake_broker) as c:
            c.subscribe(["t"])
            await poll_until(c, lambda out: len(c.assignment()) == 2)
            coord.fail_next[ApiKey.FIND_COORDINATOR] = [ErrorCode.COORDINATOR_NOT_AVAILABLE]
            (listing,) = await admin.list_groups()
            assert (listing.group_id, listing.state) == (GROUP, "Stable")
            description = (await admin.describe_groups([GROUP]))[GROUP]
            assert description.state == "Stable" and description.assignor == "range"
            (m,) = description.members
            assert m.assignment == {TopicPartition("t", 0), TopicPartition("t", 1)}
            with pytest.raises(KafkaError, match="has active members") as info:
                await admin.alter_group_offsets(GROUP, {TopicPartition("t", 0): 0})
            assert info.value.code is ErrorCode.NON_EMPTY_GROUP
        assert (await admin.describe_groups([GROUP]))[GROUP].state == "Empty"
        assert (await admin.describe_groups(["nobody"]))["nobody"].state == "Dead"
        coord.fail_next[ApiKey.OFFSET_COMMIT] = [ErrorCode.NOT_COORDINATOR]
        await admin.alter_group_offsets(GROUP, {TopicPartition("t", 0): 7})
        coord.fail_next[ApiKey.OFFSET_FETCH] = [ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
        committed = await admin.list_group_offsets(GROUP)  # t-1: the close's commit
        assert committed == {
            TopicPartition("t", 0): OffsetAndMetadata(7),
            TopicPartition("t", 1): OffsetAndMetadata(0),
        }


async def test_the_leader_rebalances_when_partitions_are_added(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    fake_broker.create("t", 2)
    async with member(fake_broker, metadata_max_age_ms=100) as c:
        c.subscribe(["t"])
        await poll_until(c, lambda out: len(c.assignment()) == 2)
        generation = coord.group(GROUP).generation
        fake_broker.topics["t"].append(FakePartition())
        await poll_until(c, lambda out: len(c.assignment()) == 3)
        assert coord.group(GROUP).generation > generation


async def test_unsubscribe_commits_leaves_and_drops_the_assignment(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    await fill(fake_broker, 4, partitions=2)
    listener = Recorder()
    async with member(fake_broker) as c:
        c.subscribe(["t"], listener)
        await poll_until(c, lambda out: len(out) >= 4)
        await c.unsubscribe()
        assert listener.events[-1] == ("revoked", {TopicPartition("t", 0), TopicPartition("t", 1)})
        assert c.assignment() == set() and c.subscription() == set()
        assert coord.group(GROUP).members == {}
        assert coord.offsets[(GROUP, TopicPartition("t", 1))][0] == 2
        c.assign([TopicPartition("t", 0)])  # allowed again once unsubscribed


async def test_a_member_cancelled_while_it_polls_closes_cleanly(
    fake_broker: FakeBroker, coord: FakeGroupCoordinator
) -> None:
    # Cancelled by its caller mid-poll: close() (leaving the group) is cancelled too, and must
    # still leave the client's own nursery (it once left it open: trio's "Nursery stack
    # corrupted").
    await fill(fake_broker, 3, partitions=1)
    with trio.move_on_after(10) as scope:
        async with member(fake_broker) as c:
            c.subscribe(["t"])
            await poll_until(c, lambda out: len(out) >= 3)
            scope.cancel()
            await c.poll(5000)
    assert scope.cancelled_caught
    assert c._closed
