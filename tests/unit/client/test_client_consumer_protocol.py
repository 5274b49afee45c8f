"""The consumer protocol's subscription and assignment bytes."""

from __future__ import annotations

import msgpack
import pytest

from client.consumer_protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.names import TopicPartition as TP


def test_subscription_round_trip() -> None:
    sub = Subscription(("b", "a"), b"\x01", (TP("a", 1), TP("a", 0)))
    back = decode_subscription(encode_subscription(sub))
    assert back == Subscription(("a", "b"), b"\x01", (TP("a", 0), TP("a", 1)))


def test_assignment_round_trip_and_empty_bytes() -> None:
    a = Assignment((TP("t", 2), TP("s", 0), TP("t", 0)))
    assert set(decode_assignment(encode_assignment(a)).partitions) == set(a.partitions)
    assert decode_assignment(b"") == Assignment(())


def test_a_newer_version_with_more_fields_is_read_by_its_known_prefix() -> None:
    newer = msgpack.packb([3, ["t"], None, [["t", [0]]], "rack-1", 42], use_bin_type=True)
    assert decode_subscription(newer) == Subscription(("t",), None, (TP("t", 0),))
    newer_a = msgpack.packb([1, [["t", [1, 2]]], None, "extra"], use_bin_type=True)
    assert decode_assignment(newer_a).partitions == (TP("t", 1), TP("t", 2))


@pytest.mark.parametrize(
    "data",
    [
        b"\xc1",
        msgpack.packb("no"),
        msgpack.packb([0]),
        msgpack.packb([-1, ["t"]]),
        msgpack.packb([0, "t"]),
        msgpack.packb([0, ["t"], "not bytes"]),
    ],
)
def test_malformed_subscription_is_a_clear_error(data: bytes) -> None:
    with pytest.raises(KafkaError, match="malformed consumer protocol subscription") as info:
        decode_subscription(data)
    assert info.value.code is ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_malformed_assignment_is_a_clear_error() -> None:
    with pytest.raises(KafkaError, match="bad topic entry"):
        decode_assignment(msgpack.packb([0, [["t", [-1]]]]))
