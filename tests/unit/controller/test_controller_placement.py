"""Replica placement tables: Kafka's AdminUtils vectors, balance, racks, determinism."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from controller.placement import assign_replicas, rack_alternated_brokers
from protocol.errors import ErrorCode, KafkaError


def test_rack_unaware_matches_kafka() -> None:
    # AdminUtilsTest.testReplicaAssignment: brokers 0-4, 10 partitions, RF 3, start index 0.
    expected = [
        (0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1),
        (0, 2, 3), (1, 3, 4), (2, 4, 0), (3, 0, 1), (4, 1, 2),
    ]  # fmt: skip
    brokers = dict.fromkeys(range(5))
    assert assign_replicas(brokers, 10, 3, random.Random(0), fixed_start_index=0) == expected


RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_list_matches_kafka() -> None:
    assert rack_alternated_brokers(RACKS) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_matches_kafka() -> None:
    expected = [(0, 3, 1), (3, 1, 5), (1, 5, 4), (5, 4, 2), (4, 2, 0), (2, 0, 3), (0, 4, 2)]
    assert assign_replicas(RACKS, 7, 3, random.Random(0), fixed_start_index=0) == expected


@pytest.mark.parametrize(
    ("racks", "partitions", "rf"),
    [
        ({0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}, 12, 3),
        ({0: "a", 1: "b", 2: "c"}, 9, 3),
        ({0: "a", 1: "a", 2: "a", 3: "b"}, 8, 2),
        ({i: f"r{i % 4}" for i in range(12)}, 48, 3),
    ],
)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_racks_spread(racks: dict[int, str], partitions: int, rf: int, seed: int) -> None:
    num_racks = len(set(racks.values()))
    for replicas in assign_replicas(racks, partitions, rf, random.Random(seed)):
        assert len(set(replicas)) == rf
        assert len({racks[b] for b in replicas}) == min(rf, num_racks)


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf"),
    [
        (dict.fromkeys(range(3)), 6, 3),
        (dict.fromkeys(range(5)), 50, 2),
        ({i: f"r{i % 2}" for i in range(4)}, 40, 3),
        ({i: f"r{i % 3}" for i in range(9)}, 90, 3),
    ],
)
@pytest.mark.parametrize("seed", [11, 12])
def test_leaders_and_replicas_are_balanced(
    brokers: dict[int, str | None], partitions: int, rf: int, seed: int
) -> None:
    placement = assign_replicas(brokers, partitions, rf, random.Random(seed))
    assert len(placement) == partitions
    leaders = Counter(r[0] for r in placement)
    replicas = Counter(b for r in placement for b in r)
    n = len(brokers)
    assert set(leaders) == set(brokers)
    assert max(leaders.values()) - min(leaders.values()) <= (0 if partitions % n == 0 else 1)
    assert max(replicas.values()) - min(replicas.values()) <= 1


def test_deterministic_with_seeded_random() -> None:
    brokers = {i: f"r{i % 3}" for i in range(6)}
    first = assign_replicas(brokers, 20, 3, random.Random(42))
    assert first == assign_replicas(brokers, 20, 3, random.Random(42))
    others = {tuple(assign_replicas(brokers, 20, 3, random.Random(s))) for s in range(10)}
    assert len(others) > 1  # the start index and shift really are random


def test_single_broker() -> None:
    assert assign_replicas({1: None}, 3, 1, random.Random(0)) == [(1,), (1,), (1,)]


def test_brokers_without_rack_form_their_own_group() -> None:
    brokers = {0: "a", 1: "a", 2: None, 3: None}
    for replicas in assign_replicas(brokers, 8, 2, random.Random(5)):
        assert {brokers[b] for b in replicas} == {"a", None}


def test_start_partition_id_continues_the_stripe() -> None:
    brokers = dict.fromkeys(range(4))
    whole = assign_replicas(brokers, 8, 2, random.Random(0), fixed_start_index=1)
    tail = assign_replicas(
        brokers, 4, 2, random.Random(0), fixed_start_index=1, start_partition_id=4
    )
    assert whole[4:] == tail


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "code", "needle"),
    [
        ({1: None}, 0, 1, ErrorCode.INVALID_PARTITIONS, "larger than 0"),
        ({1: None}, 1, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "larger than 0"),
        ({1: None}, 1, 3, ErrorCode.INVALID_REPLICATION_FACTOR, "factor of 3 cannot be reached"),
        ({}, 1, 1, ErrorCode.INVALID_REPLICATION_FACTOR, "only 0 broker(s)"),
    ],
)
def test_impossible_placements(
    brokers: dict[int, str | None], partitions: int, rf: int, code: ErrorCode, needle: str
) -> None:
    with pytest.raises(KafkaError) as info:
        assign_replicas(brokers, partitions, rf, random.Random(0))
    assert info.value.code == code
    assert needle in info.value.message
