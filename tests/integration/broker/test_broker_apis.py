"""Round trips of every API against a real broker process, on the raw wire."""

from __future__ import annotations

import trio

from protocol.errors import ErrorCode
from protocol.messages.configs import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigSource,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    IncrementalAlterConfigsRequest,
    ResourceType,
)
from protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from protocol.messages.metadata import MetadataRequest
from protocol.messages.topics import CreatableTopic, CreateTopicsRequest, DeleteTopicsRequest
from tests.integration.broker.broker_wire import (
    create_topic,
    fetch,
    list_offset,
    produce,
)
from tests.support.broker_process import BrokerProcess
from tests.support.wire import WireClient, batch, records_of


async def test_produce_fetch_list_offsets(broker: BrokerProcess) -> None:
    async with await WireClient.connect(broker.host, broker.port) as c:
        await create_topic(c, "orders", partitions=2)
        r = await produce(c, "orders", 1, batch([b"a", b"b", b"c"], timestamp=1000))
        assert (r.error_code, r.base_offset) == (0, 0)
        r = await produce(c, "orders", 1, batch([b"d"], timestamp=5000))
        assert (r.error_code, r.base_offset) == (0, 3)
        f = await fetch(c, "orders", 1, 0)
        assert f.error_code == 0 and f.high_watermark == 4
        assert [x.value for x in records_of(f.records)] == [b"a", b"b", b"c", b"d"]
        assert [x.offset for x in records_of(f.records)] == [0, 1, 2, 3]
        f = await fetch(c, "orders", 1, 99)
        assert f.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert (await list_offset(c, "orders", 1, EARLIEST_TIMESTAMP)).offset == 0
        assert (await list_offset(c, "orders", 1, LATEST_TIMESTAMP)).offset == 4
        assert (await list_offset(c, "orders", 1, 1001)).offset == 1
        assert (await list_offset(c, "orders", 1, 4000)).offset == 3
        assert (await list_offset(c, "orders", 1, 9000)).offset == -1
        top = await list_offset(c, "orders", 1, MAX_TIMESTAMP)
        assert (top.timestamp, top.offset) == (5000, 3)
        # Errors with messages.
        r = await produce(c, "nope", 0, batch([b"x"]))
        assert r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        r = await produce(c, "orders", 0, batch([b"x"]), acks=2)
        assert r.error_code == ErrorCode.INVALID_REQUIRED_ACKS
        corrupt = bytearray(batch([b"x"]))
        corrupt[-1] ^= 0xFF
        r = await produce(c, "orders", 0, bytes(corrupt))
        assert r.error_code == ErrorCode.CORRUPT_MESSAGE and "CRC" in r.error_message
        assert (await fetch(c, "orders", 0, 0)).records == b""


async def test_message_too_large(broker_factory) -> None:
    broker = broker_factory({"message.max.bytes": 200})
    async with await WireClient.connect(broker.host, broker.port) as c:
        await create_topic(c, "t")
        r = await produce(c, "t", 0, batch([b"x" * 500]))
        assert r.error_code == ErrorCode.MESSAGE_TOO_LARGE and r.error_message


async def test_long_poll_woken_by_append(broker: BrokerProcess) -> None:
    async with await WireClient.connect(broker.host, broker.port) as c:
        await create_topic(c, "lp")
        async with await WireClient.connect(broker.host, broker.port) as p:
            result = {}

            async def poll() -> None:
                result["f"] = await fetch(c, "lp", 0, 0, max_wait_ms=20000, min_bytes=1)

            with trio.fail_after(15):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(poll)
                    await produce(p, "lp", 0, batch([b"wake"]))
            assert [x.value for x in records_of(result["f"].records)] == [b"wake"]
        # max_wait elapses with nothing to read: an empty answer.
        f = await fetch(c, "lp", 0, 1, max_wait_ms=50, min_bytes=1)
        assert f.error_code == 0 and f.records == b""


async def test_metadata_create_delete_and_validation(broker: BrokerProcess) -> None:
    async with await WireClient.connect(broker.host, broker.port) as c:
        md = await c.request(MetadataRequest(topics=()))
        assert md.controller_id == 1 and md.cluster_id
        assert [(b.node_id, b.host, b.port) for b in md.brokers] == [(1, "127.0.0.1", broker.port)]
        bad = ["", ".", "..", "x" * 250, "a/b", "sp ace"]
        resp = await c.request(
            CreateTopicsRequest(
                topics=(*(CreatableTopic(name=n, num_partitions=1) for n in bad),
                        CreatableTopic(name="dup"), CreatableTopic(name="dup"),
                        CreatableTopic(name="zero", num_partitions=0),
                        CreatableTopic(name="good", num_partitions=3))
            )
        )  # fmt: skip
        codes = {t.name: t.error_code for t in resp.topics}
        for n in bad:
            assert codes[n] == ErrorCode.INVALID_TOPIC_EXCEPTION, n
        assert codes["dup"] == ErrorCode.INVALID_REQUEST
        assert codes["zero"] == ErrorCode.INVALID_PARTITIONS
        assert codes["good"] == 0
        assert all(t.error_message for t in resp.topics if t.error_code)
        again = await c.request(CreateTopicsRequest(topics=(CreatableTopic(name="good"),)))
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        md = await c.request(MetadataRequest(topics=("good", "missing")))
        good, missing = md.topics
        assert good.topic_id and [p.leader_id for p in good.partitions] == [1, 1, 1]
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        md = await c.request(MetadataRequest(topics=("auto",), allow_auto_topic_creation=True))
        assert md.topics[0].error_code == 0 and len(md.topics[0].partitions) == 1
        await produce(c, "good", 2, batch([b"x"]))
        resp = await c.request(DeleteTopicsRequest(topic_names=("good", "missing")))
        assert [r.error_code for r in resp.responses] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert (await produce(c, "good", 2, batch([b"x"]))).error_code == (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        assert not (broker.log_dir / "good-2").exists()


async def test_describe_and_alter_configs(broker_factory) -> None:
    broker = broker_factory({"log.retention.hours": 2, "ssl.key.password": "hunter2"})
    async with await WireClient.connect(broker.host, broker.port) as c:
        await create_topic(c, "cfg", configs={"segment.bytes": "1048576"})
        await create_topic(c, "cfg2")
        alter = await c.request(
            IncrementalAlterConfigsRequest(
                resources=(
                    AlterConfigsResource(
                        resource_type=ResourceType.TOPIC,
                        resource_name="cfg",
                        configs=(
                            AlterableConfig(
                                name="retention.ms",
                                config_operation=AlterConfigOp.SET,
                                value="60000",
                            ),
                        ),
                    ),
                    AlterConfigsResource(
                        resource_type=ResourceType.TOPIC,
                        resource_name="cfg2",
                        configs=(
                            AlterableConfig(
                                name="retention.mss", config_operation=AlterConfigOp.SET, value="1"
                            ),
                        ),
                    ),
                )
            )
        )
        assert alter.responses[0].error_code == 0
        assert alter.responses[1].error_code == ErrorCode.INVALID_CONFIG
        assert "retention.mss" in alter.responses[1].error_message
        desc = await c.request(
            DescribeConfigsRequest(
                resources=(
                    DescribeConfigsResource(resource_type=ResourceType.TOPIC, resource_name="cfg"),
                    DescribeConfigsResource(resource_type=ResourceType.BROKER, resource_name="1"),
                    DescribeConfigsResource(resource_type=ResourceType.TOPIC, resource_name="no"),
                )
            )
        )
        topic, brk, missing = desc.results
        entries = {e.name: e for e in topic.configs}
        assert entries["retention.ms"].value == "60000"
        assert entries["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
        assert entries["segment.bytes"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
        assert entries["retention.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
        b = {e.name: e for e in brk.configs}
        assert b["log.retention.hours"].value == "2"
        assert b["log.retention.hours"].config_source == ConfigSource.STATIC_BROKER_CONFIG
        # A password is never shown (Kafka's sensitive configs), even when set.
        assert b["ssl.key.password"].is_sensitive and b["ssl.key.password"].value is None
        assert "hunter2" not in broker.log_file.read_text()
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # No override on cfg2: retention.ms comes from the broker's log.retention.hours=2.
        (plain,) = (
            await c.request(
                DescribeConfigsRequest(
                    resources=(
                        DescribeConfigsResource(
                            resource_type=ResourceType.TOPIC,
                            resource_name="cfg2",
                            configuration_keys=("retention.ms",),
                        ),
                    )
                )
            )
        ).results
        (retention,) = plain.configs
        assert retention.value == "7200000"
        assert retention.config_source == ConfigSource.STATIC_BROKER_CONFIG
