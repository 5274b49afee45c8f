"""Producer logic against the in-memory fake broker (the real broker: tests/integration)."""

from __future__ import annotations

import itertools

import pytest
import trio

from client import Consumer, KafkaTimeoutError, Producer, TopicPartition
from client.errors import ClientClosedError
from client.partitioner import partition_for_key
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import ApiKey
from protocol.messages.metadata import MetadataRequest
from protocol.messages.produce import ProduceRequest
from tests.unit.client.fake_broker import FakeBroker, wait_for


def bootstrap(broker: FakeBroker) -> str:
    return f"127.0.0.1:{broker.port}"


def produce_requests(broker: FakeBroker) -> list[ProduceRequest]:
    return [r for r in broker.requests if isinstance(r, ProduceRequest)]


async def test_keyed_records_land_on_murmur2_partitions_in_order(fake_broker: FakeBroker) -> None:
    fake_broker.create("t", 4)
    async with Producer(bootstrap_servers=bootstrap(fake_broker), acks="1") as producer:
        futures = [await producer.send("t", b"v%d" % i, key=b"k%d" % (i % 10)) for i in range(200)]
        results = [await f for f in futures]
    for i, md in enumerate(results):
        assert md.partition == partition_for_key(b"k%d" % (i % 10), 4)
    for p in range(4):
        offsets = [md.offset for md in results if md.partition == p]
        assert offsets == list(range(len(offsets)))


async def test_one_produce_request_per_broker_carries_every_partition(
    fake_broker: FakeBroker,
) -> None:
    fake_broker.create("t", 3)
    async with Producer(bootstrap_servers=bootstrap(fake_broker), linger_ms=60000) as producer:
        for p in range(3):
            for _ in range(5):
                await producer.send("t", b"x", partition=p)
        await producer.flush()
    (request,) = produce_requests(fake_broker)
    assert sorted(p.index for p in request.topics[0].partitions) == [0, 1, 2]


async def test_null_keys_stick_to_one_partition_per_batch(fake_broker: FakeBroker) -> None:
    fake_broker.create("t", 8)
    async with Producer(bootstrap_servers=bootstrap(fake_broker), batch_size=1000) as producer:
        futures = [await producer.send("t", b"x" * 90) for _ in range(100)]
        parts = [(await f).partition for f in futures]
    switches = sum(1 for a, b in itertools.pairwise(parts) if a != b)
    assert 1 <= switches <= 15  # ~ every 1000 bytes, not per record
    assert len(set(parts)) > 1


async def test_retriable_errors_are_retried_after_a_metadata_refresh(
    fake_broker: FakeBroker,
) -> None:
    fake_broker.create("t", 1)
    fake_broker.fail_next[ApiKey.PRODUCE] = [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 2
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker), retry_backoff_ms=1, linger_ms=0
    ) as producer:
        md = await (await producer.send("t", b"a"))
    assert md.offset == 0
    assert len(produce_requests(fake_broker)) == 3
    assert fake_broker.topics["t"][0].end == 1


async def test_non_retriable_errors_fail_the_send(fake_broker: FakeBroker) -> None:
    fake_broker.create("t", 1)
    fake_broker.fail_next[ApiKey.PRODUCE] = [ErrorCode.MESSAGE_TOO_LARGE]
    async with Producer(bootstrap_servers=bootstrap(fake_broker)) as producer:
        future = await producer.send("t", b"a")
        with pytest.raises(KafkaError) as info:
            await future
    assert info.value.code is ErrorCode.MESSAGE_TOO_LARGE


async def test_retries_zero_fails_on_the_first_retriable_error(fake_broker: FakeBroker) -> None:
    fake_broker.create("t", 1)
    fake_broker.fail_next[ApiKey.PRODUCE] = [ErrorCode.NOT_LEADER_OR_FOLLOWER]
    async with Producer(bootstrap_servers=bootstrap(fake_broker), retries=0) as producer:
        with pytest.raises(KafkaError, match="NOT_LEADER_OR_FOLLOWER"):
            await (await producer.send("t", b"a"))


async def test_delivery_timeout_expires_a_batch_that_keeps_failing(
    fake_broker: FakeBroker,
) -> None:
    fake_broker.create("t", 1)
    fake_broker.fail_next[ApiKey.PRODUCE] = [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 10_000
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker),
        linger_ms=0,
        request_timeout_ms=100,
        delivery_timeout_ms=300,
        retry_backoff_ms=10,
        retry_backoff_max_ms=20,
    ) as producer:
        future = await producer.send("t", b"a")
        with trio.fail_after(10), pytest.raises(KafkaTimeoutError, match=r"delivery\.timeout\.ms"):
            await future


async def test_acks_zero_gets_no_offsets(fake_broker: FakeBroker) -> None:
    fake_broker.create("t", 1)
    async with Producer(bootstrap_servers=bootstrap(fake_broker), acks="0") as producer:
        md = await (await producer.send("t", b"a"))
        await producer.flush()
    assert md.offset == -1
    await wait_for(lambda: fake_broker.topics["t"][0].end >= 1)


async def test_unknown_topic_blocks_up_to_max_block_ms(fake_broker: FakeBroker) -> None:
    async with Producer(bootstrap_servers=bootstrap(fake_broker), max_block_ms=200) as producer:
        with pytest.raises(KafkaTimeoutError, match="'nope' not present in metadata"):
            await producer.send("nope", b"a")


async def test_full_buffer_memory_blocks_then_times_out(fake_broker: FakeBroker) -> None:
    fake_broker.create("t", 1)
    async with Producer(
        bootstrap_servers=bootstrap(fake_broker), buffer_memory=2000, max_block_ms=100, linger_ms=0
    ) as producer:
        await producer.partitions_for("t")
        fake_broker.held = trio.Event()  # no answers from now on: nothing is acknowledged
        await producer.send("t", b"x" * 1500)
        with pytest.raises(KafkaTimeoutError, match=r"buffer\.memory"):
            await producer.send("t", b"y" * 1000)
        fake_broker.held.set()
        # once the first record is acknowledged its memory is free again
        with trio.fail_after(5):
            await (await producer.send("t", b"y" * 1000))


async def test_records_larger_than_max_request_size_are_refused(fake_broker: FakeBroker) -> None:
    fake_broker.create("t", 1)
    async with Producer(bootstrap_servers=bootstrap(fake_broker), max_request_size=1000) as p:
        with pytest.raises(KafkaError, match=r"max\.request\.size") as info:
            await p.send("t", b"x" * 2000)
        assert info.value.code is ErrorCode.MESSAGE_TOO_LARGE
        with pytest.raises(KafkaError, match="partition 5"):
            await p.send("t", b"x", partition=5)


async def test_close_with_zero_timeout_fails_what_is_buffered(fake_broker: FakeBroker) -> None:
    fake_broker.create("t", 1)
    producer = Producer(bootstrap_servers=bootstrap(fake_broker), linger_ms=60000)
    await producer.start()
    future = await producer.send("t", b"a")
    await producer.close(timeout_ms=0)
    with pytest.raises(ClientClosedError):
        await future
    with pytest.raises(ClientClosedError):
        await producer.send("t", b"b")


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
async def test_compressed_round_trip_with_headers_and_timestamps(
    fake_broker: FakeBroker, compression: str
) -> None:
    fake_broker.create("t", 1)
    bs = bootstrap(fake_broker)
    async with Producer(bootstrap_servers=bs, compression_type=compression) as producer:
        for i in range(50):
            await producer.send(
                "t", b"value-%d" % i, key=b"k", timestamp_ms=1_000_000 + i,
                headers=[("h", b"%d" % i)],
            )  # fmt: skip
        await producer.flush()
    async with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("t", 0)])
        records = []
        with trio.fail_after(5):
            while len(records) < 50:
                records += await consumer.poll(1000)
    assert [r.value for r in records] == [b"value-%d" % i for i in range(50)]
    assert [r.timestamp for r in records] == [1_000_000 + i for i in range(50)]
    assert records[7].headers == (("h", b"7"),) and records[7].key == b"k"


async def test_unreachable_bootstrap_fails_start() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()
    with pytest.raises(KafkaError, match=f"cannot connect to broker 127.0.0.1:{port}"):
        async with Producer(bootstrap_servers=f"127.0.0.1:{port}"):
            pass


async def test_a_produce_answered_with_the_new_leader_goes_there_without_metadata() -> None:
    """KIP-951: NOT_LEADER_OR_FOLLOWER naming the leader (and its endpoint) sends the retry there
    at once, without a Metadata request and without backoff."""
    old, new = FakeBroker(node_id=1), FakeBroker(node_id=2)
    for broker in (old, new):
        broker.create("t")
    async with trio.open_nursery() as nursery:
        await nursery.start(old.serve)
        await nursery.start(new.serve)
        async with Producer(
            bootstrap_servers=f"127.0.0.1:{old.port}",
            retry_backoff_ms=5_000,
            retry_backoff_max_ms=5_000,
            enable_idempotence=False,  # the fake leaders share no producer state
        ) as producer:
            await producer.send_and_wait("t", b"first")
            old.moved[("t", 0)] = (2, 1, new.port)
            metadata_before = sum(isinstance(r, MetadataRequest) for r in old.requests)
            with trio.fail_after(3):  # a backoff (5 s) or a refresh would not make it
                sent = await producer.send_and_wait("t", b"second")
            assert sent.offset == 0  # the new leader's log
            assert len(new.topics["t"][0].batches) == 1
            assert sum(isinstance(r, MetadataRequest) for r in old.requests) == metadata_before
            assert not any(isinstance(r, MetadataRequest) for r in new.requests)
        nursery.cancel_scope.cancel()
