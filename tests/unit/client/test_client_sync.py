"""The synchronous facade, driven from a worker thread while the fake broker runs in trio."""

from __future__ import annotations

import pytest
import trio

from client import (
    KafkaError,
    NewTopic,
    SyncAdmin,
    SyncConsumer,
    SyncProducer,
    TopicPartition,
)
from protocol.config_defs import ConfigError
from protocol.errors import ErrorCode
from tests.unit.client.fake_broker import FakeBroker


def script(bootstrap: str) -> list[bytes]:
    with SyncAdmin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic("s", 2)])
        assert admin.list_topics() == ["s"]
        (desc,) = admin.describe_topics(["s"])
        assert [p.partition for p in desc.partitions] == [0, 1]
        with pytest.raises(KafkaError) as info:
            admin.create_topic("s", 1)
        assert info.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
    with SyncProducer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        futures = [producer.send("s", b"m%d" % i, partition=0) for i in range(10)]
        producer.flush()
        assert [f.result(timeout=5).offset for f in futures] == list(range(10))
    with SyncConsumer(bootstrap_servers=bootstrap) as consumer:
        consumer.assign([TopicPartition("s", 0)])
        consumer.seek(TopicPartition("s", 0), 3)
        assert consumer.position(TopicPartition("s", 0)) == 3
        out: list[bytes] = []
        while len(out) < 7:
            out += [r.value for r in consumer.poll(1000)]
        assert consumer.end_offsets([TopicPartition("s", 0)]) == {TopicPartition("s", 0): 10}
    return out


async def test_sync_facade_round_trip(fake_broker: FakeBroker) -> None:
    with trio.fail_after(20):
        values = await trio.to_thread.run_sync(script, f"127.0.0.1:{fake_broker.port}")
    assert values == [b"m%d" % i for i in range(3, 10)]


def unreachable() -> None:
    with SyncProducer(bootstrap_servers="127.0.0.1:1"):
        pass


async def test_sync_facade_raises_start_errors_in_the_caller() -> None:
    with pytest.raises(KafkaError, match=r"cannot connect to broker 127\.0\.0\.1:1"):
        await trio.to_thread.run_sync(unreachable)
    with pytest.raises(ConfigError, match="linger"):
        SyncProducer(linger_ms="soon")
