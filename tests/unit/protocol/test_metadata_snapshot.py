"""protocol.metadata.snapshot: an image survives encode -> decode -> replay exactly."""

from __future__ import annotations

import pytest

from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import (
    BrokerEndpoint,
    ConfigRecord,
    InvalidRecordError,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UserScramCredentialRecord,
)
from protocol.metadata.snapshot import decode_snapshot, encode_snapshot, image_from_snapshot


def _image() -> MetadataImage:
    delta = MetadataDelta(MetadataImage.empty("c1"))
    records = [
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id="i1",
            broker_epoch=0,
            endpoints=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092),),
            rack="r1",
        ),
        UnfenceBrokerRecord(id=1, epoch=0),
        RegisterBrokerRecord(broker_id=2, incarnation_id="i2", broker_epoch=2),
        TopicRecord(name="orders", topic_id="t1"),
        PartitionRecord(partition_id=0, topic_id="t1", replicas=(1, 2), isr=(1, 2), leader=1),
        PartitionRecord(partition_id=1, topic_id="t1", replicas=(2, 1), isr=(2,), leader=2),
        PartitionChangeRecord(partition_id=1, topic_id="t1", isr=(2, 1)),
        ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000"),
        ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=1000),
        *(
            UserScramCredentialRecord(
                name=user,
                mechanism=mechanism,
                salt=b"s",
                stored_key=b"k1",
                server_key=b"k2",
                iterations=4096,
            )
            for user in ("alice", "bob")
            for mechanism in (1, 2)
        ),
        RemoveUserScramCredentialRecord(name="bob", mechanism=2),
    ]
    for offset, record in enumerate(records):
        delta.replay(record, offset=offset, epoch=3)
    return delta.apply()


def test_snapshot_round_trip_rebuilds_the_image() -> None:
    image = _image()
    rebuilt = image_from_snapshot(encode_snapshot(image), end_offset=9, epoch=3, cluster_id="c1")
    assert rebuilt.provenance.last_offset == 8
    assert rebuilt.cluster == image.cluster
    assert rebuilt.topics == image.topics
    assert rebuilt.configs == image.configs
    assert rebuilt.producer_ids == image.producer_ids
    assert rebuilt.scram == image.scram
    assert {u: sorted(m) for u, m in rebuilt.scram.users().items()} == {
        "alice": [1, 2],
        "bob": [1],
    }
    assert rebuilt.cluster.brokers[1].fenced is False
    assert rebuilt.topics.get_partition("t1", 1).partition_epoch == 1


def test_empty_image_snapshot() -> None:
    assert decode_snapshot(encode_snapshot(MetadataImage.empty())) == []


@pytest.mark.parametrize("data", [b"\xc1", b"\x91\x01", b"\x91\xc4\x01\x00"])
def test_unreadable_snapshot_names_the_problem(data: bytes) -> None:
    with pytest.raises(InvalidRecordError, match="metadata snapshot"):
        decode_snapshot(data)
