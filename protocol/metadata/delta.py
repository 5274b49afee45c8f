"""MetadataDelta: records replayed on top of a MetadataImage, and what changed (KRaft's model).

`MetadataDelta(image).replay(record)` for each committed record, then `.apply()` for the next
image. Before applying, `topics_delta.local_changes(broker_id)` tells a broker which replicas to
delete, lead and follow, as Kafka's TopicsDelta.localChanges, which is how a KRaft broker derives
what a ZK-mode broker learns from LeaderAndIsr/StopReplica.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from protocol.acls import AclBinding
from protocol.metadata.image import (
    TOPIC_RESOURCE,
    AclsImage,
    BrokerRegistration,
    ClusterImage,
    ConfigResource,
    ConfigurationsImage,
    MetadataImage,
    MetadataProvenance,
    MetadataReplayError,
    PartitionRegistration,
    ProducerIdsImage,
    ScramImage,
    TopicImage,
    TopicsImage,
)
from protocol.metadata.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FenceBrokerRecord,
    FencingChange,
    InControlledShutdownChange,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from protocol.names import TopicPartition
from protocol.scram import ScramCredential


@dataclass(frozen=True, slots=True)
class LocalReplica:
    """A partition a broker hosts: its topic id and registration (Kafka's PartitionInfo)."""

    topic_id: str
    partition: PartitionRegistration


@dataclass(frozen=True, slots=True)
class LocalReplicaChanges:
    """What one broker must do for a delta, as Kafka's LocalReplicaChanges.

    `deletes` carry the id of the topic being removed, which matters when a topic is deleted and
    recreated under the same name in one delta: the old replica is deleted (old id) and the new
    one created (new id, in `leaders` or `followers`).
    """

    deletes: dict[TopicPartition, LocalReplica] = field(default_factory=dict)
    leaders: dict[TopicPartition, LocalReplica] = field(default_factory=dict)
    followers: dict[TopicPartition, LocalReplica] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.deletes or self.leaders or self.followers)


class TopicDelta:
    """Changes to one topic's partitions."""

    __slots__ = ("image", "partition_changes")

    def __init__(self, image: TopicImage) -> None:
        self.image = image
        self.partition_changes: dict[int, PartitionRegistration] = {}

    @property
    def name(self) -> str:
        return self.image.name

    @property
    def topic_id(self) -> str:
        return self.image.topic_id

    def partition(self, partition_id: int) -> PartitionRegistration | None:
        changed = self.partition_changes.get(partition_id)
        return changed if changed is not None else self.image.partitions.get(partition_id)

    def replay_partition(self, record: PartitionRecord) -> None:
        self.partition_changes[record.partition_id] = PartitionRegistration.from_record(record)

    def replay_change(self, record: PartitionChangeRecord) -> None:
        prev = self.partition(record.partition_id)
        if prev is None:
            raise MetadataReplayError(
                f"PartitionChangeRecord for unknown partition {self.name}-{record.partition_id} "
                f"(topic id {self.topic_id})"
            )
        self.partition_changes[record.partition_id] = prev.merge(record)

    def apply(self) -> TopicImage:
        if not self.partition_changes:
            return self.image
        parts = dict(self.image.partitions)
        parts.update(self.partition_changes)
        return replace(self.image, partitions=MappingProxyType(parts))

    def local_changes(self, broker_id: int, changes: LocalReplicaChanges) -> None:
        for pid, part in self.partition_changes.items():
            tp = TopicPartition(self.name, pid)
            prev = self.image.partitions.get(pid)
            if broker_id not in part.replicas:
                if prev is not None and broker_id in prev.replicas:
                    changes.deletes[tp] = LocalReplica(self.topic_id, part)
            elif prev is not None and prev.partition_epoch == part.partition_epoch:
                continue  # replayed but unchanged: nothing for the broker to do
            elif part.leader == broker_id:
                changes.leaders[tp] = LocalReplica(self.topic_id, part)
            else:
                changes.followers[tp] = LocalReplica(self.topic_id, part)


class TopicsDelta:
    """Created, changed and deleted topics."""

    __slots__ = ("changed_topics", "created_topics", "deleted_topic_ids", "image")

    def __init__(self, image: TopicsImage) -> None:
        self.image = image
        self.changed_topics: dict[str, TopicDelta] = {}
        self.created_topics: dict[str, str] = {}
        """Topics created in this delta: name -> id."""
        self.deleted_topic_ids: set[str] = set()
        """Ids of topics of the base image deleted in this delta."""

    def topic_delta(self, topic_id: str) -> TopicDelta | None:
        return self.changed_topics.get(topic_id)

    def _topic_delta_for(self, topic_id: str, what: str) -> TopicDelta:
        delta = self.changed_topics.get(topic_id)
        if delta is not None:
            return delta
        topic = None if topic_id in self.deleted_topic_ids else self.image.by_id.get(topic_id)
        if topic is None:
            raise MetadataReplayError(f"{what} for unknown topic id {topic_id}")
        delta = self.changed_topics[topic_id] = TopicDelta(topic)
        return delta

    def topic_name(self, topic_id: str) -> str | None:
        delta = self.changed_topics.get(topic_id)
        if delta is not None:
            return delta.name
        if topic_id in self.deleted_topic_ids:
            return None
        topic = self.image.by_id.get(topic_id)
        return None if topic is None else topic.name

    def replay_topic(self, record: TopicRecord) -> None:
        if record.topic_id in self.changed_topics or (
            record.topic_id in self.image.by_id and record.topic_id not in self.deleted_topic_ids
        ):
            raise MetadataReplayError(
                f"TopicRecord for {record.name!r} reuses the id {record.topic_id} of a live topic"
            )
        self.changed_topics[record.topic_id] = TopicDelta(TopicImage(record.name, record.topic_id))
        self.created_topics[record.name] = record.topic_id

    def replay_partition(self, record: PartitionRecord) -> None:
        self._topic_delta_for(record.topic_id, "PartitionRecord").replay_partition(record)

    def replay_change(self, record: PartitionChangeRecord) -> None:
        self._topic_delta_for(record.topic_id, "PartitionChangeRecord").replay_change(record)

    def replay_remove(self, record: RemoveTopicRecord) -> str:
        """Remove a topic; returns its name."""
        delta = self.changed_topics.pop(record.topic_id, None)
        if delta is not None and self.created_topics.get(delta.name) == record.topic_id:
            del self.created_topics[delta.name]
            return delta.name  # created and removed within this delta: nothing to delete
        topic = self.image.by_id.get(record.topic_id)
        if topic is None or record.topic_id in self.deleted_topic_ids:
            raise MetadataReplayError(f"RemoveTopicRecord for unknown topic id {record.topic_id}")
        self.deleted_topic_ids.add(record.topic_id)
        return topic.name

    def apply(self) -> TopicsImage:
        if not self.changed_topics and not self.deleted_topic_ids:
            return self.image
        by_id = dict(self.image.by_id)
        by_name = dict(self.image.by_name)
        for topic_id in self.deleted_topic_ids:
            topic = by_id.pop(topic_id)
            if by_name.get(topic.name) is topic:
                del by_name[topic.name]
        for topic_id, delta in self.changed_topics.items():
            topic = delta.apply()
            by_id[topic_id] = topic
            by_name[topic.name] = topic
        return TopicsImage(by_id=MappingProxyType(by_id), by_name=MappingProxyType(by_name))

    def local_changes(self, broker_id: int) -> LocalReplicaChanges:
        """What `broker_id` must delete, lead and follow, as Kafka's TopicsDelta.localChanges:
        replicas of deleted topics and partitions moved away are deleted; changed partitions
        it leads go to `leaders`, those it only replicates to `followers`."""
        changes = LocalReplicaChanges()
        for topic_id in self.deleted_topic_ids:
            topic = self.image.by_id[topic_id]
            for tp, part in topic.topic_partitions():
                if broker_id in part.replicas:
                    changes.deletes[tp] = LocalReplica(topic_id, part)
        for delta in self.changed_topics.values():
            delta.local_changes(broker_id, changes)
        return changes


class ClusterDelta:
    __slots__ = ("changed_brokers", "image")

    def __init__(self, image: ClusterImage) -> None:
        self.image = image
        self.changed_brokers: dict[int, BrokerRegistration | None] = {}
        """Broker id -> new registration, or None when unregistered."""

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self.changed_brokers:
            return self.changed_brokers[broker_id]
        return self.image.brokers.get(broker_id)

    def replay_register(self, record: RegisterBrokerRecord) -> None:
        self.changed_brokers[record.broker_id] = BrokerRegistration.from_record(record)

    def replay_unregister(self, record: UnregisterBrokerRecord) -> None:
        current = self.broker(record.broker_id)
        if current is None or current.epoch != record.broker_epoch:
            raise MetadataReplayError(
                f"UnregisterBrokerRecord for broker {record.broker_id} epoch "
                f"{record.broker_epoch}, which is not registered"
            )
        self.changed_brokers[record.broker_id] = None

    def replay_fencing(self, record: FenceBrokerRecord | UnfenceBrokerRecord) -> None:
        current = self.broker(record.id)
        if current is None or current.epoch != record.epoch:
            raise MetadataReplayError(
                f"{type(record).__name__} for broker {record.id} epoch {record.epoch}, "
                "which is not registered"
            )
        self.changed_brokers[record.id] = replace(
            current, fenced=isinstance(record, FenceBrokerRecord)
        )

    def replay_change(self, record: BrokerRegistrationChangeRecord) -> None:
        """Kafka's ClusterDelta.replay(BrokerRegistrationChangeRecord): fencing and/or entering
        controlled shutdown in one record; a value the record type does not define is an
        inconsistent log, not something to guess about."""
        current = self.broker(record.broker_id)
        if current is None or current.epoch != record.broker_epoch:
            raise MetadataReplayError(
                f"BrokerRegistrationChangeRecord for broker {record.broker_id} epoch "
                f"{record.broker_epoch}, which is not registered"
            )
        try:
            fencing = FencingChange(record.fenced)
        except ValueError:
            raise MetadataReplayError(
                f"BrokerRegistrationChangeRecord for broker {record.broker_id}: unknown value "
                f"{record.fenced} for fenced (-1 unfence, 0 no change, 1 fence)"
            ) from None
        try:
            shutdown = InControlledShutdownChange(record.in_controlled_shutdown)
        except ValueError:
            raise MetadataReplayError(
                f"BrokerRegistrationChangeRecord for broker {record.broker_id}: unknown value "
                f"{record.in_controlled_shutdown} for in_controlled_shutdown (0 no change, "
                "1 in controlled shutdown)"
            ) from None
        changed = current
        if fencing is not FencingChange.NONE:
            changed = replace(changed, fenced=fencing is FencingChange.FENCE)
        if shutdown is InControlledShutdownChange.IN_CONTROLLED_SHUTDOWN:
            changed = replace(changed, in_controlled_shutdown=True)
        if changed != current:
            self.changed_brokers[record.broker_id] = changed

    def apply(self) -> ClusterImage:
        if not self.changed_brokers:
            return self.image
        brokers = dict(self.image.brokers)
        for broker_id, reg in self.changed_brokers.items():
            if reg is None:
                brokers.pop(broker_id, None)
            else:
                brokers[broker_id] = reg
        return ClusterImage(brokers=MappingProxyType(brokers))


class ConfigurationsDelta:
    __slots__ = ("changes", "image")

    def __init__(self, image: ConfigurationsImage) -> None:
        self.image = image
        self.changes: dict[ConfigResource, dict[str, str | None]] = {}

    def replay(self, record: ConfigRecord) -> None:
        resource = ConfigResource(record.resource_type, record.resource_name)
        self.changes.setdefault(resource, {})[record.name] = record.value

    def delete_all(self, resource: ConfigResource) -> None:
        """Drop every config of a resource (its topic was removed)."""
        changes = self.changes.setdefault(resource, {})
        for name in self.image.resources.get(resource, {}):
            changes[name] = None
        for name in changes:
            changes[name] = None

    def apply(self) -> ConfigurationsImage:
        if not self.changes:
            return self.image
        resources = dict(self.image.resources)
        for resource, changes in self.changes.items():
            merged = dict(resources.get(resource, {}))
            for name, value in changes.items():
                if value is None:
                    merged.pop(name, None)
                else:
                    merged[name] = value
            if merged:
                resources[resource] = MappingProxyType(merged)
            else:
                resources.pop(resource, None)
        return ConfigurationsImage(resources=MappingProxyType(resources))


class ScramDelta:
    """Credentials added, replaced (UserScramCredentialRecord) or removed (None)."""

    __slots__ = ("changes", "image")

    def __init__(self, image: ScramImage) -> None:
        self.image = image
        self.changes: dict[tuple[int, str], ScramCredential | None] = {}

    def replay(self, record: UserScramCredentialRecord | RemoveUserScramCredentialRecord) -> None:
        key = (record.mechanism, record.name)
        if isinstance(record, RemoveUserScramCredentialRecord):
            self.changes[key] = None
            return
        self.changes[key] = ScramCredential(
            salt=record.salt,
            stored_key=record.stored_key,
            server_key=record.server_key,
            iterations=record.iterations,
        )

    def apply(self) -> ScramImage:
        if not self.changes:
            return self.image
        mechanisms = {m: dict(users) for m, users in self.image.mechanisms.items()}
        for (mechanism, user), credential in self.changes.items():
            users = mechanisms.setdefault(mechanism, {})
            if credential is None:
                users.pop(user, None)
            else:
                users[user] = credential
        return ScramImage(
            MappingProxyType({m: MappingProxyType(u) for m, u in mechanisms.items() if u})
        )


def binding_of(record: AccessControlEntryRecord) -> AclBinding:
    """The ACL a record stores; MetadataReplayError for ids outside Kafka's enums."""
    try:
        return AclBinding.from_ids(
            record.resource_type, record.resource_name, record.pattern_type, record.principal,
            record.host, record.operation, record.permission_type,
        )  # fmt: skip
    except ValueError as exc:
        raise MetadataReplayError(f"AccessControlEntryRecord {record.id}: {exc}") from None


class AclsDelta:
    """ACLs added (by id) or removed (None)."""

    __slots__ = ("changes", "image")

    def __init__(self, image: AclsImage) -> None:
        self.image = image
        self.changes: dict[str, AclBinding | None] = {}

    def replay(self, record: AccessControlEntryRecord | RemoveAccessControlEntryRecord) -> None:
        if isinstance(record, AccessControlEntryRecord):
            self.changes[record.id] = binding_of(record)
            return
        if record.id not in self.image.by_id and self.changes.get(record.id) is None:
            raise MetadataReplayError(f"RemoveAccessControlEntryRecord for unknown ACL {record.id}")
        self.changes[record.id] = None

    def apply(self) -> AclsImage:
        if not self.changes:
            return self.image
        by_id = dict(self.image.by_id)
        for acl_id, binding in self.changes.items():
            if binding is None:
                by_id.pop(acl_id, None)
            else:
                by_id[acl_id] = binding
        return AclsImage(MappingProxyType(by_id))


class MetadataDelta:
    """Records replayed on top of `image`; `apply()` builds the next image."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._cluster: ClusterDelta | None = None
        self._topics: TopicsDelta | None = None
        self._configs: ConfigurationsDelta | None = None
        self._next_producer_id: int | None = None
        self._scram: ScramDelta | None = None
        self._acls: AclsDelta | None = None
        self._last_offset = image.provenance.last_offset
        self._last_epoch = image.provenance.last_epoch

    @property
    def cluster_delta(self) -> ClusterDelta | None:
        return self._cluster

    @property
    def topics_delta(self) -> TopicsDelta | None:
        return self._topics

    @property
    def configs_delta(self) -> ConfigurationsDelta | None:
        return self._configs

    def _cluster_delta(self) -> ClusterDelta:
        if self._cluster is None:
            self._cluster = ClusterDelta(self.image.cluster)
        return self._cluster

    def _topics_delta(self) -> TopicsDelta:
        if self._topics is None:
            self._topics = TopicsDelta(self.image.topics)
        return self._topics

    def _configs_delta(self) -> ConfigurationsDelta:
        if self._configs is None:
            self._configs = ConfigurationsDelta(self.image.configs)
        return self._configs

    def replay(self, record: MetadataRecord, offset: int = -1, epoch: int = -1) -> None:
        """Replay one committed record; `offset`/`epoch` (when known) become the provenance."""
        if offset >= 0:
            self._last_offset = max(self._last_offset, offset)
        if epoch >= 0:
            self._last_epoch = max(self._last_epoch, epoch)
        match record:
            case TopicRecord():
                self._topics_delta().replay_topic(record)
            case PartitionRecord():
                self._topics_delta().replay_partition(record)
            case PartitionChangeRecord():
                self._topics_delta().replay_change(record)
            case RemoveTopicRecord():
                name = self._topics_delta().replay_remove(record)
                # Kafka drops a removed topic's configs with it (MetadataDelta.replay).
                self._configs_delta().delete_all(ConfigResource(TOPIC_RESOURCE, name))
            case ConfigRecord():
                self._configs_delta().replay(record)
            case RegisterBrokerRecord():
                self._cluster_delta().replay_register(record)
            case UnregisterBrokerRecord():
                self._cluster_delta().replay_unregister(record)
            case FenceBrokerRecord() | UnfenceBrokerRecord():
                self._cluster_delta().replay_fencing(record)
            case BrokerRegistrationChangeRecord():
                self._cluster_delta().replay_change(record)
            case ProducerIdsRecord():
                self._replay_producer_ids(record)
            case UserScramCredentialRecord() | RemoveUserScramCredentialRecord():
                if self._scram is None:
                    self._scram = ScramDelta(self.image.scram)
                self._scram.replay(record)
            case AccessControlEntryRecord() | RemoveAccessControlEntryRecord():
                if self._acls is None:
                    self._acls = AclsDelta(self.image.acls)
                self._acls.replay(record)
            case NoOpRecord():
                pass
            case _:
                raise MetadataReplayError(f"no replay rule for {type(record).__name__}")

    def _replay_producer_ids(self, record: ProducerIdsRecord) -> None:
        # Kafka's ProducerIdControlManager.replay: a block handed out twice would give two
        # producers the same id, so a record that does not move forward is an inconsistent log.
        current = (
            self.image.producer_ids.next_producer_id
            if self._next_producer_id is None
            else self._next_producer_id
        )
        if record.next_producer_id <= current:
            raise MetadataReplayError(
                f"ProducerIdsRecord (broker {record.broker_id}) sets the next producer id to "
                f"{record.next_producer_id}, not above the current {current}"
            )
        self._next_producer_id = record.next_producer_id

    def replay_all(self, records: Iterable[MetadataRecord]) -> MetadataDelta:
        for record in records:
            self.replay(record)
        return self

    def apply(self, provenance: MetadataProvenance | None = None) -> MetadataImage:
        if provenance is None:
            provenance = MetadataProvenance(self._last_offset, self._last_epoch)
        image = self.image
        return MetadataImage(
            provenance=provenance,
            cluster_id=image.cluster_id,
            cluster=image.cluster if self._cluster is None else self._cluster.apply(),
            topics=image.topics if self._topics is None else self._topics.apply(),
            configs=image.configs if self._configs is None else self._configs.apply(),
            producer_ids=image.producer_ids
            if self._next_producer_id is None
            else ProducerIdsImage(self._next_producer_id),
            scram=image.scram if self._scram is None else self._scram.apply(),
            acls=image.acls if self._acls is None else self._acls.apply(),
        )
