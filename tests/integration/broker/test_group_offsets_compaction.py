"""`__consumer_offsets` stays bounded (issue 5): the broker's log cleaner compacts a group's
offsets partition while the group commits, and a coordinator that loads the compacted partition
(gaps, removed batches) after a SIGKILL serves exactly the last commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.group.hashing import OFFSETS_TOPIC, partition_for
from protocol.errors import ErrorCode
from tests.integration.broker.broker_wire import create_topic
from tests.integration.group_wire import commit, fetch_offsets, find_coordinator
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

SEGMENT_BYTES = 16 * 1024
OVERRIDES = {
    "offsets.topic.num.partitions": 2,
    "offsets.topic.segment.bytes": SEGMENT_BYTES,
    "log.cleaner.backoff.ms": 100,
    "group.initial.rebalance.delay.ms": 0,
}
GROUP = "committer"
PARTITIONS = 3
ROUNDS = 500
PHASES = 6


def offsets_log_bytes(log_dir: Path) -> int:
    part = log_dir / f"{OFFSETS_TOPIC}-{partition_for(GROUP, 2)}"
    return sum(f.stat().st_size for f in part.glob("*.log"))


async def test_a_committing_group_keeps_its_offsets_partition_bounded(
    broker_factory: Any,
) -> None:
    proc = broker_factory(OVERRIDES)
    await find_coordinator(proc.host, proc.port, GROUP)
    async with await WireClient.connect(proc.host, proc.port) as c:
        await create_topic(c, "events", partitions=PARTITIONS)

        async def loaded() -> bool:
            code, _ = await fetch_offsets(c, GROUP, "events", [0])
            assert code in (0, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), code
            return code == 0

        await wait_until(loaded, within=15, every=0.1)
        # Phases of commits, each followed by the cleaner catching up: the partition's size
        # stays under the bound while what was written grows phase after phase.
        bound = 3 * SEGMENT_BYTES  # the active segment, a cleaned one, a rolled dirty one
        written = 0
        n = 0
        for _ in range(PHASES):
            before = offsets_log_bytes(proc.log_dir)
            for _ in range(ROUNDS):
                n += 1
                offsets = {p: n * 10 + p for p in range(PARTITIONS)}
                answer = await commit(c, GROUP, -1, "", "events", offsets)
                assert answer == dict.fromkeys(offsets, 0)
            written += offsets_log_bytes(proc.log_dir) - before
            await wait_until(lambda: offsets_log_bytes(proc.log_dir) <= bound, within=30, every=0.1)
        assert written > 10 * bound, f"only {written} bytes written: the test proves nothing"
        code, last = await fetch_offsets(c, GROUP, "events", list(range(PARTITIONS)))
        assert code == 0 and last == {p: n * 10 + p for p in range(PARTITIONS)}

    # The compacted partition (gaps where the cleaner removed batches) loads back exactly.
    await proc.akill()
    await proc.astart()
    async with await WireClient.connect(proc.host, proc.port) as c:
        await wait_until(loaded_after_restart(c), within=20, every=0.1)
        code, again = await fetch_offsets(c, GROUP, "events", list(range(PARTITIONS)))
        assert code == 0 and again == last


def loaded_after_restart(c: WireClient) -> Any:
    async def loaded() -> bool:
        code, _ = await fetch_offsets(c, GROUP, "events", [0])
        assert code in (0, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_COORDINATOR), code
        return code == 0

    return loaded
