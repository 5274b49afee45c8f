"""broker.handlers.fetch on a leader: a follower's incremental fetch session reads only the
partitions that may answer differently (its changed positions, what the purgatory's journal
names, the partitions whose last answer was not the idle one); quiet partitions are read again
every FULL_READ_MS. An append to a quiet partition still wakes the follower's long poll at
once, and the follower stays in the ISR however long its partitions were quiet.

Before, every fetch of a follower's session read (and watched) all its partitions: at 25,000
partitions, ~8,300 per session per fetch, a third of a broker's CPU in a failover."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from broker.handlers.fetch import FULL_READ_MS
from broker.node import Broker
from broker.server import ConnectionInfo
from protocol.codec import RequestEnvelope
from protocol.messages import ApiKey
from protocol.messages.fetch import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
)
from protocol.messages.produce import ProducePartition, ProduceRequest, ProduceTopic
from protocol.metadata.records import PartitionRecord, TopicRecord, UnfenceBrokerRecord
from protocol.names import TopicPartition
from protocol.record_batch import Record, build_batch
from tests.unit.broker.test_broker_raft_cluster_changes import (
    TOPIC_ID,
    Feed,
    _register,
    in_process_broker,
)

PARTITIONS = 50
CONN = ConnectionInfo("127.0.0.1:1", "PLAINTEXT")


class Clock:
    """The broker's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_000_000

    def wall_ms(self) -> int:
        return self.now

    def monotonic_ms(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def leader(tmp_path: Path, clock: Clock) -> Iterator[Broker]:
    """Broker 1, leader of t-0..t-49 (replicas 1, 2, 3), brokers 2 and 3 registered."""
    with in_process_broker(
        tmp_path,
        clock,
        **{"replica.lag.time.max.ms": 10_000},  # type: ignore[arg-type]
    ) as node:
        _lead_all(node)
        yield node


def _lead_all(node: Broker) -> None:
    feed = Feed(node)
    feed(
        *(_register(b, b) for b in (1, 2, 3)),
        *(UnfenceBrokerRecord(id=b, epoch=b) for b in (1, 2, 3)),
        TopicRecord(name="t", topic_id=TOPIC_ID),
        *(
            PartitionRecord(
                partition_id=p, topic_id=TOPIC_ID, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1
            )
            for p in range(PARTITIONS)
        ),
    )
    node.publisher.apply_full()


class Follower:
    """One follower's side of a fetch session with the leader (replica 2 or 3), with each
    partition's position."""

    def __init__(self, leader: Broker, replica: int) -> None:
        self.leader = leader
        self.replica = replica
        self.offsets = {p: 0 for p in range(PARTITIONS)}
        self.session_id = 0
        self.epoch = 0
        self.sent: dict[int, int] = {}
        """What the session on the leader holds for each partition."""
        self.to_forget: list[int] = []

    def forget(self, partition: int) -> None:
        """Stop fetching `partition`: the next fetch forgets it in the session."""
        del self.offsets[partition]
        self.sent.pop(partition, None)
        self.to_forget.append(partition)

    async def fetch(self, max_wait_ms: int = 0) -> set[int]:
        """One fetch: all partitions when full, else only those whose position moved; the
        partitions that answered records (their positions move past them)."""
        send = {p: o for p, o in self.offsets.items() if self.epoch == 0 or self.sent.get(p) != o}
        partitions = tuple(
            FetchPartition(index=p, fetch_offset=o, current_leader_epoch=0) for p, o in send.items()
        )
        request = FetchRequest(
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            topics=(FetchTopic(name="t", partitions=partitions),) if partitions else (),
            replica_id=self.replica,
            session_id=self.session_id,
            session_epoch=self.epoch,
            forgotten_topics_data=(
                (ForgottenTopic(topic="t", partitions=tuple(self.to_forget)),)
                if self.to_forget
                else ()
            ),
        )
        self.to_forget = []
        envelope = RequestEnvelope(ApiKey.FETCH, 0, 1, f"broker-{self.replica}", request)
        response = await self.leader.apis.handle(envelope, CONN)
        assert isinstance(response, FetchResponse) and response.error_code == 0
        self.sent.update(send)
        self.session_id, self.epoch = response.session_id, self.epoch + 1
        got = set()
        for topic in response.topics:
            for part in topic.partitions:
                assert part.error_code == 0, part
                if part.records:
                    got.add(part.index)
                    self.offsets[part.index] += 1  # one record per batch in these tests
        return got


async def produce(leader: Broker, partition: int) -> None:
    batch = build_batch([Record(value=b"v")])
    request = ProduceRequest(
        acks=1,
        timeout_ms=1000,
        topics=(
            ProduceTopic(name="t", partitions=(ProducePartition(index=partition, records=batch),)),
        ),
    )
    response = await leader.apis.handle(RequestEnvelope(ApiKey.PRODUCE, 0, 2, "p", request), CONN)
    assert response.topics[0].partitions[0].error_code == 0  # type: ignore[union-attr]


class ReadCounter:
    """The partitions the leader's fetch handler reads for followers (idle answers too)."""

    def __init__(self, leader: Broker, monkeypatch: pytest.MonkeyPatch) -> None:
        self.read: list[TopicPartition] = []
        handler = leader.apis._handlers[ApiKey.FETCH].__self__  # type: ignore[attr-defined]
        reader = handler.reader
        original = reader.idle_follower_read

        def counting(tp, replica_id, part, quiet=None):  # type: ignore[no-untyped-def]
            self.read.append(tp)
            return original(tp, replica_id, part, quiet)

        monkeypatch.setattr(reader, "idle_follower_read", counting)

    def take(self) -> list[int]:
        out, self.read = sorted(tp.partition for tp in self.read), []
        return out


async def settle(*followers: Follower) -> None:
    """Fetch until every answer is empty three times in a row: all caught up, HW = LEO, and
    the last read of each partition was the idle answer (a partition whose last answer was
    not is read once more)."""
    quiet_rounds = 0
    while quiet_rounds < 3:
        got = [await f.fetch() for f in followers]
        quiet_rounds = quiet_rounds + 1 if not any(got) else 0


def test_a_quiet_session_reads_only_what_changed(
    leader: Broker, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    f2, f3 = Follower(leader, 2), Follower(leader, 3)
    reads = ReadCounter(leader, monkeypatch)

    async def main() -> None:
        await settle(f2, f3)
        reads.take()
        assert await f2.fetch() == set()
        assert reads.take() == []  # quiet: nothing read at all
        await produce(leader, 3)
        assert await f2.fetch() == {3}
        assert reads.take() == [3]
        await settle(f2, f3)
        reads.take()
        assert await f2.fetch() == set() and reads.take() == []
        clock.now += FULL_READ_MS
        assert await f2.fetch() == set()
        assert reads.take() == list(range(PARTITIONS))  # the periodic full read
        assert await f2.fetch() == set() and reads.take() == []

    trio.run(main)


def test_an_append_to_a_quiet_partition_ends_the_long_poll(leader: Broker) -> None:
    f2, f3 = Follower(leader, 2), Follower(leader, 3)

    async def main() -> None:
        await settle(f2, f3)
        got: set[int] = set()

        async def long_poll() -> None:
            got.update(await f2.fetch(max_wait_ms=60_000))

        with trio.fail_after(10):  # the long poll waits 60 s unless the append wakes it
            async with trio.open_nursery() as nursery:
                nursery.start_soon(long_poll)
                await trio.testing.wait_all_tasks_blocked()
                await produce(leader, 9)
        assert got == {9}

    trio.run(main)


def test_quiet_followers_stay_in_the_isr_after_an_append(leader: Broker, clock: Clock) -> None:
    """replica.lag.time.max.ms (2 s here) shorter than FULL_READ_MS: the followers fetch every
    500 ms without their partitions being read; after an append they are caught up as of
    their last fetch, not as of the last read of the partition (a false ISR shrink)."""
    lag_ms = 2_000
    assert lag_ms < FULL_READ_MS
    f2, f3 = Follower(leader, 2), Follower(leader, 3)

    async def main() -> None:
        await settle(f2, f3)
        for _ in range(2 * lag_ms // 500):
            clock.now += 500
            await f2.fetch()
            await f3.fetch()
        await produce(leader, 5)
        state = leader.partitions.partitions[TopicPartition("t", 5)].state
        state.replica_lag_time_max_ms = lag_ms
        assert state.out_of_sync_replicas(clock.now) == frozenset()
        assert state.out_of_sync_replicas(clock.now + lag_ms + 1) == frozenset({2, 3})

    trio.run(main)


def test_a_partition_forgotten_while_quiet_is_no_longer_caught_up(
    leader: Broker, clock: Clock
) -> None:
    """A follower that stops fetching a quiet partition (its session forgets it) is caught up
    there as of its last fetch, not for as long as its session lives: after a lag it is out of
    sync again, as before sessions read only what changed."""
    lag_ms = 2_000
    f2, f3 = Follower(leader, 2), Follower(leader, 3)

    async def main() -> None:
        await settle(f2, f3)
        state = leader.partitions.partitions[TopicPartition("t", 5)].state
        state.replica_lag_time_max_ms = lag_ms
        f2.forget(5)
        for _ in range(2 * lag_ms // 500):
            clock.now += 500
            await f2.fetch()
            await f3.fetch()
        await produce(leader, 5)
        assert state.out_of_sync_replicas(clock.now) == frozenset({2})

    trio.run(main)


def test_a_partition_added_to_a_quiet_session_is_read_at_once(leader: Broker) -> None:
    """A partition the follower adds to its session (a new follower, or back after a backoff)
    is read by the fetch that adds it, although the append waiting for it was notified before
    it joined the session. Before, it waited for the next full read (FULL_READ_MS): every
    first acks=all write to a new topic took 5 s in ZK mode, the SyncGroup of a new offsets
    partition timed out."""
    f2, f3 = Follower(leader, 2), Follower(leader, 3)

    async def main() -> None:
        await settle(f2, f3)
        f2.forget(7)
        assert await f2.fetch() == set()
        await produce(leader, 7)
        assert await f3.fetch() == {7}
        assert await f2.fetch() == set()  # the append's notification, read without 7
        f2.offsets[7] = 0
        assert await f2.fetch() == {7}

    trio.run(main)
