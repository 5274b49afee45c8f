"""Full disk (small tmpfs): the log dir goes offline and the broker halts; 20,000 partitions
under RLIMIT_NOFILE=1024."""

from __future__ import annotations

import os
import resource
import subprocess
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.produce import ProducePartition, ProduceRequest, ProduceTopic
from tests.integration.broker.broker_wire import create_topic, fetch, produce
from tests.support.wire import WireClient, batch, records_of


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a 4 MiB tmpfs (needs root): {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


async def test_a_full_disk_takes_the_log_dir_offline_and_the_broker_halts(
    broker_factory, small_tmpfs
) -> None:
    """Kafka's behaviour: the failed append answers KAFKA_STORAGE_ERROR, the log dir goes
    offline, and a broker whose only log dir failed halts (naming the dir and the cause)
    instead of serving with an ENOSPC per append. Recovery, as docs/operations.md says: free
    space, restart; everything acknowledged is there."""
    broker = broker_factory(log_dirs=[small_tmpfs / "data"])
    async with await WireClient.connect(broker.host, broker.port) as c:
        await create_topic(c, "fill", configs={"segment.bytes": "1048576"})
        await create_topic(c, "spare", configs={"segment.bytes": "1048576"})
        assert (await produce(c, "spare", 0, batch([b"keep"]), acks=-1)).error_code == 0
        # Space an operator can free later.
        ballast = small_tmpfs / "ballast"
        ballast.write_bytes(b"\0" * (1 << 20))
        chunk = batch([os.urandom(60_000)])
        acknowledged = 0
        r = None
        for _ in range(200):
            try:
                r = await produce(c, "fill", 0, chunk, acks=-1)
            except Exception:  # the broker halted while answering
                break
            if r.error_code:
                break
            acknowledged += 1
        assert r is not None and r.error_code in (0, ErrorCode.KAFKA_STORAGE_ERROR), r
    assert await broker.await_exit(within=30) == 1
    failed = broker.wait_for_event("log dir failed")
    assert failed["log_dir"] == str(small_tmpfs / "data") and "ENOSPC" in failed["reason"]
    assert broker.wait_for_event("shutting down: every log dir has failed")
    ballast.unlink()
    await broker.astart()
    async with await WireClient.connect(broker.host, broker.port) as c:
        f = await fetch(c, "spare", 0, 0)
        assert [x.value for x in records_of(f.records)] == [b"keep"]
        f = await fetch(c, "fill", 0, 0, max_bytes=1 << 24)
        assert f.high_watermark >= acknowledged
        assert (await produce(c, "fill", 0, batch([b"again"]))).error_code == 0


async def test_20000_partitions_under_1024_fds(broker_factory) -> None:
    def limit_fds() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))

    n = 20_000
    broker = broker_factory(
        {"trioka.max.open.files": 256, "log.segment.bytes": 1048576},
        preexec_fn=limit_fds,
        timeout=120,
    )
    async with await WireClient.connect(broker.host, broker.port) as c:
        await create_topic(c, "wide", partitions=n)
        step = 1000
        for start in range(0, n, step):
            resp = await c.request(
                ProduceRequest(
                    acks=1,
                    timeout_ms=30000,
                    topics=(
                        ProduceTopic(
                            name="wide",
                            partitions=tuple(
                                ProducePartition(index=p, records=batch([b"p%d" % p]))
                                for p in range(start, start + step)
                            ),
                        ),
                    ),
                )
            )
            errors = [p for p in resp.topics[0].partitions if p.error_code]
            assert not errors, errors[:3]
        for start in range(0, n, step):
            resp = await c.request(
                FetchRequest(
                    max_wait_ms=0,
                    min_bytes=0,
                    topics=(
                        FetchTopic(
                            name="wide",
                            partitions=tuple(
                                FetchPartition(index=p, fetch_offset=0)
                                for p in range(start, start + step)
                            ),
                        ),
                    ),
                )
            )
            for part in resp.topics[0].partitions:
                assert part.error_code == 0, part
                assert [r.value for r in records_of(part.records)] == [b"p%d" % part.index]
    assert broker.running
