"""SIGTERM keeps the clean-shutdown contract; SIGKILL mid-write never loses an acked record."""

from __future__ import annotations

import random

import trio

from protocol.errors import ErrorCode
from tests.integration.broker.broker_wire import create_topic, fetch, produce
from tests.support.broker_process import BrokerProcess
from tests.support.wire import WireClient, batch, records_of


async def read_all(c: WireClient, topic: str, partition: int = 0) -> list:
    out = []
    offset = 0
    while True:
        f = await fetch(c, topic, partition, offset)
        assert f.error_code == 0, f
        recs = records_of(f.records)
        if not recs:
            return out
        out.extend(r for r in recs if r.offset >= offset)
        offset = out[-1].offset + 1


async def test_sigterm_restart_skips_recovery_and_keeps_data(broker: BrokerProcess) -> None:
    async with await WireClient.connect(broker.host, broker.port) as c:
        await create_topic(c, "keep", partitions=2)
        for i in range(20):
            assert (await produce(c, "keep", i % 2, batch([b"%d" % i]))).error_code == 0
    assert await broker.astop() == 0
    assert (broker.log_dir / ".kafka_cleanshutdown").exists()
    broker.wait_for_event("broker shut down")
    await broker.astart()
    broker.wait_for_event("clean shutdown marker found, skipping log recovery")
    async with await WireClient.connect(broker.host, broker.port) as c:
        values = [r.value for p in (0, 1) for r in await read_all(c, "keep", p)]
        assert sorted(values, key=int) == [b"%d" % i for i in range(20)]


async def test_sigkill_mid_write_loses_no_acked_record(broker: BrokerProcess) -> None:
    rng = random.Random(20261122)
    acked: dict[int, bytes] = {}
    counter = 0
    async with await WireClient.connect(broker.host, broker.port) as c:
        await create_topic(c, "crash", configs={"segment.bytes": "65536"})
    for _round in range(12):
        async with trio.open_nursery() as nursery:

            async def writer() -> None:
                nonlocal counter
                try:
                    async with await WireClient.connect(broker.host, broker.port) as p:
                        while True:
                            values = [b"v%08d" % (counter + i) + b"x" * rng.randrange(200)
                                      for i in range(rng.randrange(1, 20))]  # fmt: skip
                            counter += len(values)
                            r = await produce(p, "crash", 0, batch(values))
                            if r.error_code == 0:
                                for i, v in enumerate(values):
                                    acked[r.base_offset + i] = v
                except (EOFError, OSError, trio.BrokenResourceError):
                    return  # the broker died under us: unacked writes may or may not exist

            nursery.start_soon(writer)
            await trio.sleep(rng.uniform(0.05, 0.4))  # a seeded random moment to crash at
            await broker.akill()
        await broker.astart()
        async with await WireClient.connect(broker.host, broker.port) as c:
            got = await read_all(c, "crash")
        offsets = [r.offset for r in got]
        assert offsets == list(range(len(got))), "offsets not contiguous"
        by_offset = {r.offset: r.value for r in got}
        for offset, value in acked.items():
            assert by_offset.get(offset) == value, f"acked record at {offset} lost or changed"
    assert acked, "the writer never got an acknowledgement"
    async with await WireClient.connect(broker.host, broker.port) as c:
        assert (await produce(c, "crash", 0, batch([b"after"]))).error_code == ErrorCode.NONE
