"""ControllerState replay rules, election rules and the no-op-aware PartitionChangeBuilder."""

from __future__ import annotations

import pytest

from controller.election import new_partition_leadership, offline_leader
from controller.partition_change import Election, PartitionChangeBuilder
from controller.state import ControllerState
from protocol.metadata.image import MetadataReplayError, PartitionRegistration
from protocol.metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    NoOpRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)

A = "AAAAAAAAAAAAAAAAAAAAAg"
B = "AAAAAAAAAAAAAAAAAAAAAw"


def test_replay_skips_what_was_applied_and_refuses_gaps() -> None:
    state = ControllerState()
    assert (state.last_applied_offset, state.next_offset) == (-1, 0)
    assert state.replay([(0, NoOpRecord()), (1, NoOpRecord())]) == 2
    assert state.replay([(1, NoOpRecord()), (2, NoOpRecord())]) == 1
    assert state.last_applied_offset == 2
    with pytest.raises(MetadataReplayError, match="offset 5 replayed after offset 2"):
        state.replay([(5, NoOpRecord())])
    assert state.replay_appended([NoOpRecord()], 3) == 1


def test_replay_is_all_or_nothing() -> None:
    state = ControllerState()
    before = state.image
    with pytest.raises(MetadataReplayError, match="offset 1"):
        state.replay([(0, TopicRecord(name="t", topic_id=A)), (1, RemoveTopicRecord(topic_id=B))])
    assert state.image is before and state.topic("t") is None


def test_collision_index_follows_topics() -> None:
    state = ControllerState()
    state.replay([(0, TopicRecord(name="a.b", topic_id=A))])
    assert state.colliding_topic("a_b") == "a.b"
    assert state.colliding_topic("a.b") is None  # itself
    assert state.colliding_topic("ab") is None
    state.replay([(1, RemoveTopicRecord(topic_id=A))])
    assert state.colliding_topic("a_b") is None
    state.replay([(2, TopicRecord(name="x_y", topic_id=B))])
    rebuilt = ControllerState(state.image)
    assert rebuilt.colliding_topic("x.y") == "x_y"


@pytest.mark.parametrize(
    ("replicas", "live", "leader", "isr"),
    [
        ((1, 2, 3), {1, 2, 3}, 1, (1, 2, 3)),
        ((3, 1, 2), {1, 2}, 1, (1, 2)),
        ((3, 2, 1), {1, 2}, 2, (2, 1)),
        ((3,), set(), NO_LEADER, ()),
    ],
)
def test_new_partition_leadership(
    replicas: tuple[int, ...], live: set[int], leader: int, isr: tuple[int, ...]
) -> None:
    got = new_partition_leadership(replicas, live.__contains__)
    assert (got.leader, got.isr) == (leader, isr)


@pytest.mark.parametrize(
    ("replicas", "isr", "live", "unclean", "leader"),
    [
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, False, 1),
        ((1, 2, 3), (2, 3), {1, 2, 3}, False, 2),
        ((1, 2, 3), (3, 2), {1, 2, 3}, False, 2),
        ((1, 2, 3), (1,), {2, 3}, False, NO_LEADER),
        ((1, 2, 3), (1,), {2, 3}, True, 2),
        ((1, 2, 3), (), set(), True, NO_LEADER),
    ],
)
def test_offline_leader(
    replicas: tuple[int, ...], isr: tuple[int, ...], live: set[int], unclean: bool, leader: int
) -> None:
    assert offline_leader(replicas, isr, live.__contains__, unclean_allowed=unclean) == leader


def reg(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=replicas, isr=isr, leader=leader, leader_epoch=3, partition_epoch=7
    )


def build(
    partition: PartitionRegistration,
    live: set[int],
    *,
    isr: tuple[int, ...] | None = None,
    replicas: tuple[int, ...] | None = None,
    election: Election = Election.ONLINE,
) -> tuple[int, tuple[int, ...] | None, tuple[int, ...] | None] | None:
    builder = PartitionChangeBuilder(partition, A, 0, live.__contains__).set_election(election)
    if isr is not None:
        builder.set_target_isr(isr)
    if replicas is not None:
        builder.set_target_replicas(replicas)
    record = builder.build()
    if record is None:
        return None
    assert record.topic_id == A and record.partition_id == 0
    return record.leader, record.isr, record.replicas


@pytest.mark.parametrize(
    ("partition", "live", "kwargs", "expected"),
    [
        # Nothing changes: no record.
        (reg((1, 2, 3), (1, 2, 3), 1), {1, 2, 3}, {}, None),
        (reg((1, 2, 3), (1, 2, 3), 1), {1, 2, 3}, {"isr": (1, 2, 3)}, None),
        (reg((1, 2, 3), (1, 2, 3), 2), {1, 2, 3}, {}, None),
        # ISR shrink keeps the leader, naming it to bump the leader epoch (ZK-mode brokers
        # skip a LeaderAndIsr whose leader epoch is not newer).
        (reg((1, 2, 3), (1, 2, 3), 1), {1, 2, 3}, {"isr": (1, 2)}, (1, (1, 2), None)),
        # ISR expansion does not bump the leader epoch.
        (
            reg((1, 2, 3), (1, 2), 1),
            {1, 2, 3},
            {"isr": (1, 2, 3)},
            (NO_LEADER_CHANGE, (1, 2, 3), None),
        ),
        # Leader leaves the ISR: next in assignment order.
        (reg((1, 2, 3), (1, 2, 3), 1), {2, 3}, {"isr": (2, 3)}, (2, (2, 3), None)),
        # Last ISR member goes: ISR stays with it, no leader.
        (reg((1, 2, 3), (1,), 1), {2, 3}, {"isr": ()}, (NO_LEADER, None, None)),
        # Unclean election picks a live out-of-sync replica and resets the ISR.
        (reg((1, 2, 3), (1,), NO_LEADER), {2, 3}, {"election": Election.UNCLEAN}, (2, (2,), None)),
        (reg((1, 2, 3), (1,), NO_LEADER), {2, 3}, {}, None),
        # Preferred election.
        (
            reg((1, 2, 3), (1, 2, 3), 2),
            {1, 2, 3},
            {"election": Election.PREFERRED},
            (1, None, None),
        ),
        (reg((1, 2, 3), (2, 3), 2), {1, 2, 3}, {"election": Election.PREFERRED}, None),
        # Reassignment away from the leader.
        (
            reg((1, 2, 3), (1, 2, 3), 1),
            {1, 2, 3, 4},
            {"replicas": (2, 3, 4), "isr": (1, 2, 3)},
            (2, (2, 3), (2, 3, 4)),
        ),
    ],
)
def test_partition_change_builder(
    partition: PartitionRegistration, live: set[int], kwargs: dict, expected: tuple | None
) -> None:
    assert build(partition, live, **kwargs) == expected


def test_built_record_merges_with_epochs() -> None:
    partition = reg((1, 2, 3), (1, 2, 3), 1)
    record = (
        PartitionChangeBuilder(partition, A, 0, {2, 3}.__contains__).set_target_isr((2, 3)).build()
    )
    assert record is not None
    merged = partition.merge(record)
    assert (merged.leader, merged.isr, merged.leader_epoch, merged.partition_epoch) == (
        2,
        (2, 3),
        4,
        8,
    )
    assert PartitionRecord(partition_id=0, topic_id=A, replicas=(1,), isr=(1,), leader=1)
