"""Metadata snapshots: a MetadataImage as the records that rebuild it (KRaft's image writer).

A KRaft snapshot is a sequence of ordinary metadata records which, replayed on an empty image,
give the image at the snapshot's end offset. `image_records(image)` lists them in an order that
replays cleanly (brokers, then topics with their partitions, then configs, then producer ids,
then SCRAM credentials, then ACLs); `encode_snapshot(image)` packs them as one msgpack array of encoded
records and `decode_snapshot(data)` reads it back. `image_from_snapshot(data, end_offset, epoch, cluster_id)`
replays those records and labels the image with the snapshot's provenance (its last offset is
`end_offset - 1`), so a ControllerState or broker publisher built on it continues with the
entry at `end_offset`.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgpack

from protocol.metadata.acls import acl_record
from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import MetadataImage, MetadataProvenance
from protocol.metadata.records import (
    ConfigRecord,
    InvalidRecordError,
    MetadataRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
    decode_record,
    encode_record,
)


def image_records(image: MetadataImage) -> Iterator[MetadataRecord]:
    """The records that rebuild `image` from an empty one."""
    for broker_id in sorted(image.cluster.brokers):
        b = image.cluster.brokers[broker_id]
        yield RegisterBrokerRecord(
            broker_id=b.broker_id,
            incarnation_id=b.incarnation_id,
            broker_epoch=b.epoch,
            endpoints=b.endpoints,
            rack=b.rack,
            fenced=b.fenced,
            in_controlled_shutdown=b.in_controlled_shutdown,
        )
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        yield TopicRecord(name=topic.name, topic_id=topic.topic_id)
        for pid in sorted(topic.partitions):
            yield topic.partitions[pid].to_record(topic.topic_id, pid)
    for resource in sorted(image.configs.resources):
        for key, value in sorted(image.configs.resources[resource].items()):
            yield ConfigRecord(
                resource_type=resource.type, resource_name=resource.name, name=key, value=value
            )
    if image.producer_ids.next_producer_id > 0:
        # The broker id and epoch of the last block are not part of the image: -1 (unknown).
        yield ProducerIdsRecord(
            broker_id=-1, broker_epoch=-1, next_producer_id=image.producer_ids.next_producer_id
        )
    for mechanism in sorted(image.scram.mechanisms):
        users = image.scram.mechanisms[mechanism]
        for user in sorted(users):
            c = users[user]
            yield UserScramCredentialRecord(
                name=user,
                mechanism=mechanism,
                salt=c.salt,
                stored_key=c.stored_key,
                server_key=c.server_key,
                iterations=c.iterations,
            )
    for acl_id in sorted(image.acls.by_id):
        yield acl_record(acl_id, image.acls.by_id[acl_id])


def encode_snapshot(image: MetadataImage) -> bytes:
    """`image` as snapshot bytes: a msgpack array of encoded records."""
    return msgpack.packb([encode_record(r) for r in image_records(image)], use_bin_type=True)


def decode_snapshot(data: bytes | bytearray | memoryview) -> list[MetadataRecord]:
    """The records of a snapshot; anything unreadable raises InvalidRecordError saying why."""
    try:
        items = msgpack.unpackb(data, raw=False, use_list=True)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise InvalidRecordError(f"metadata snapshot is not valid msgpack: {exc}") from None
    if type(items) is not list or not all(type(i) is bytes for i in items):
        raise InvalidRecordError("metadata snapshot must be an array of encoded records")
    out = []
    for index, item in enumerate(items):
        try:
            out.append(decode_record(item))
        except InvalidRecordError as exc:
            raise InvalidRecordError(f"metadata snapshot record {index}: {exc}") from None
    return out


def image_from_snapshot(
    data: bytes | bytearray | memoryview, end_offset: int, epoch: int, cluster_id: str = ""
) -> MetadataImage:
    """The image a snapshot holds: its records replayed on an empty image, provenance
    `(end_offset - 1, epoch)`. Raises InvalidRecordError or MetadataReplayError."""
    delta = MetadataDelta(MetadataImage.empty(cluster_id))
    for record in decode_snapshot(data):
        delta.replay(record)
    image = delta.apply()
    return MetadataImage(
        provenance=MetadataProvenance(last_offset=end_offset - 1, last_epoch=epoch),
        cluster_id=cluster_id,
        cluster=image.cluster,
        topics=image.topics,
        configs=image.configs,
        producer_ids=image.producer_ids,
        scram=image.scram,
        acls=image.acls,
    )
