"""The partition of a group (Java's String.hashCode, Kafka's Utils.abs) and the
`__consumer_offsets` record codec."""

from __future__ import annotations

import re

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.group.hashing import java_string_hash, kafka_abs, partition_for
from broker.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetsRecordError,
    OffsetValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("my-group", -1906497762),
        ("polygenelubricants", -2147483648),  # Java's famous MIN_VALUE hash
        ("GydZG_", -2147483648),
        ("é", 233),
        ("😀", 1772899),  # a surrogate pair: two UTF-16 code units (values from Java 17)
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_min_value_hash_maps_to_partition_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("my-group", 50) == 1906497762 % 50
    assert partition_for("hello", 4) == 99162322 % 4


@given(st.text(max_size=40), st.integers(1, 200))
def test_partition_in_range(group: str, n: int) -> None:
    assert 0 <= partition_for(group, n) < n


texts = st.text(max_size=20)
ints = st.integers(-(2**63), 2**63 - 1)
offset_values = st.builds(OffsetValue, ints, st.integers(-1, 2**31), st.none() | texts, ints)
members = st.builds(
    MemberValue, texts, texts, texts, st.integers(0, 2**31), st.integers(0, 2**31),
    st.binary(max_size=30), st.binary(max_size=30),
)  # fmt: skip
group_values = st.builds(
    GroupValue, st.none() | texts, st.integers(-1, 2**31), st.none() | texts,
    st.none() | texts, ints, st.lists(members, max_size=4).map(tuple),
)  # fmt: skip


@given(st.builds(OffsetKey, texts, texts, st.integers(0, 2**31)), offset_values | st.none())
def test_offset_round_trip(key: OffsetKey, value: OffsetValue | None) -> None:
    decoded = decode_key(encode_key(key))
    assert decoded == key
    assert decode_value(decoded, encode_value(value)) == value


@given(st.builds(GroupKey, texts), group_values | st.none())
def test_group_round_trip(key: GroupKey, value: GroupValue | None) -> None:
    decoded = decode_key(encode_key(key))
    assert decoded == key
    assert decode_value(decoded, encode_value(value)) == value


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (b"\xc1", "not msgpack"),
        (msgpack.packb("x"), "not a [version, ...] array"),
        (msgpack.packb([7, "g"]), "unknown key version 7"),
        (msgpack.packb([1, "g", "t"]), "bad shape"),
        (msgpack.packb([2, 5]), "bad field types"),
    ],
)
def test_bad_keys_are_named(raw: bytes, problem: str) -> None:
    with pytest.raises(OffsetsRecordError, match=re.escape(problem)):
        decode_key(raw)


def test_bad_values_are_named() -> None:
    with pytest.raises(OffsetsRecordError, match="unknown offset value version 9"):
        decode_value(OffsetKey("g", "t", 0), msgpack.packb([9, 1]))
    with pytest.raises(OffsetsRecordError, match="bad shape"):
        decode_value(GroupKey("g"), msgpack.packb([0, "consumer"]))
