from __future__ import annotations

import random
from collections import Counter

import pytest

from client.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive

# Kafka's UtilsTest.testMurmur2 (clients/src/test/java/org/apache/kafka/common/utils).
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize(("data", "expected"), KAFKA_VECTORS)
def test_murmur2_matches_kafka(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_is_a_signed_32_bit_int_for_every_tail_length() -> None:
    for n in range(0, 17):
        h = murmur2(bytes(range(n)))
        assert -(2**31) <= h < 2**31


def test_to_positive_clears_the_sign_bit_like_kafka() -> None:
    assert to_positive(-(2**31)) == 0  # abs() would overflow in Java; Kafka masks
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(5) == 5


def test_partition_for_key() -> None:
    assert partition_for_key(b"foobar", 7) == to_positive(-790332482) % 7
    keys = [f"key-{i}".encode() for i in range(2000)]
    counts = Counter(partition_for_key(k, 4) for k in keys)
    assert set(counts) == {0, 1, 2, 3}
    assert all(partition_for_key(k, 4) == partition_for_key(k, 4) for k in keys[:50])


def test_sticky_partitioner_sticks_until_batch_size_then_switches() -> None:
    sticky = StickyPartitioner(100, rng=random.Random(1))
    first = sticky.partition("t", 4)
    for _ in range(9):
        assert sticky.partition("t", 4) == first
        sticky.on_append("t", first, 10, 4)
    assert sticky.partition("t", 4) == first
    sticky.on_append("t", first, 10, 4)  # 100 bytes: switch
    second = sticky.partition("t", 4)
    assert second != first


def test_sticky_partitioner_only_picks_available_partitions() -> None:
    sticky = StickyPartitioner(1, available=lambda topic: (1, 4), rng=random.Random(2))
    seen = set()
    for _ in range(50):
        p = sticky.partition("t", 6)
        seen.add(p)
        sticky.on_append("t", p, 1, 6)
    assert seen == {1, 4}


def test_adaptive_sticky_partitioner_favours_short_queues() -> None:
    queues = {0: 0, 1: 10, 2: 10}
    sticky = StickyPartitioner(1, queue_size=lambda topic, p: queues[p], rng=random.Random(3))
    picks: Counter[int] = Counter()
    for _ in range(600):
        p = sticky.partition("t", 3)
        picks[p] += 1
        sticky.on_append("t", p, 1, 3)
    assert picks[0] > picks[1] and picks[0] > picks[2]


def test_partitioners_are_independent_per_topic() -> None:
    sticky = StickyPartitioner(10, rng=random.Random(4))
    a = sticky.partition("a", 100)
    sticky.on_append("b", a, 1000, 100)
    assert sticky.partition("a", 100) == a
