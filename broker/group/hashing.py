"""Which `__consumer_offsets` partition holds a group: Kafka's
`Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`."""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"

_INT_MIN = -(2**31)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0 (Math.abs would leave it negative)."""
    return 0 if n == _INT_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hash(group_id)) % num_partitions
