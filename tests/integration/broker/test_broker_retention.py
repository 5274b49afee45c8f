"""Topic configs changed at run time reach the live log, and the broker's retention loop
deletes whole old segments, moving the log start offset (as Kafka's LogManager does)."""

from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages.configs import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    ResourceType,
)
from protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from tests.integration.broker.broker_wire import create_topic, fetch, list_offset, produce
from tests.support.waiting import wait_until
from tests.support.wire import WireClient, batch


async def _set_topic_config(c: WireClient, topic: str, name: str, value: str) -> None:
    resp = await c.request(
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=ResourceType.TOPIC,
                    resource_name=topic,
                    configs=(
                        AlterableConfig(name=name, config_operation=AlterConfigOp.SET, value=value),
                    ),
                ),
            )
        )
    )
    assert resp.responses[0].error_code == 0, resp


async def test_retention_bytes_set_at_run_time_deletes_old_segments(broker_factory) -> None:
    broker = broker_factory({"log.retention.check.interval.ms": 200})
    async with await WireClient.connect(broker.host, broker.port) as c:
        # Small segments: every produce below rolls a new one.
        await create_topic(c, "ret", configs={"segment.bytes": "1024"})
        for i in range(10):
            r = await produce(c, "ret", 0, batch([b"%02d" % i + b"x" * 900]))
            assert r.error_code == 0 and r.base_offset == i
        assert (await list_offset(c, "ret", 0, EARLIEST_TIMESTAMP)).offset == 0

        await _set_topic_config(c, "ret", "retention.bytes", "3000")

        async def segments_deleted() -> bool:
            return (await list_offset(c, "ret", 0, EARLIEST_TIMESTAMP)).offset > 0

        await wait_until(segments_deleted, within=15)
        start = (await list_offset(c, "ret", 0, EARLIEST_TIMESTAMP)).offset
        assert 0 < start < 10  # whole old segments went; the active one never does
        assert (await list_offset(c, "ret", 0, LATEST_TIMESTAMP)).offset == 10
        gone = await fetch(c, "ret", 0, 0)
        assert gone.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        kept = await fetch(c, "ret", 0, start)
        assert kept.error_code == 0 and kept.log_start_offset == start
