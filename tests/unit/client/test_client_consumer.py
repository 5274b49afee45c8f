"""Consumer logic against the in-memory fake broker (the real broker: tests/integration)."""

from __future__ import annotations

import pytest
import trio

from client import Consumer, NoOffsetForPartitionError, Producer, TopicPartition
from client.fetched_records import CompletedFetch
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.fetch import FetchRequest
from protocol.messages.metadata import MetadataRequest
from protocol.record_batch import Record, build_batch
from tests.unit.client.fake_broker import FakeBroker, wait_for

TP = TopicPartition("t", 0)


async def fill(broker: FakeBroker, n: int, partitions: int = 1, batch_size: int = 300) -> None:
    broker.create("t", partitions)
    async with Producer(
        bootstrap_servers=f"127.0.0.1:{broker.port}", batch_size=batch_size, linger_ms=0
    ) as producer:
        for i in range(n):
            await producer.send("t", b"%d" % i, partition=i % partitions, timestamp_ms=1000 + i)
        await producer.flush()


def consumer(broker: FakeBroker, **kwargs: object) -> Consumer:
    return Consumer(bootstrap_servers=f"127.0.0.1:{broker.port}", **kwargs)


async def poll_n(c: Consumer, n: int) -> list:
    out: list = []
    with trio.fail_after(5):
        while len(out) < n:
            out += await c.poll(1000)
    return out


async def test_poll_from_beginning_returns_everything_in_order(fake_broker: FakeBroker) -> None:
    await fill(fake_broker, 300, partitions=2)
    async with consumer(fake_broker, auto_offset_reset="earliest", max_poll_records=50) as c:
        c.assign([("t", 0), ("t", 1)])
        records = await poll_n(c, 300)
        assert len(records) == 300
        for p in (0, 1):
            offsets = [r.offset for r in records if r.partition == p]
            assert offsets == list(range(150))
        assert await c.position(("t", 0)) == 150
        assert c.highwater(("t", 1)) == 150
        assert await c.poll(0) == []


async def test_max_poll_records_bounds_each_poll(fake_broker: FakeBroker) -> None:
    await fill(fake_broker, 100)
    async with consumer(fake_broker, auto_offset_reset="earliest", max_poll_records=7) as c:
        c.assign([TP])
        with trio.fail_after(5):
            first = []
            while not first:
                first = await c.poll(1000)
        assert len(first) <= 7
        assert [r.offset for r in first] == list(range(len(first)))


async def test_latest_reset_skips_existing_records(fake_broker: FakeBroker) -> None:
    await fill(fake_broker, 20)
    async with consumer(fake_broker) as c:
        c.assign([TP])
        assert await c.position(TP) == 20
        assert await c.poll(50) == []


async def test_seek_skips_records_below_the_offset_inside_a_batch(fake_broker: FakeBroker) -> None:
    await fill(fake_broker, 100, batch_size=10_000)  # one or few batches
    async with consumer(fake_broker) as c:
        c.assign([TP])
        c.seek(TP, 42)
        records = await poll_n(c, 58)
        assert records[0].offset == 42 and records[0].value == b"42"
        assert [r.offset for r in records] == list(range(42, 100))
        c.seek_to_beginning()
        assert (await poll_n(c, 1))[0].offset == 0
        c.seek_to_end(TP)
        assert await c.position(TP) == 100


async def test_offsets_for_times_and_bounds(fake_broker: FakeBroker) -> None:
    await fill(fake_broker, 10, batch_size=1)  # one record per batch
    async with consumer(fake_broker) as c:
        found = await c.offsets_for_times({TP: 1005})
        assert found[TP] is not None and found[TP].offset == 5
        assert (await c.offsets_for_times({TP: 99_999}))[TP] is None
        assert await c.beginning_offsets([TP]) == {TP: 0}
        assert await c.end_offsets([TP]) == {TP: 10}


async def test_out_of_range_resets_by_auto_offset_reset(fake_broker: FakeBroker) -> None:
    await fill(fake_broker, 10)
    async with consumer(fake_broker, auto_offset_reset="earliest") as c:
        c.assign([TP])
        c.seek(TP, 1000)
        records = await poll_n(c, 10)
        assert records[0].offset == 0


async def test_out_of_range_with_reset_none_raises(fake_broker: FakeBroker) -> None:
    await fill(fake_broker, 10)
    async with consumer(fake_broker, auto_offset_reset="none") as c:
        c.assign([TP])
        with pytest.raises(NoOffsetForPartitionError):
            await c.poll(10)
        c.seek(TP, 1000)
        with trio.fail_after(5), pytest.raises(KafkaError) as info:
            while True:
                await c.poll(100)
        assert info.value.code is ErrorCode.OFFSET_OUT_OF_RANGE


async def test_fetches_are_pipelined_while_records_are_handed_out(fake_broker: FakeBroker) -> None:
    await fill(fake_broker, 200)
    async with consumer(fake_broker, auto_offset_reset="earliest", max_poll_records=500) as c:
        c.assign([TP])
        assert len(await poll_n(c, 200)) == 200
        # the poll that handed out the last buffered records already sent the next fetch, so
        # it is under way while the caller works on them (Kafka's pipelining)
        await wait_for(lambda: sum(isinstance(r, FetchRequest) for r in fake_broker.requests) >= 2)


async def test_unassigned_partition_operations_are_refused(fake_broker: FakeBroker) -> None:
    async with consumer(fake_broker) as c:
        with pytest.raises(KafkaError, match="not assigned"):
            c.seek(("x", 0), 1)


def test_completed_fetch_skips_below_fetch_offset_and_partial_tail() -> None:
    a = bytearray(build_batch([Record(b"%d" % i) for i in range(5)], base_offset=10))
    b = bytearray(build_batch([Record(b"%d" % i) for i in range(5, 8)], base_offset=15))
    data = bytes(a + b + b[:20])  # a torn third batch at the end is left for the next fetch
    cf = CompletedFetch(TP, 12, data)
    out: list = []
    assert cf.take(2, out) is False
    assert [r.offset for r in out] == [12, 13]
    assert cf.take(100, out) is True
    assert [r.offset for r in out] == [12, 13, 14, 15, 16, 17]
    assert cf.next_offset == 18


async def test_a_fetch_answered_with_the_new_leader_reads_from_it_without_metadata() -> None:
    """KIP-951: a Fetch answered NOT_LEADER_OR_FOLLOWER naming the leader and its endpoint
    sends the next Fetch there, without asking for metadata."""
    old, new = FakeBroker(node_id=1), FakeBroker(node_id=2)
    async with trio.open_nursery() as nursery:
        await nursery.start(old.serve)
        await nursery.start(new.serve)
        await fill(new, 5)
        produced = len(new.requests)
        old.create("t")
        old.moved[("t", 0)] = (2, 1, new.port)
        async with consumer(old, auto_offset_reset="earliest", metadata_max_age_ms=600_000) as c:
            c.assign([TP])
            records = await poll_n(c, 5)
        assert [r.value for r in records] == [b"%d" % i for i in range(5)]
        first_fetch = next(i for i, r in enumerate(old.requests) if isinstance(r, FetchRequest))
        assert not any(isinstance(r, MetadataRequest) for r in old.requests[first_fetch:])
        assert not any(isinstance(r, MetadataRequest) for r in new.requests[produced:])
        nursery.cancel_scope.cancel()
