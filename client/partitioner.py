"""Kafka's partitioners: murmur2 for keyed records, sticky (KIP-480/KIP-794) for the rest.

`murmur2` is org.apache.kafka.common.utils.Utils.murmur2 bit for bit (32-bit signed result),
so a key lands on the same partition as it would with a Java producer.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2: a signed 32-bit hash of `data`."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    length4 = length & ~3
    for i in range(0, length4, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[length4 + 2] << 16
    if rest >= 2:
        h ^= data[length4 + 1] << 8
    if rest >= 1:
        h ^= data[length4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's Utils.toPositive: clear the sign bit (not abs(), which fails on MIN_VALUE)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """Kafka's BuiltInPartitioner.partitionForKey."""
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Partitions for records without a key (Kafka's BuiltInPartitioner, KIP-794).

    Every record of a topic goes to one partition until `batch_size` bytes have been produced
    to it; then another is picked at random among the partitions with a leader (`available`).
    With adaptive partitioning, partitions whose queues are shorter (a faster broker) are
    picked more often: each partition's weight is `max_queue + 1 - its_queue`, as in Kafka.
    `available(topic)` and `queue_size(topic, partition)` are only called when picking, so
    the per-record calls allocate nothing.
    """

    __slots__ = ("_adaptive", "_available", "_batch_size", "_queue_size", "_random", "_state")

    def __init__(
        self,
        batch_size: int,
        *,
        adaptive: bool = True,
        available: Callable[[str], Sequence[int]] | None = None,
        queue_size: Callable[[str, int], int] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._batch_size = max(batch_size, 1)
        self._adaptive = adaptive
        self._available = available
        self._queue_size = queue_size
        self._random = rng or random.Random()
        # topic -> [current partition, bytes produced to it since it was picked]
        self._state: dict[str, list[int]] = {}

    def partition(self, topic: str, num_partitions: int) -> int:
        """The sticky partition for `topic`."""
        state = self._state.get(topic)
        if state is not None and state[0] < num_partitions:
            return state[0]
        chosen = self._pick(topic, num_partitions, -1)
        self._state[topic] = [chosen, 0]
        return chosen

    def on_append(self, topic: str, partition: int, size: int, num_partitions: int) -> None:
        """Count `size` bytes produced to `partition`; switch once batch.size is reached."""
        state = self._state.get(topic)
        if state is None or state[0] != partition:
            return
        state[1] += size
        if state[1] >= self._batch_size:
            state[0] = self._pick(topic, num_partitions, partition)
            state[1] = 0

    def _pick(self, topic: str, num_partitions: int, current: int) -> int:
        available = self._available(topic) if self._available is not None else ()
        candidates = [p for p in available if p < num_partitions] or list(range(num_partitions))
        if len(candidates) > 1 and current in candidates:
            candidates.remove(current)
        if len(candidates) == 1:
            return candidates[0]
        if self._adaptive and self._queue_size is not None:
            sizes = [self._queue_size(topic, p) for p in candidates]
            top = max(sizes)
            if top > min(sizes):
                weights = [top + 1 - s for s in sizes]
                return self._random.choices(candidates, weights=weights)[0]
        return self._random.choice(candidates)
