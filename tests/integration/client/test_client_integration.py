"""The client library against a real broker process (tests.support harness)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio

from client import (
    Admin,
    AlterConfigOp,
    ConfigResource,
    Consumer,
    ConsumerRecord,
    KafkaError,
    NewTopic,
    Producer,
    TopicPartition,
)
from client.errors import KafkaConnectionError
from client.partitioner import partition_for_key
from protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.waiting import wait_until


async def create(broker: BrokerProcess, name: str, partitions: int = 1, **configs: str) -> None:
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic(
            name, partitions, 1, {k.replace("_", "."): v for k, v in configs.items()}
        )


async def consume_all(
    broker: BrokerProcess, tps: list[TopicPartition], n: int, **config: object
) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    async with Consumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", **config
    ) as consumer:
        consumer.assign(tps)
        with trio.fail_after(20):
            while len(out) < n:
                out += await consumer.poll(1000)
    return out


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
async def test_round_trip_with_keys_headers_timestamps(
    broker: BrokerProcess, compression: str
) -> None:
    await create(broker, "rt", 3)
    sent = []
    async with Producer(
        bootstrap_servers=broker.bootstrap, acks="1", compression_type=compression
    ) as producer:
        futures = []
        for i in range(300):
            key = b"key-%d" % (i % 17)
            futures.append(
                await producer.send(
                    "rt",
                    b"value-%d" % i,
                    key,
                    timestamp_ms=1_700_000_000_000 + i,
                    headers=[("i", b"%d" % i)],
                )
            )
            sent.append((key, b"value-%d" % i))
        metadata = [await f for f in futures]
    for (key, _), md in zip(sent, metadata, strict=True):
        assert md.partition == partition_for_key(key, 3)
        assert md.offset >= 0
    records = await consume_all(broker, [TopicPartition("rt", p) for p in range(3)], 300)
    by_value = {r.value: r for r in records}
    assert len(by_value) == 300
    for i, (key, value) in enumerate(sent):
        r = by_value[value]
        assert r.key == key
        assert r.headers == (("i", b"%d" % i),)
        assert r.timestamp == 1_700_000_000_000 + i
        assert (r.partition, r.offset) == (metadata[i].partition, metadata[i].offset)


async def test_acks_all_and_acks_zero(broker: BrokerProcess) -> None:
    await create(broker, "acks")
    async with Producer(bootstrap_servers=broker.bootstrap, acks="all") as producer:
        md = await producer.send_and_wait("acks", b"a")
        assert md.offset == 0
    async with Producer(bootstrap_servers=broker.bootstrap, acks="0") as producer:
        md = await producer.send_and_wait("acks", b"b")
        assert md.offset == -1
        await producer.flush()
    records = await consume_all(broker, [TopicPartition("acks", 0)], 2)
    assert [r.value for r in records] == [b"a", b"b"]


async def test_consumer_seek_timestamps_and_out_of_range(broker: BrokerProcess) -> None:
    await create(broker, "seek")
    tp = TopicPartition("seek", 0)
    async with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
        for i in range(50):
            await producer.send("seek", b"%d" % i, timestamp_ms=10_000 + i * 10)
            if i % 10 == 9:
                await producer.flush()  # several batches, so seeks land inside batches
    async with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
        consumer.assign([tp])
        assert await consumer.position(tp) == 50  # auto.offset.reset=latest
        assert await consumer.beginning_offsets([tp]) == {tp: 0}
        assert await consumer.end_offsets([tp]) == {tp: 50}
        found = await consumer.offsets_for_times({tp: 10_000 + 23 * 10})
        assert found[tp] is not None and found[tp].offset == 23
        assert (await consumer.offsets_for_times({tp: 99_999_999}))[tp] is None
        consumer.seek(tp, 23)
        with trio.fail_after(10):
            records: list[ConsumerRecord] = []
            while len(records) < 27:
                records += await consumer.poll(1000)
        assert [r.offset for r in records] == list(range(23, 50))
        assert records[0].value == b"23"
        consumer.seek(tp, 5000)  # beyond the end: OFFSET_OUT_OF_RANGE -> latest
        with trio.fail_after(10):
            while await consumer.position(tp) == 5000:
                assert await consumer.poll(100) == []
        assert await consumer.position(tp) == 50
    async with Consumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="none") as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 5000)
        with trio.fail_after(10), pytest.raises(KafkaError) as info:
            while True:
                await consumer.poll(200)
        assert info.value.code is ErrorCode.OFFSET_OUT_OF_RANGE


async def test_admin_topics_and_configs(broker: BrokerProcess) -> None:
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        created = await admin.create_topics(
            [NewTopic("adm", 4, 1, {"retention.ms": "60000"}), NewTopic("adm2", 1, 1)]
        )
        assert [c.num_partitions for c in created] == [4, 1]
        with pytest.raises(KafkaError) as info:
            await admin.create_topic("adm", 1, 1)
        assert info.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
        assert "adm" in info.value.message
        with pytest.raises(KafkaError) as info:
            await admin.create_topic("bad/name", 1, 1)
        assert info.value.code is ErrorCode.INVALID_TOPIC_EXCEPTION
        assert {"adm", "adm2"} <= set(await admin.list_topics())
        (desc,) = await admin.describe_topics(["adm"])
        assert [p.partition for p in desc.partitions] == [0, 1, 2, 3]
        assert all(p.leader == broker.node_id for p in desc.partitions)
        with pytest.raises(KafkaError, match="does not exist") as info:
            await admin.describe_topics(["nope"])
        assert info.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        resource = ConfigResource.topic("adm")
        entries = {e.name: e for e in (await admin.describe_configs([resource]))[resource]}
        assert entries["retention.ms"].value == "60000" and not entries["retention.ms"].is_default
        await admin.incremental_alter_configs(
            {resource: [("retention.ms", AlterConfigOp.SET, "120000"),
                        ("segment.bytes", AlterConfigOp.SET, "1048576")]}
        )  # fmt: skip
        entries = {e.name: e for e in (await admin.describe_configs([resource]))[resource]}
        assert entries["retention.ms"].value == "120000"
        assert entries["segment.bytes"].value == "1048576"
        with pytest.raises(KafkaError) as info:
            await admin.incremental_alter_configs(
                {resource: [("retention.ms", AlterConfigOp.SET, "soon")]}
            )
        assert info.value.code is ErrorCode.INVALID_CONFIG
        assert "retention.ms" in info.value.message

        await admin.delete_topics(["adm2"])

        async def deleted() -> bool:  # deletion completes asynchronously
            return "adm2" not in await admin.list_topics()

        await wait_until(deleted, within=10)
        with pytest.raises(KafkaError) as info:
            await admin.delete_topics(["adm2"])
        assert info.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        cluster = await admin.describe_cluster()
        assert [b.node_id for b in cluster.brokers] == [broker.node_id]


async def test_producer_retries_through_a_broker_restart(broker: BrokerProcess) -> None:
    await create(broker, "restart", 2)
    async with Producer(
        bootstrap_servers=broker.bootstrap,
        acks="1",
        linger_ms=1,
        retry_backoff_ms=20,
        retry_backoff_max_ms=200,
        request_timeout_ms=5000,
        delivery_timeout_ms=60000,
    ) as producer:
        futures = [await producer.send("restart", b"before-%d" % i) for i in range(200)]
        await producer.flush()
        restarting = trio.Event()

        async def restart() -> None:
            await broker.arestart()
            restarting.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(restart)
            i = 0
            while not restarting.is_set() or i < 400:
                futures.append(await producer.send("restart", b"during-%d" % i))
                i += 1
                await trio.sleep(0.002)
        with trio.fail_after(60):
            metadata = [await f for f in futures]
    assert broker.starts == 2  # the broker really went away and came back meanwhile
    assert all(md.offset >= 0 for md in metadata)
    total = len(metadata)
    records = await consume_all(
        broker, [TopicPartition("restart", 0), TopicPartition("restart", 1)], total
    )
    values = {r.value for r in records}
    # nothing acknowledged is lost (without idempotence a retry may duplicate, never drop)
    assert len(values) == total


async def test_unreachable_broker_is_a_clear_error() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()
    with pytest.raises(KafkaConnectionError, match="Connection refused"):
        async with Admin(bootstrap_servers=f"127.0.0.1:{port}"):
            pass


async def test_producer_auto_creates_topics_only_when_the_broker_allows(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    make = broker_factory
    allowing = await trio.to_thread.run_sync(make)
    async with Producer(bootstrap_servers=allowing.bootstrap, max_block_ms=10_000) as producer:
        md = await producer.send_and_wait("auto-created", b"x")
    assert (md.topic, md.offset) == ("auto-created", 0)
    refusing = await trio.to_thread.run_sync(
        lambda: make({"auto.create.topics.enable": "false"}, node_id=2)
    )
    async with Producer(bootstrap_servers=refusing.bootstrap, max_block_ms=300) as producer:
        with pytest.raises(KafkaError, match="not present in metadata"):
            await producer.send("auto-created", b"x")
