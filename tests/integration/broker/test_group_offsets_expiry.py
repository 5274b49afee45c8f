"""`__consumer_offsets` expiry and compaction on one real combined broker: offsets that expired
(offsets.retention.minutes, shortened by the test-only `trioka.offsets.retention.ms`) and a
deleted group (Empty, all its offsets expired: a group tombstone) leave tombstones, the
cleaner removes them with the values they delete (delete.retention.ms 0 here), and after a
SIGKILL the reloaded coordinator knows nothing of them while a live group keeps its offsets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.group.hashing import OFFSETS_TOPIC
from broker.group.records import decode_key
from protocol.messages.groups import (
    DescribeGroupsRequest,
    LeaveGroupMember,
    LeaveGroupRequest,
    ListGroupsRequest,
)
from protocol.record_batch import decode_records, iter_batches
from tests.integration.broker.broker_wire import create_topic
from tests.integration.group_wire import (
    commit,
    fetch_offsets,
    find_coordinator,
    join,
    new_member_id,
    sync,
)
from tests.support.broker_process import BrokerProcess
from tests.support.waiting import wait_until
from tests.support.wire import WireClient

BROKER = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "offsets.topic.segment.bytes": 2048,
    "group.min.session.timeout.ms": 2000,
    "group.initial.rebalance.delay.ms": 0,
    "trioka.offsets.retention.ms": 1500,
    "offsets.retention.check.interval.ms": 300,
    "log.cleaner.backoff.ms": 100,
    "log.cleaner.delete.retention.ms": 0,
    "log.cleaner.min.cleanable.ratio": 0.1,
    "log.flush.scheduler.interval.ms": 100,
}
GONE = ("gone-offsets", "gone-group")
KEPT = "kept"


def groups_on_disk(proc: BrokerProcess) -> dict[str, int]:
    """Records (values and tombstones) per group in the offsets partition's segment files."""
    counts: dict[str, int] = {}
    for seg in sorted((Path(proc.log_dirs[0]) / f"{OFFSETS_TOPIC}-0").glob("*.log")):
        data = seg.read_bytes()
        for pos, _h in iter_batches(data):
            for r in decode_records(data, pos):
                assert r.key is not None
                group = decode_key(r.key).group_id
                counts[group] = counts.get(group, 0) + 1
    return counts


async def make_gone_groups(c: WireClient) -> None:
    # An offsets-only group (generation -1): each offset expires on its own.
    assert await commit(c, "gone-offsets", -1, "", "events", {0: 5, 1: 6}) == {0: 0, 1: 0}
    # A consumer group that commits then goes Empty: offsets expire together, then a group
    # tombstone follows.
    member = await new_member_id(c, "gone-group")
    joined = await join(c, "gone-group", member)
    assert joined.error_code == 0, joined
    gen = joined.generation_id
    assert (await sync(c, "gone-group", gen, member, {member: b""})).error_code == 0
    assert await commit(c, "gone-group", gen, member, "events", {0: 7}) == {0: 0}
    left = await c.request(
        LeaveGroupRequest(group_id="gone-group", members=(LeaveGroupMember(member_id=member),))
    )
    assert left.error_code == 0, left


async def test_expired_offsets_and_deleted_groups_leave_the_log(broker_factory: Any) -> None:
    proc = broker_factory(BROKER)
    await find_coordinator(proc.host, proc.port, KEPT)
    last_kept = 0
    async with await WireClient.connect(proc.host, proc.port) as c:
        await create_topic(c, "events", partitions=2)

        async def served() -> bool:
            return (await fetch_offsets(c, KEPT, "events", [0]))[0] == 0

        await wait_until(served, within=30, every=0.1)
        await make_gone_groups(c)
        assert set(GONE) <= set(groups_on_disk(proc))

        # A live offsets-only group commits on (its offsets never get 1.5 s old): the log
        # rolls, the tombstones' segments become cleanable.
        async def gone_from_disk() -> bool:
            nonlocal last_kept
            last_kept += 1
            assert await commit(c, KEPT, -1, "", "events", {0: last_kept, 1: 1000 + last_kept}) == {
                0: 0,
                1: 0,
            }
            return not set(GONE) & set(groups_on_disk(proc))

        await wait_until(gone_from_disk, within=60, every=0.05)
        for group in GONE:
            assert (await fetch_offsets(c, group, "events", [0, 1])) == (0, {0: -1, 1: -1})

    await proc.akill()
    await proc.astart()
    async with await WireClient.connect(proc.host, proc.port) as c:

        async def served_again() -> bool:
            return (await fetch_offsets(c, KEPT, "events", [0]))[0] == 0

        await wait_until(served_again, within=30, every=0.1)
        assert await fetch_offsets(c, KEPT, "events", [0, 1]) == (
            0,
            {0: last_kept, 1: 1000 + last_kept},
        )
        for group in GONE:
            assert (await fetch_offsets(c, group, "events", [0, 1])) == (0, {0: -1, 1: -1})
        described = (await c.request(DescribeGroupsRequest(groups=GONE))).groups
        assert [(g.group_id, g.group_state) for g in described] == [(g, "Dead") for g in GONE]
        listed = (await c.request(ListGroupsRequest())).groups
        assert [g.group_id for g in listed] == [KEPT]
