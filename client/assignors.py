"""Client-side partition assignors (Kafka's RangeAssignor and RoundRobinAssignor), run by the
group leader. Pure functions of the members' subscriptions and the partition counts.

`partition.assignment.strategy` names them in preference order; the coordinator picks the first
one every member supports and the leader runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from client.consumer_protocol import Subscription
from protocol.names import TopicPartition

__all__ = [
    "ASSIGNORS",
    "PartitionAssignor",
    "RangeAssignor",
    "RoundRobinAssignor",
    "assignor_for",
]

Assignments = dict[str, list[TopicPartition]]


class PartitionAssignor(Protocol):
    name: str

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> Assignments:
        """member id -> its partitions. Topics missing from `partitions_per_topic` (unknown
        to the cluster) are skipped, as Kafka's."""
        ...


class RangeAssignor:
    """Per topic, the members subscribed to it (sorted by member id) each take a contiguous
    range; the first `partitions % members` take one extra (Kafka's RangeAssignor)."""

    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> Assignments:
        out: Assignments = {member: [] for member in subscriptions}
        for topic, members in sorted(_members_per_topic(subscriptions).items()):
            count = partitions_per_topic.get(topic)
            if count is None:
                continue
            per_member, extra = divmod(count, len(members))
            for i, member in enumerate(sorted(members)):
                start = per_member * i + min(i, extra)
                length = per_member + (1 if i < extra else 0)
                out[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return out


class RoundRobinAssignor:
    """All partitions of all subscribed topics, sorted by topic then partition, dealt in turn
    to the members sorted by id, skipping members not subscribed to a partition's topic
    (Kafka's RoundRobinAssignor)."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> Assignments:
        members = sorted(subscriptions)
        out: Assignments = {member: [] for member in members}
        if not members:
            return out
        topics = sorted({t for s in subscriptions.values() for t in s.topics})
        turn = 0
        for topic in topics:
            count = partitions_per_topic.get(topic)
            if count is None:
                continue
            for partition in range(count):
                # some member is subscribed: the topic came from a subscription
                while topic not in subscriptions[members[turn % len(members)]].topics:
                    turn += 1
                out[members[turn % len(members)]].append(TopicPartition(topic, partition))
                turn += 1
        return out


def _members_per_topic(subscriptions: Mapping[str, Subscription]) -> dict[str, list[str]]:
    per_topic: dict[str, list[str]] = {}
    for member, subscription in subscriptions.items():
        for topic in set(subscription.topics):
            per_topic.setdefault(topic, []).append(member)
    return per_topic


ASSIGNORS: dict[str, PartitionAssignor] = {
    a.name: a for a in (RangeAssignor(), RoundRobinAssignor())
}


def assignor_for(name: str) -> PartitionAssignor:
    """The assignor called `name` (KeyError names the known ones)."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise KeyError(
            f"unknown partition assignor {name!r} (known: {', '.join(sorted(ASSIGNORS))})"
        ) from None
