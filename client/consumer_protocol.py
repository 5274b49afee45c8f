"""Kafka's ConsumerProtocol: a consumer's subscription (JoinGroup metadata) and its assignment
(SyncGroup assignment), the bytes the group coordinator keeps without reading them.

Each is a msgpack array whose first element is the version; later versions only append fields
(as Kafka's schemas do), so a decoder reads the fields it knows and ignores the rest, and an
older member can join a group led by a newer one.

    subscription v0: [0, topics, user_data, owned_partitions]
    assignment   v0: [0, [[topic, [partition, ...]], ...], user_data]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgpack

from protocol.errors import ErrorCode, KafkaError
from protocol.names import TopicPartition

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "VERSION",
    "Assignment",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

CONSUMER_PROTOCOL_TYPE = "consumer"
VERSION = 0


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class Assignment:
    partitions: tuple[TopicPartition, ...]
    user_data: bytes | None = None


def encode_subscription(subscription: Subscription) -> bytes:
    return msgpack.packb(
        [
            VERSION,
            sorted(subscription.topics),
            subscription.user_data,
            _by_topic(subscription.owned_partitions),
        ],
        use_bin_type=True,
    )


def decode_subscription(data: bytes) -> Subscription:
    fields = _unpack(data, "subscription", 2)
    topics = fields[1]
    if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
        raise _bad("subscription", "topics must be a list of names")
    user_data = _user_data(fields, 2, "subscription")
    owned = _partitions(fields[3], "subscription") if len(fields) > 3 else ()
    return Subscription(tuple(topics), user_data, owned)


def encode_assignment(assignment: Assignment) -> bytes:
    return msgpack.packb(
        [VERSION, _by_topic(assignment.partitions), assignment.user_data], use_bin_type=True
    )


def decode_assignment(data: bytes) -> Assignment:
    if not data:
        # Kafka: an empty assignment (a member that got nothing, or a group not yet Stable)
        return Assignment(())
    fields = _unpack(data, "assignment", 2)
    return Assignment(_partitions(fields[1], "assignment"), _user_data(fields, 2, "assignment"))


def _by_topic(partitions: Iterable[TopicPartition]) -> list[list[Any]]:
    grouped: dict[str, list[int]] = {}
    for tp in partitions:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return [[topic, sorted(ps)] for topic, ps in sorted(grouped.items())]


def _unpack(data: bytes, what: str, min_fields: int) -> list[Any]:
    try:
        fields = msgpack.unpackb(data, raw=False)
    except (ValueError, msgpack.UnpackException) as exc:
        raise _bad(what, f"not msgpack ({exc})") from None
    if not isinstance(fields, list) or len(fields) < min_fields:
        raise _bad(what, f"expected an array of at least {min_fields} fields")
    version = fields[0]
    if not isinstance(version, int) or version < 0:
        raise _bad(what, f"bad version {version!r}")
    return fields


def _user_data(fields: list[Any], index: int, what: str) -> bytes | None:
    value = fields[index] if len(fields) > index else None
    if value is not None and not isinstance(value, bytes):
        raise _bad(what, "user_data must be bytes or nil")
    return value


def _partitions(raw: Any, what: str) -> tuple[TopicPartition, ...]:
    if not isinstance(raw, list):
        raise _bad(what, "partitions must be a list of [topic, [partition, ...]]")
    out: list[TopicPartition] = []
    for entry in raw:
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not isinstance(entry[0], str)
            or not isinstance(entry[1], list)
            or not all(isinstance(p, int) and p >= 0 for p in entry[1])
        ):
            raise _bad(what, f"bad topic entry {entry!r}")
        out.extend(TopicPartition(entry[0], p) for p in entry[1])
    return tuple(out)


def _bad(what: str, problem: str) -> KafkaError:
    return KafkaError(
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"malformed consumer protocol {what}: {problem}"
    )
