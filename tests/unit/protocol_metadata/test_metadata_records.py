"""Metadata records: round trips, Kafka's type ids, and decoding that fails only clearly."""

from __future__ import annotations

import contextlib
import random

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ProtocolError
from protocol.metadata.records import (
    RECORD_TYPES,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FenceBrokerRecord,
    InvalidRecordError,
    MetadataRecordType,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    decode_record,
    encode_record,
)
from protocol.metadata.topic_ids import (
    METADATA_TOPIC_ID,
    ZERO_UUID,
    is_uuid,
    random_uuid,
    uuid_from_string,
    uuid_to_string,
)

TID = "MQ5ms5ZmRRaTnh4Ke6Pe-A"

SAMPLES = [
    RegisterBrokerRecord(
        broker_id=1,
        incarnation_id=TID,
        broker_epoch=7,
        endpoints=(BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9092),),
        rack="r1",
        fenced=True,
    ),
    UnregisterBrokerRecord(broker_id=1, broker_epoch=7),
    FenceBrokerRecord(id=1, epoch=7),
    UnfenceBrokerRecord(id=1, epoch=7),
    TopicRecord(name="orders", topic_id=TID),
    PartitionRecord(
        partition_id=3,
        topic_id=TID,
        replicas=(1, 2, 3),
        isr=(1, 2),
        leader=1,
        removing_replicas=(3,),
        adding_replicas=(4,),
        leader_epoch=5,
        partition_epoch=9,
    ),
    PartitionChangeRecord(partition_id=3, topic_id=TID, isr=(1,)),
    PartitionChangeRecord(partition_id=3, topic_id=TID, leader=-1, replicas=(1, 2)),
    RemoveTopicRecord(topic_id=TID),
    ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000"),
    ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value=None),
    ProducerIdsRecord(broker_id=1, broker_epoch=7, next_producer_id=1000),
    BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=7, fenced=-1),
    BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=7, in_controlled_shutdown=1),
    NoOpRecord(),
]


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: type(r).__name__)
def test_round_trip(record: object) -> None:
    data = encode_record(record)  # type: ignore[arg-type]
    assert decode_record(data) == record
    record_type, version, _ = msgpack.unpackb(data)
    assert record_type == type(record).RECORD_TYPE  # type: ignore[attr-defined]
    assert version == 0


def test_kafka_record_type_ids() -> None:
    assert RECORD_TYPES[0] is RegisterBrokerRecord
    assert RECORD_TYPES[2] is TopicRecord
    assert RECORD_TYPES[3] is PartitionRecord
    assert RECORD_TYPES[4] is ConfigRecord
    assert RECORD_TYPES[5] is PartitionChangeRecord
    assert RECORD_TYPES[9] is RemoveTopicRecord
    assert RECORD_TYPES[7] is FenceBrokerRecord
    assert RECORD_TYPES[8] is UnfenceBrokerRecord
    assert RECORD_TYPES[15] is ProducerIdsRecord
    assert RECORD_TYPES[17] is BrokerRegistrationChangeRecord
    assert MetadataRecordType.NO_OP_RECORD == 20


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"", "not valid msgpack"),
        (b"\xc1", "not valid msgpack"),
        (msgpack.packb([2, 0]), "array [record_type, version, body]"),
        (msgpack.packb({"a": 1}), "array [record_type, version, body]"),
        (msgpack.packb([99, 0, []]), "unknown metadata record type 99"),
        (msgpack.packb(["2", 0, []]), "must be integers"),
        (msgpack.packb([2, 5, ["a", TID]]), "unsupported version 5 of TopicRecord"),
        (msgpack.packb([2, -1, ["a", TID]]), "unsupported version -1"),
        (msgpack.packb([2, 0, ["a"]]), "TopicRecord"),
        (msgpack.packb([2, 0, [1, TID]]), "name"),
        (msgpack.packb([2, 0, ["a", TID]]) + b"\x00", "not valid msgpack"),
    ],
)
def test_bad_input_is_a_clear_protocol_error(data: bytes, needle: str) -> None:
    with pytest.raises(InvalidRecordError) as info:
        decode_record(data)
    assert needle in str(info.value)
    assert isinstance(info.value, ProtocolError)


def test_newer_peer_trailing_fields_are_ignored() -> None:
    data = msgpack.packb([2, 0, ["a", TID, "future"]])
    assert decode_record(data) == TopicRecord(name="a", topic_id=TID)


def test_encode_refuses_non_records() -> None:
    with pytest.raises(TypeError):
        encode_record(BrokerEndpoint(name="x", host="h", port=1))  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_decoding_random_bytes_never_raises_anything_else(data: bytes) -> None:
    with contextlib.suppress(InvalidRecordError):
        decode_record(data)


_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.text(max_size=5),
    st.binary(max_size=5), st.floats(allow_nan=False),
)  # fmt: skip
_values = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=6), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(RECORD_TYPES)), st.integers(-1, 2), _values)
def test_decoding_structured_garbage_never_raises_anything_else(
    record_type: int, version: int, body: object
) -> None:
    with contextlib.suppress(InvalidRecordError):
        decode_record(msgpack.packb([record_type, version, body]))


def test_random_uuid_form() -> None:
    rng = random.Random(4)
    ids = {random_uuid(rng.randbytes) for _ in range(500)}
    assert len(ids) == 500
    for text in ids:
        assert len(text) == 22 and is_uuid(text) and not text.startswith("-")
        assert uuid_to_string(uuid_from_string(text)) == text
    assert ZERO_UUID not in ids and METADATA_TOPIC_ID not in ids


def test_random_uuid_skips_reserved_and_dash() -> None:
    outputs = iter([bytes(16), b"\xf8" + bytes(15), bytes(15) + b"\x01", b"\x01" * 16])
    assert random_uuid(lambda n: next(outputs)) == uuid_to_string(b"\x01" * 16)


@pytest.mark.parametrize("text", ["", "abc", "A" * 23, "!" * 22])
def test_uuid_from_string_refuses_garbage(text: str) -> None:
    assert not is_uuid(text)
    with pytest.raises(ValueError):
        uuid_from_string(text)
