"""Metadata records: Kafka's KRaft record types, names and fields, as msgpack messages.

A record is stored as the msgpack array `[record_type, version, body]` where `record_type` is
Kafka's MetadataRecordType id and `body` the record's fields in declaration order (see
protocol.schema). The local metadata log keeps one encoded record per record-batch entry; the
ZooKeeper backend turns records into znode writes; the Raft backend appends them as they are.

Conventions kept from Kafka: a PartitionChangeRecord field left at its "no change" value
(`None`, or NO_LEADER_CHANGE for the leader) leaves that part of the partition as it was; a
ConfigRecord with `value=None` deletes the config.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, ClassVar, NamedTuple, TypeVar

import msgpack

from protocol.messages.base import message
from protocol.schema import InvalidMessageError, from_wire, to_wire

NO_LEADER = -1
"""Leader id of a partition without a leader."""
NO_LEADER_CHANGE = -2
"""PartitionChangeRecord.leader value meaning 'the leader stays as it is'."""


class MetadataRecordType(IntEnum):
    """Kafka's MetadataRecordType ids (the apiKey of each record's JSON schema)."""

    REGISTER_BROKER_RECORD = 0
    UNREGISTER_BROKER_RECORD = 1
    TOPIC_RECORD = 2
    PARTITION_RECORD = 3
    CONFIG_RECORD = 4
    PARTITION_CHANGE_RECORD = 5
    FENCE_BROKER_RECORD = 7
    UNFENCE_BROKER_RECORD = 8
    REMOVE_TOPIC_RECORD = 9
    USER_SCRAM_CREDENTIAL_RECORD = 11
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD = 12
    PRODUCER_IDS_RECORD = 15
    BROKER_REGISTRATION_CHANGE_RECORD = 17
    NO_OP_RECORD = 20
    ACCESS_CONTROL_ENTRY_RECORD = 23
    REMOVE_ACCESS_CONTROL_ENTRY_RECORD = 24


class FencingChange(IntEnum):
    """Kafka's BrokerRegistrationFencingChange: BrokerRegistrationChangeRecord.fenced."""

    UNFENCE = -1
    NONE = 0
    FENCE = 1


class InControlledShutdownChange(IntEnum):
    """Kafka's BrokerRegistrationInControlledShutdownChange: only entering controlled shutdown
    is a change (a broker leaves it by re-registering or being unregistered)."""

    NONE = 0
    IN_CONTROLLED_SHUTDOWN = 1


class LeaderRecoveryState(IntEnum):
    """Kafka's LeaderRecoveryState: RECOVERING after an unclean election until the leader
    has recovered the partition."""

    RECOVERED = 0
    RECOVERING = 1


class InvalidRecordError(InvalidMessageError):
    """Bytes that are not a metadata record this node can read; says what is wrong."""


class MetadataRecord:
    """Base of all metadata records. Subclasses set RECORD_TYPE and VERSION."""

    __slots__ = ()
    RECORD_TYPE: ClassVar[MetadataRecordType]
    VERSION: ClassVar[int] = 0


R = TypeVar("R", bound=type[MetadataRecord])
RECORD_TYPES: dict[int, type[MetadataRecord]] = {}


def _record(record_type: MetadataRecordType, version: int = 0) -> Any:
    def register(cls: R) -> R:
        if record_type in RECORD_TYPES:
            raise ValueError(f"metadata record type {record_type!r} registered twice")
        cls.RECORD_TYPE = record_type
        cls.VERSION = version
        RECORD_TYPES[int(record_type)] = cls
        return cls

    return register


@message
class BrokerEndpoint:
    name: str
    """Listener name (PLAINTEXT, INTERNAL, ...)."""
    host: str
    """Advertised host."""
    port: int
    """Advertised port."""
    security_protocol: int = 0
    """Kafka's SecurityProtocol id; 0 = PLAINTEXT."""


@_record(MetadataRecordType.REGISTER_BROKER_RECORD)
@message
class RegisterBrokerRecord(MetadataRecord):
    broker_id: int
    """The broker id (node.id)."""
    incarnation_id: str
    """Random Uuid chosen by the broker process at start-up: tells restarts apart."""
    broker_epoch: int
    """The offset of this record in the metadata log; fences messages from older runs."""
    endpoints: tuple[BrokerEndpoint, ...] = ()
    """Advertised listeners."""
    rack: str | None = None
    """broker.rack, if set."""
    fenced: bool = True
    """A broker starts fenced: it leads nothing until unfenced."""
    in_controlled_shutdown: bool = False
    """The broker is shutting down in a controlled way."""


@_record(MetadataRecordType.UNREGISTER_BROKER_RECORD)
@message
class UnregisterBrokerRecord(MetadataRecord):
    broker_id: int
    """The broker id."""
    broker_epoch: int
    """The epoch of the registration being removed."""


@_record(MetadataRecordType.FENCE_BROKER_RECORD)
@message
class FenceBrokerRecord(MetadataRecord):
    id: int
    """The broker id."""
    epoch: int
    """The broker epoch of the registration being fenced."""


@_record(MetadataRecordType.UNFENCE_BROKER_RECORD)
@message
class UnfenceBrokerRecord(MetadataRecord):
    id: int
    """The broker id."""
    epoch: int
    """The broker epoch of the registration being unfenced."""


@_record(MetadataRecordType.BROKER_REGISTRATION_CHANGE_RECORD)
@message
class BrokerRegistrationChangeRecord(MetadataRecord):
    broker_id: int
    """The broker id."""
    broker_epoch: int
    """The broker epoch of the registration being changed."""
    fenced: int = FencingChange.NONE
    """FencingChange: -1 unfenced, 0 no change, 1 fenced."""
    in_controlled_shutdown: int = InControlledShutdownChange.NONE
    """InControlledShutdownChange: 0 no change, 1 the broker is in controlled shutdown."""


@_record(MetadataRecordType.TOPIC_RECORD)
@message
class TopicRecord(MetadataRecord):
    name: str
    """The topic name."""
    topic_id: str
    """The topic id (Kafka's base64 Uuid string)."""


@_record(MetadataRecordType.PARTITION_RECORD)
@message
class PartitionRecord(MetadataRecord):
    partition_id: int
    """The partition number."""
    topic_id: str
    """The topic id."""
    replicas: tuple[int, ...]
    """Assigned replicas, preferred leader first."""
    isr: tuple[int, ...]
    """In-sync replicas."""
    leader: int
    """Leader broker id, or -1 for none."""
    removing_replicas: tuple[int, ...] = ()
    """Replicas being removed by a reassignment."""
    adding_replicas: tuple[int, ...] = ()
    """Replicas being added by a reassignment."""
    leader_epoch: int = 0
    """Bumped on every leader change."""
    partition_epoch: int = 0
    """Bumped on every change of the partition."""
    leader_recovery_state: int = 0
    """LeaderRecoveryState: 0 RECOVERED, 1 RECOVERING."""


@_record(MetadataRecordType.PARTITION_CHANGE_RECORD)
@message
class PartitionChangeRecord(MetadataRecord):
    partition_id: int
    """The partition number."""
    topic_id: str
    """The topic id."""
    isr: tuple[int, ...] | None = None
    """New ISR, or null for no change."""
    leader: int = NO_LEADER_CHANGE
    """New leader, -1 for none, -2 for no change."""
    replicas: tuple[int, ...] | None = None
    """New replicas, or null for no change."""
    removing_replicas: tuple[int, ...] | None = None
    """New removing replicas, or null for no change."""
    adding_replicas: tuple[int, ...] | None = None
    """New adding replicas, or null for no change."""
    leader_recovery_state: int = -1
    """New LeaderRecoveryState, or -1 for no change."""


@_record(MetadataRecordType.REMOVE_TOPIC_RECORD)
@message
class RemoveTopicRecord(MetadataRecord):
    topic_id: str
    """The id of the topic to remove (its partitions and configs go with it)."""


@_record(MetadataRecordType.CONFIG_RECORD)
@message
class ConfigRecord(MetadataRecord):
    resource_type: int
    """ResourceType: 2 TOPIC, 4 BROKER."""
    resource_name: str
    """Topic name, or broker id as a string ('' for the cluster default)."""
    name: str
    """Config name."""
    value: str | None
    """Config value, or null to delete the config."""


@_record(MetadataRecordType.PRODUCER_IDS_RECORD)
@message
class ProducerIdsRecord(MetadataRecord):
    broker_id: int
    """The broker that asked for the block."""
    broker_epoch: int
    """Its broker epoch."""
    next_producer_id: int
    """First producer id not yet handed out: the broker's block ends just below it. Only
    goes up."""


@_record(MetadataRecordType.USER_SCRAM_CREDENTIAL_RECORD)
@message
class UserScramCredentialRecord(MetadataRecord):
    name: str
    """The user name."""
    mechanism: int
    """ScramMechanism id: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512."""
    salt: bytes
    """The salt the keys were derived with."""
    stored_key: bytes
    """H(ClientKey) (RFC 5802): checks a client's proof; the password is never stored."""
    server_key: bytes
    """HMAC(SaltedPassword, "Server Key"): signs the server's final message."""
    iterations: int
    """The iteration count."""


@_record(MetadataRecordType.REMOVE_USER_SCRAM_CREDENTIAL_RECORD)
@message
class RemoveUserScramCredentialRecord(MetadataRecord):
    name: str
    """The user name."""
    mechanism: int
    """ScramMechanism id of the credential removed."""


@_record(MetadataRecordType.ACCESS_CONTROL_ENTRY_RECORD)
@message
class AccessControlEntryRecord(MetadataRecord):
    id: str
    """The ACL's Uuid (DeleteAcls removes by it)."""
    resource_type: int
    """protocol.acls.ResourceType."""
    resource_name: str
    """The resource name, `*`, or a prefix."""
    pattern_type: int
    """protocol.acls.PatternType: LITERAL or PREFIXED."""
    principal: str
    """Who: User:alice, User:*."""
    host: str
    """From where, `*` for anywhere."""
    operation: int
    """protocol.acls.AclOperation."""
    permission_type: int
    """protocol.acls.AclPermissionType: DENY or ALLOW."""


@_record(MetadataRecordType.REMOVE_ACCESS_CONTROL_ENTRY_RECORD)
@message
class RemoveAccessControlEntryRecord(MetadataRecord):
    id: str
    """The Uuid of the ACL removed."""


@_record(MetadataRecordType.NO_OP_RECORD)
@message
class NoOpRecord(MetadataRecord):
    """Written by a new Raft leader to commit its epoch; changes nothing."""


class OffsetRecord(NamedTuple):
    """A committed record and its offset in the metadata log."""

    offset: int
    record: MetadataRecord


def encode_record(record: MetadataRecord) -> bytes:
    """`[record_type, version, body]` as msgpack bytes."""
    cls = type(record)
    if RECORD_TYPES.get(getattr(cls, "RECORD_TYPE", -1)) is not cls:
        raise TypeError(f"{cls.__name__} is not a registered metadata record type")
    return msgpack.packb([int(cls.RECORD_TYPE), cls.VERSION, to_wire(record)], use_bin_type=True)


def decode_record(data: bytes | bytearray | memoryview) -> MetadataRecord:
    """Decode one record; anything unreadable raises InvalidRecordError saying why."""
    try:
        value = msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise InvalidRecordError(f"metadata record is not valid msgpack: {exc}") from None
    if type(value) is not list or len(value) != 3:
        raise InvalidRecordError(
            "metadata record must be an array [record_type, version, body], got "
            + (f"an array of {len(value)} items" if type(value) is list else type(value).__name__)
        )
    record_type, version, body = value
    if type(record_type) is not int or type(version) is not int:
        raise InvalidRecordError("metadata record type and version must be integers")
    cls = RECORD_TYPES.get(record_type)
    if cls is None:
        raise InvalidRecordError(f"unknown metadata record type {record_type}")
    if not 0 <= version <= cls.VERSION:
        raise InvalidRecordError(
            f"unsupported version {version} of {cls.__name__} (this node reads 0 to {cls.VERSION})"
        )
    try:
        return from_wire(cls, body)
    except InvalidMessageError as exc:
        raise InvalidRecordError(f"bad {cls.__name__}: {exc}") from None
