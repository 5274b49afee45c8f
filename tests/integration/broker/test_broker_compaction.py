"""Log compaction on a real broker: the cleaner task shrinks a compacted topic while producers
go on, consumers read the latest value per key across the gaps, deleted keys disappear, and a
compacted topic refuses records without a key."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
import trio

from client import Admin, Consumer, ConsumerRecord, KafkaError, Producer, TopicPartition
from protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.waiting import wait_until

CLEANER = {"log.cleaner.backoff.ms": 100, "log.flush.scheduler.interval.ms": 100}
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "4096",
    "delete.retention.ms": "0",
    "min.cleanable.dirty.ratio": "0.1",
}
KEYS = 5


def log_bytes(broker: BrokerProcess, topic: str) -> int:
    d = Path(broker.log_dirs[0]) / f"{topic}-0"
    return sum(f.stat().st_size for f in d.glob("*.log"))


async def consume_to_end(bootstrap: str, tp: TopicPartition) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    async with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        with trio.fail_after(20):
            while await consumer.position(tp) < end:
                out += await consumer.poll(500)
    return out


async def produce_updates(bootstrap: str, topic: str, rounds: int) -> dict[bytes, bytes | None]:
    latest: dict[bytes, bytes | None] = {}
    async with Producer(bootstrap_servers=bootstrap, acks="all", linger_ms=0) as producer:
        for i in range(rounds):
            for k in range(KEYS):
                key, value = b"key-%d" % k, b"value-%d-%d-" % (k, i) + b"x" * 100
                await producer.send_and_wait(topic, value, key=key, partition=0)
                latest[key] = value
        # Delete one key: its tombstone goes after delete.retention.ms (0 here).
        await producer.send_and_wait(topic, None, key=b"key-0", partition=0)
        latest.pop(b"key-0")
        # Roll past the tombstone so that it becomes cleanable too.
        for k in range(1, KEYS):
            for j in range(8):
                value = b"final-%d-%d-" % (k, j) + b"y" * 400
                await producer.send_and_wait(topic, value, key=b"key-%d" % k, partition=0)
                latest[b"key-%d" % k] = value
    return latest


async def test_compacted_topic_shrinks_and_reads_latest_value_per_key(
    broker_factory,
) -> None:
    broker = broker_factory(CLEANER)
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic("compacted", 1, 1, TOPIC_CONFIGS)
    latest = await produce_updates(broker.bootstrap, "compacted", rounds=60)
    written = 60 * KEYS + 1 + (KEYS - 1) * 8
    full_size = log_bytes(broker, "compacted")

    def shrank() -> bool:
        return log_bytes(broker, "compacted") < full_size / 3

    await wait_until(shrank, within=30, every=0.1)
    tp = TopicPartition("compacted", 0)

    async def latest_values_and_tombstone_gone() -> bool:
        # A read that races a cleaning may see a value whose tombstone is removed before the
        # read gets there (delete.retention.ms is 0 here: Kafka's consumers have the same
        # window), so the view is compared once the cleaner has settled.
        records = await consume_to_end(broker.bootstrap, tp)
        return {r.key: r.value for r in records} == latest

    await wait_until(latest_values_and_tombstone_gone, within=30, every=0.2)
    records = await consume_to_end(broker.bootstrap, tp)
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets) and offsets[-1] == written - 1
    assert len(records) < written / 5  # gaps: the consumer read across them
    # ListOffsets still answers the original range.
    async with Consumer(bootstrap_servers=broker.bootstrap) as consumer:
        assert (await consumer.beginning_offsets([tp]))[tp] == 0
        assert (await consumer.end_offsets([tp]))[tp] == written
    d = Path(broker.log_dirs[0])
    assert "compacted 0 " in (d / "cleaner-offset-checkpoint").read_text()

    def no_leftovers() -> bool:
        # A pass that is still running has its .cleaned files on disk until it swaps them in;
        # what must not happen is that they stay.
        names = os.listdir(d / "compacted-0")
        return not [n for n in names if n.endswith((".cleaned", ".swap"))]

    await wait_until(no_leftovers, within=10, every=0.1)


async def test_compacted_topic_refuses_records_without_a_key(broker: BrokerProcess) -> None:
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic("needs-keys", 1, 1, {"cleanup.policy": "compact"})
    async with Producer(bootstrap_servers=broker.bootstrap, retries=0) as producer:
        try:
            await producer.send_and_wait("needs-keys", b"no key", partition=0)
        except KafkaError as exc:
            assert exc.code == ErrorCode.INVALID_RECORD
            assert "compacted topic cannot accept a record without a key" in str(exc)
        else:
            raise AssertionError("a keyless record was accepted by a compacted topic")
        # The broker is still up and takes keyed records.
        await producer.send_and_wait("needs-keys", b"v", key=b"k", partition=0)


async def test_corrupt_segment_stops_cleaning_that_log_only(broker_factory) -> None:
    # No cleaning before the damage: the restart's first pass must read the damaged segment.
    broker = broker_factory({**CLEANER, "log.cleaner.enable": "false"})
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic("bad", 1, 1, TOPIC_CONFIGS)
    await produce_updates(broker.bootstrap, "bad", rounds=10)
    await broker.astop()
    seg_dir = Path(broker.log_dirs[0]) / "bad-0"
    first = sorted(seg_dir.glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    data[80:83] = b"\x00\xff\x00"  # damage a record, past the header: CRC mismatch
    first.write_bytes(bytes(data))
    damaged = bytes(data)
    broker.overrides["log.cleaner.enable"] = "true"
    await broker.astart()

    def stopped() -> list[dict]:
        return [
            e
            for e in broker.events(since_start=True)
            if e.get("event") == "log cleaning stopped: corrupt segment"
        ]

    await wait_until(stopped, within=20, every=0.1)
    assert first.name in stopped()[0]["error"]
    assert first.read_bytes() == damaged  # left as it was
    async with Producer(bootstrap_servers=broker.bootstrap) as producer:
        await producer.send_and_wait("bad", b"still up", key=b"k", partition=0)


@pytest.mark.parametrize(
    "point",
    [
        "log.cleaner.after_cleaned",
        "log.cleaner.after_swap_rename",
        "log.cleaner.before_swap_complete",
    ],
)
async def test_broker_killed_mid_cleaning_restarts_with_every_kept_record(
    broker_factory, point: str
) -> None:
    # Written with the cleaner off; the restart's first cleaning is killed at `point`.
    broker = broker_factory({**CLEANER, "log.cleaner.enable": "false"})
    async with Admin(bootstrap_servers=broker.bootstrap) as admin:
        await admin.create_topic("crashy", 1, 1, TOPIC_CONFIGS)
    latest = await produce_updates(broker.bootstrap, "crashy", rounds=30)
    await broker.astop()
    broker.overrides["log.cleaner.enable"] = "true"
    broker.extra_env = {"TRIOKA_FAILPOINTS": f"{point}=return(exit)"}
    with contextlib.suppress(Exception):  # it may die before it is ready
        await broker.astart()
    assert await broker.await_exit(within=30) == -9  # SIGKILLed at the failpoint
    # What recovery left, read with the cleaner off (no cleaning races the read).
    broker.extra_env = {}
    broker.overrides["log.cleaner.enable"] = "false"
    await broker.astart()
    records = await consume_to_end(broker.bootstrap, TopicPartition("crashy", 0))
    got = {r.key: r.value for r in records}
    # A tombstone may still be there (the first cleaning keeps it); the key stays deleted.
    assert {k: v for k, v in got.items() if v is not None} == latest
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))
    # A cleaning after the restart completes, and leaves no cleaner file behind.
    await broker.astop()
    broker.overrides["log.cleaner.enable"] = "true"
    await broker.astart()
    await wait_until(
        lambda: any(e.get("event") == "log cleaned" for e in broker.events(since_start=True)),
        within=30,
        every=0.1,
    )
    names = os.listdir(Path(broker.log_dirs[0]) / "crashy-0")
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], names
