"""The records of `__consumer_offsets` (Kafka's GroupMetadataManager schemas, in msgpack).

Key: `[key_version, ...]` with Kafka's key versions: 1 = an offset commit `[1, group, topic,
partition]`, 2 = a group's metadata `[2, group]`. Value: `[value_version, ...]` or None (a
tombstone: the offset or the group was deleted; compaction keeps only the latest per key).
Unknown versions or shapes raise `OffsetsRecordError` naming what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 0
GROUP_VALUE_VERSION = 0


class OffsetsRecordError(ValueError):
    """A `__consumer_offsets` record this broker cannot read."""


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    """Kafka's OffsetAndMetadata."""

    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    commit_timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    """Kafka's GroupMetadataValue: what a new coordinator needs to know the group."""

    protocol_type: str | None
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp_ms: int
    members: tuple[MemberValue, ...] = ()


Key = OffsetKey | GroupKey
Value = OffsetValue | GroupValue


def encode_key(key: Key) -> bytes:
    if isinstance(key, OffsetKey):
        return msgpack.packb([OFFSET_KEY_VERSION, key.group_id, key.topic, key.partition])
    return msgpack.packb([GROUP_KEY_VERSION, key.group_id])


def encode_value(value: Value | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, OffsetValue):
        return msgpack.packb(
            [
                OFFSET_VALUE_VERSION,
                value.offset,
                value.leader_epoch,
                value.metadata,
                value.commit_timestamp_ms,
            ]
        )
    members = [
        [
            m.member_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
            m.subscription,
            m.assignment,
        ]
        for m in value.members
    ]
    return msgpack.packb(
        [
            GROUP_VALUE_VERSION,
            value.protocol_type,
            value.generation,
            value.protocol,
            value.leader,
            value.state_timestamp_ms,
            members,
        ]
    )


def _unpack(data: bytes, what: str) -> list[Any]:
    try:
        raw = msgpack.unpackb(data)
    except Exception as exc:
        raise OffsetsRecordError(f"{what} is not msgpack: {exc}") from exc
    if not isinstance(raw, list) or not raw or not isinstance(raw[0], int):
        raise OffsetsRecordError(f"{what} is not a [version, ...] array: {raw!r:.80}")
    return raw


def decode_key(data: bytes) -> Key:
    raw = _unpack(data, "key")
    try:
        if raw[0] in (0, OFFSET_KEY_VERSION):
            _, group, topic, partition = raw
            if isinstance(group, str) and isinstance(topic, str) and isinstance(partition, int):
                return OffsetKey(group, topic, partition)
        elif raw[0] == GROUP_KEY_VERSION:
            _, group = raw
            if isinstance(group, str):
                return GroupKey(group)
        else:
            raise OffsetsRecordError(f"unknown key version {raw[0]}")
    except ValueError as exc:
        if isinstance(exc, OffsetsRecordError):
            raise
        raise OffsetsRecordError(f"key of version {raw[0]} has a bad shape: {raw!r:.80}") from exc
    raise OffsetsRecordError(f"key of version {raw[0]} has bad field types: {raw!r:.80}")


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """The value for `key`; None for a tombstone."""
    if data is None:
        return None
    raw = _unpack(data, "value")
    try:
        if isinstance(key, OffsetKey):
            if raw[0] != OFFSET_VALUE_VERSION:
                raise OffsetsRecordError(f"unknown offset value version {raw[0]}")
            _, offset, epoch, metadata, ts = raw
            _typed(raw, (int, int, int, _OPT_STR, int))
            return OffsetValue(offset, epoch, metadata, ts)
        if raw[0] != GROUP_VALUE_VERSION:
            raise OffsetsRecordError(f"unknown group value version {raw[0]}")
        _, ptype, generation, protocol, leader, ts, members = raw
        _typed(raw, (int, _OPT_STR, int, _OPT_STR, _OPT_STR, int, list))
        for m in members:
            _typed(m, _MEMBER_TYPES)
        return GroupValue(
            ptype,
            generation,
            protocol,
            leader,
            ts,
            tuple(MemberValue(*m) for m in members),
        )
    except OffsetsRecordError:
        raise
    except (ValueError, TypeError, IndexError) as exc:
        raise OffsetsRecordError(f"value for {key} has a bad shape: {raw!r:.80}") from exc


_OPT_STR = (str, type(None))
_MEMBER_TYPES = (str, str, str, int, int, bytes, bytes)


def _typed(fields: object, types: tuple[type | tuple[type, ...], ...]) -> None:
    """Every field of the expected type (a record another writer garbled must not become a
    group whose later use fails, or a huge bytes() allocation)."""
    if not isinstance(fields, list) or len(fields) != len(types):
        raise ValueError("wrong number of fields")
    for value, expected in zip(fields, types, strict=True):
        if not isinstance(value, expected) or isinstance(value, bool):
            raise ValueError(f"{value!r:.40} is not {expected}")
