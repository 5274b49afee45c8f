"""The offsets partition loader on what a compacted `__consumer_offsets` partition can hold
(Kafka's GroupMetadataManager.doLoadGroupsAndOffsets), and records it must skip without
stopping the load."""

from __future__ import annotations

import msgpack

from broker.group.coordinator import GroupCoordinatorCore
from broker.group.effects import GroupConfig
from broker.group.group import GroupState
from broker.group.hashing import partition_for
from broker.group.loader import PartitionLoader
from broker.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    encode_key,
    encode_value,
)
from protocol.names import TopicPartition

PARTITIONS = 4
MEMBER = MemberValue("m1", "client", "/127.0.0.1", 10_000, 3_000, b"sub", b"assigned")
STABLE = GroupValue("consumer", 7, "range", "m1", 1_000, (MEMBER,))
EMPTY = GroupValue("consumer", 8, None, None, 2_000)


def groups_in(partition: int, n: int) -> list[str]:
    out = [g for g in (f"g{i}" for i in range(200)) if partition_for(g, PARTITIONS) == partition]
    return out[:n]


def offset(group: str, p: int, value: int | None) -> tuple[bytes, bytes | None]:
    v = None if value is None else OffsetValue(value, 3, "meta", 1_000)
    return encode_key(OffsetKey(group, "t", p)), encode_value(v)


def group(group_id: str, value: GroupValue | None) -> tuple[bytes, bytes | None]:
    return encode_key(GroupKey(group_id)), encode_value(value)


def load(records: list[tuple[bytes | None, bytes | None]]) -> tuple[GroupCoordinatorCore, list]:
    """A core owning partition 0 after loading `records`, and the problems reported."""
    problems: list[str] = []
    core = GroupCoordinatorCore(GroupConfig(num_partitions=PARTITIONS))
    loader = PartitionLoader(problems.append, owns_group=lambda g: core.partition_of(g) == 0)
    loader.feed(records)
    assert core.begin_load(0, 1) is not None
    assert core.complete_load(0, 1, loader.result(), now_ms=5_000)
    return core, problems


def test_compacted_layouts_load_as_kafka() -> None:
    revived, late_meta, offsets_only, dead = groups_in(0, 4)
    core, problems = load(
        [
            # A group deleted (offset and group tombstones), then used again for offsets only.
            offset(revived, 0, 10),
            offset(revived, 0, None),
            group(revived, EMPTY),
            group(revived, None),
            offset(revived, 1, 11),
            # Offsets first, the group's metadata after them (the cleaner keeps only the latest
            # record per key, in offset order).
            offset(late_meta, 0, 20),
            group(late_meta, STABLE),
            # No metadata record at all.
            offset(offsets_only, 2, 30),
            # Everything deleted: nothing of it is loaded.
            offset(dead, 0, 40),
            group(dead, STABLE),
            offset(dead, 0, None),
            group(dead, None),
        ]
    )
    assert problems == []
    assert set(core.groups) == {revived, late_meta, offsets_only}
    g = core.groups[revived]
    assert g.state == GroupState.EMPTY and g.generation == 0
    assert g.offsets == {TopicPartition("t", 1): OffsetValue(11, 3, "meta", 1_000)}
    g = core.groups[late_meta]
    assert (g.state, g.generation, g.leader, list(g.members)) == (
        GroupState.STABLE,
        7,
        "m1",
        ["m1"],
    )
    assert g.offsets[TopicPartition("t", 0)].offset == 20
    assert core.groups[offsets_only].state == GroupState.EMPTY
    assert core.groups[offsets_only].offsets[TopicPartition("t", 2)].offset == 30


def test_bad_records_are_reported_and_skipped() -> None:
    (good,) = groups_in(0, 1)
    (foreign,) = groups_in(1, 1)
    bad_member = [0, "consumer", 1, "range", "m1", 0, [["m1", "c", "h", 1, 1, 10**12, b""]]]
    core, problems = load(
        [
            (None, b"x"),  # no key
            (b"\xc1", None),  # not msgpack
            (msgpack.packb([9, good]), None),  # unknown key version
            (encode_key(OffsetKey(good, "t", 0)), msgpack.packb([5, 1, 2, None, 3])),
            (encode_key(OffsetKey(good, "t", 0)), msgpack.packb([0, "1", 2, None, 3])),
            (encode_key(GroupKey(good)), msgpack.packb(bad_member)),  # no 1 TB bytes()
            (encode_key(GroupKey(good)), msgpack.packb([0, 1, 2, 3])),
            offset(foreign, 0, 1),
            offset(foreign, 1, 2),  # reported once per group
            group(foreign, STABLE),
            offset(good, 0, 99),  # the load goes on
            group(good, STABLE),
        ]
    )
    assert len(problems) == 8, problems
    assert any(repr(foreign) in p and "another offsets partition" in p for p in problems)
    assert set(core.groups) == {good}
    assert core.groups[good].offsets[TopicPartition("t", 0)].offset == 99
    assert core.groups[good].generation == 7
