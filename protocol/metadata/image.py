"""The immutable MetadataImage: brokers, topics with their partitions, configs (KRaft's model).

An image is never changed in place: a MetadataDelta (delta.py) replays records on top of one
image and `apply()` builds the next. Images share unchanged parts with their predecessor, so a
new image costs a copy of the maps that changed, not of the whole cluster.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import NamedTuple

from protocol.acls import AclBinding
from protocol.errors import TriokaError
from protocol.metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerEndpoint,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
)
from protocol.names import TopicPartition
from protocol.scram import ScramCredential

_EMPTY: Mapping = MappingProxyType({})


def _empty_map() -> Mapping:
    return _EMPTY


class MetadataReplayError(TriokaError):
    """A record that does not fit the image it is replayed on (an unknown topic, partition or
    broker, a stale broker epoch): the metadata log is inconsistent. Says which record."""


class ConfigResource(NamedTuple):
    """Kafka's ConfigResource: a resource type id (2 TOPIC, 4 BROKER) and a name."""

    type: int
    name: str


@dataclass(frozen=True, slots=True)
class MetadataProvenance:
    """Where an image comes from: the last record offset and epoch it contains."""

    last_offset: int = -1
    last_epoch: int = -1
    last_log_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: str
    epoch: int
    endpoints: tuple[BrokerEndpoint, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False

    @classmethod
    def from_record(cls, record: RegisterBrokerRecord) -> BrokerRegistration:
        return cls(
            broker_id=record.broker_id,
            incarnation_id=record.incarnation_id,
            epoch=record.broker_epoch,
            endpoints=record.endpoints,
            rack=record.rack,
            fenced=record.fenced,
            in_controlled_shutdown=record.in_controlled_shutdown,
        )

    @property
    def usable(self) -> bool:
        """Can take new replicas and leadership: unfenced and not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown

    def endpoint(self, listener_name: str) -> BrokerEndpoint | None:
        return next((e for e in self.endpoints if e.name == listener_name), None)


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = 0

    @classmethod
    def from_record(cls, record: PartitionRecord) -> PartitionRegistration:
        return cls(
            replicas=record.replicas,
            isr=record.isr,
            leader=record.leader,
            leader_epoch=record.leader_epoch,
            partition_epoch=record.partition_epoch,
            removing_replicas=record.removing_replicas,
            adding_replicas=record.adding_replicas,
            leader_recovery_state=record.leader_recovery_state,
        )

    def to_record(self, topic_id: str, partition_id: int) -> PartitionRecord:
        return PartitionRecord(
            partition_id=partition_id,
            topic_id=topic_id,
            replicas=self.replicas,
            isr=self.isr,
            leader=self.leader,
            removing_replicas=self.removing_replicas,
            adding_replicas=self.adding_replicas,
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            leader_recovery_state=self.leader_recovery_state,
        )

    def merge(self, record: PartitionChangeRecord) -> PartitionRegistration:
        """This partition after a PartitionChangeRecord, as Kafka's PartitionRegistration.merge:
        the partition epoch always goes up; the leader epoch when the record names a leader."""
        changes: dict[str, object] = {"partition_epoch": self.partition_epoch + 1}
        if record.leader != NO_LEADER_CHANGE:
            changes["leader"] = record.leader
            changes["leader_epoch"] = self.leader_epoch + 1
        if record.isr is not None:
            changes["isr"] = record.isr
        if record.replicas is not None:
            changes["replicas"] = record.replicas
        if record.removing_replicas is not None:
            changes["removing_replicas"] = record.removing_replicas
        if record.adding_replicas is not None:
            changes["adding_replicas"] = record.adding_replicas
        if record.leader_recovery_state != -1:
            changes["leader_recovery_state"] = record.leader_recovery_state
        return replace(self, **changes)  # type: ignore[arg-type]

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    @property
    def preferred_replica(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    def is_replica(self, broker_id: int) -> bool:
        return broker_id in self.replicas


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: Mapping[int, PartitionRegistration] = field(default_factory=_empty_map)

    def topic_partitions(self) -> Iterator[tuple[TopicPartition, PartitionRegistration]]:
        for pid in sorted(self.partitions):
            yield TopicPartition(self.name, pid), self.partitions[pid]


@dataclass(frozen=True, slots=True)
class TopicsImage:
    by_id: Mapping[str, TopicImage] = field(default_factory=_empty_map)
    by_name: Mapping[str, TopicImage] = field(default_factory=_empty_map)

    def get_topic(self, name: str) -> TopicImage | None:
        return self.by_name.get(name)

    def get_topic_by_id(self, topic_id: str) -> TopicImage | None:
        return self.by_id.get(topic_id)

    def get_partition(self, topic_id: str, partition_id: int) -> PartitionRegistration | None:
        topic = self.by_id.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def __len__(self) -> int:
        return len(self.by_id)


@dataclass(frozen=True, slots=True)
class ClusterImage:
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=_empty_map)

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def usable_brokers(self) -> list[BrokerRegistration]:
        """Unfenced brokers not in controlled shutdown, by id."""
        return [b for _, b in sorted(self.brokers.items()) if b.usable]

    def is_usable(self, broker_id: int) -> bool:
        broker = self.brokers.get(broker_id)
        return broker is not None and broker.usable


@dataclass(frozen=True, slots=True)
class ConfigurationsImage:
    resources: Mapping[ConfigResource, Mapping[str, str]] = field(default_factory=_empty_map)

    def configs(self, resource_type: int, name: str) -> Mapping[str, str]:
        """The dynamic configs set on a resource (empty when none)."""
        return self.resources.get(ConfigResource(resource_type, name), _EMPTY)

    def topic_configs(self, topic: str) -> Mapping[str, str]:
        return self.configs(TOPIC_RESOURCE, topic)


TOPIC_RESOURCE = 2
"""Kafka's ConfigResource.Type.TOPIC id (protocol.messages.configs.ResourceType.TOPIC)."""
BROKER_RESOURCE = 4
"""Kafka's ConfigResource.Type.BROKER id."""


PRODUCER_ID_BLOCK_SIZE = 1000
"""Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE: ids handed to a broker at a time."""


class ProducerIdsBlock(NamedTuple):
    """Kafka's ProducerIdsBlock: ids [first_producer_id, first_producer_id + size) for one
    broker."""

    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        """The next_producer_id of the ProducerIdsRecord that hands out this block."""
        return self.first_producer_id + self.size


@dataclass(frozen=True, slots=True)
class ProducerIdsImage:
    next_producer_id: int = 0
    """The first producer id no broker has been given yet."""

    def next_block(self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> ProducerIdsBlock:
        """The block the controller hands to `broker_id` next; the ProducerIdsRecord that
        commits it has next_producer_id = `.next_block_first_id`."""
        if size <= 0:
            raise ValueError(f"a producer id block must hold at least one id, not {size}")
        return ProducerIdsBlock(broker_id, self.next_producer_id, size)


@dataclass(frozen=True, slots=True)
class ScramImage:
    """Kafka's ScramImage: per SCRAM mechanism id, each user's credential (salt and keys,
    never a password)."""

    mechanisms: Mapping[int, Mapping[str, ScramCredential]] = field(default_factory=_empty_map)

    def credential(self, mechanism: int, user: str) -> ScramCredential | None:
        return self.mechanisms.get(mechanism, _EMPTY).get(user)

    def users(self) -> dict[str, dict[int, ScramCredential]]:
        """User -> mechanism id -> credential, for every user with one."""
        out: dict[str, dict[int, ScramCredential]] = {}
        for mechanism, by_user in sorted(self.mechanisms.items()):
            for user, credential in by_user.items():
                out.setdefault(user, {})[mechanism] = credential
        return out


@dataclass(frozen=True, slots=True)
class AclsImage:
    """Kafka's AclsImage: every ACL by its id."""

    by_id: Mapping[str, AclBinding] = field(default_factory=_empty_map)

    def bindings(self) -> tuple[AclBinding, ...]:
        return tuple(self.by_id.values())


@dataclass(frozen=True, slots=True)
class MetadataImage:
    provenance: MetadataProvenance = field(default_factory=MetadataProvenance)
    cluster_id: str = ""
    cluster: ClusterImage = field(default_factory=ClusterImage)
    topics: TopicsImage = field(default_factory=TopicsImage)
    configs: ConfigurationsImage = field(default_factory=ConfigurationsImage)
    producer_ids: ProducerIdsImage = field(default_factory=ProducerIdsImage)
    scram: ScramImage = field(default_factory=ScramImage)
    acls: AclsImage = field(default_factory=AclsImage)

    @classmethod
    def empty(cls, cluster_id: str = "") -> MetadataImage:
        return cls(cluster_id=cluster_id)

    @property
    def highest_offset(self) -> int:
        return self.provenance.last_offset

    @property
    def highest_epoch(self) -> int:
        return self.provenance.last_epoch

    @property
    def is_empty(self) -> bool:
        return (
            not self.cluster.brokers
            and not self.topics.by_id
            and not self.configs.resources
            and self.producer_ids.next_producer_id == 0
            and not self.scram.mechanisms
            and not self.acls.by_id
        )
