"""Replica placement: Kafka's striped, rack-aware assignment (AdminUtils.assignReplicasToBrokers).

Partition p's first replica (its preferred leader) is broker `(p + start) % n` of the broker
list, so leaders are spread evenly; the other replicas follow at a shift that grows by one each
time the partition number wraps around the list, so the followers of one broker's leaders are
spread too. With racks, the list alternates racks (r1, r2, r3, r1, ...) and a replica is only
put on a rack, or a broker, that already has one when every rack, or broker, has one. The start
index and the initial shift are random (an injected Random), so several topics do not all put
their leaders on the same broker.

A broker without a rack counts as its own rack group ("no rack"), as KRaft's striped placer
treats brokers without `broker.rack`; when no broker has a rack this is the plain striped
assignment.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from protocol.errors import ErrorCode, KafkaError

Assignment = tuple[int, ...]


def _rack_key(rack: str | None) -> tuple[bool, str]:
    return (rack is not None, rack or "")


def rack_alternated_brokers(brokers: Mapping[int, str | None]) -> list[int]:
    """Brokers ordered so that consecutive ones sit on different racks, as Kafka's
    getRackAlternatedBrokerList: one broker of each rack (racks sorted, brokers sorted within a
    rack) in turn."""
    by_rack: dict[str | None, list[int]] = {}
    for broker_id in sorted(brokers):
        by_rack.setdefault(brokers[broker_id], []).append(broker_id)
    racks = sorted(by_rack, key=_rack_key)
    iterators = [iter(by_rack[r]) for r in racks]
    result: list[int] = []
    index = 0
    while len(result) < len(brokers):
        broker = next(iterators[index], None)
        if broker is not None:
            result.append(broker)
        index = (index + 1) % len(iterators)
    return result


def _replica_index(first: int, shift: int, replica: int, n: int) -> int:
    return (first + 1 + (shift + replica) % (n - 1)) % n


def check_placement(num_partitions: int, replication_factor: int, num_brokers: int) -> None:
    """Raise KafkaError INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR for an impossible
    placement; the replication-factor message names both numbers."""
    if num_partitions <= 0:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS,
            f"Number of partitions must be larger than 0, got {num_partitions}.",
        )
    if replication_factor <= 0:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor must be larger than 0, got {replication_factor}.",
        )
    if replication_factor > num_brokers:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{num_brokers} broker(s) are registered.",
        )


def assign_replicas(
    brokers: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    rng: random.Random,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
) -> list[Assignment]:
    """Replicas for partitions `max(0, start_partition_id)` onwards, preferred leader first.

    `brokers` maps each usable broker id to its rack (None when it has none). Raises KafkaError
    (INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR) when the placement is impossible.
    """
    check_placement(num_partitions, replication_factor, len(brokers))
    if any(rack is not None for rack in brokers.values()):
        arranged = rack_alternated_brokers(brokers)
        racks = [brokers[b] for b in arranged]
        num_racks = len(set(racks))
    else:
        arranged = sorted(brokers)
        racks = [None] * len(arranged)
        num_racks = 1
    n = len(arranged)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition_id = max(0, start_partition_id)
    result: list[Assignment] = []
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % n == 0:
            shift += 1
        first = (partition_id + start_index) % n
        replicas = [arranged[first]]
        used_racks = {racks[first]}
        used_brokers = {arranged[first]}
        k = 0
        while len(replicas) < replication_factor:
            index = _replica_index(first, shift * num_racks, k, n)
            broker, rack = arranged[index], racks[index]
            k += 1
            if (rack not in used_racks or len(used_racks) == num_racks) and (
                broker not in used_brokers or len(used_brokers) == n
            ):
                replicas.append(broker)
                used_racks.add(rack)
                used_brokers.add(broker)
        result.append(tuple(replicas))
        partition_id += 1
    return result
