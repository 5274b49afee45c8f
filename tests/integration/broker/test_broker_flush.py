"""Rolled segments are fsynced soon after the roll even with Kafka's default of no periodic
flush, so the recovery point moves and a crash re-scans only the unflushed tail."""

from __future__ import annotations

from protocol.names import TopicPartition
from storage.checkpoints import read_offsets
from tests.integration.broker.broker_wire import create_topic, produce
from tests.support.waiting import wait_until
from tests.support.wire import WireClient, batch


async def test_recovery_point_follows_rolled_segments(broker_factory) -> None:
    broker = broker_factory({"log.flush.offset.checkpoint.interval.ms": 200})
    checkpoint = broker.log_dir / "recovery-point-offset-checkpoint"
    tp = TopicPartition("rolled", 0)
    async with await WireClient.connect(broker.host, broker.port) as c:
        await create_topic(c, "rolled", configs={"segment.bytes": "1024"})
        for _ in range(5):  # each batch fills a segment: four rolls
            assert (await produce(c, "rolled", 0, batch([b"x" * 900]))).error_code == 0

        def recovery_point() -> int:
            return read_offsets(str(checkpoint)).get(tp, 0) if checkpoint.exists() else 0

        await wait_until(lambda: recovery_point() >= 4, within=10)
