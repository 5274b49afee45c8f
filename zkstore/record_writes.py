"""Metadata records -> the znode writes Kafka's ZK-mode controller makes for the same change.

Pure (no I/O): `plan_writes(mirror, records, existing)` replays the records on the mirror's
image (so a record that does not fit is refused before anything is written) and returns the
ordered ops plus the mirror after them. The mirror is what the controller believes ZooKeeper
holds: the metadata image, each partition state znode's version (= the partition epoch), which
config entity znodes exist, and the producer-id block's version.

Mapping (Kafka's znodes, see znodes.py):
- TopicRecord + its PartitionRecords: /config/topics/<t> (the topic's configs, written first as
  Kafka's AdminZkClient does), /brokers/topics/<t> (assignment + topic id), .../partitions,
  .../partitions/<p>, .../partitions/<p>/state (version 0).
- PartitionRecord of an existing topic (CreatePartitions): the new partition's znodes and the
  topic znode's assignment.
- PartitionChangeRecord: one setData of the state znode at its current version (compare-and-set;
  ZooKeeper bumps the version as the record bumps the partition epoch); the topic znode too
  when replicas / adding / removing changed.
- RemoveTopicRecord: the topic's znodes (children first, as found in ZooKeeper), its config
  znode and /admin/delete_topics/<t> when present. In ZK mode it is committed only once every
  replica answered StopReplica(delete) (controller.topic_deletion); the deletion's first phase,
  the /admin/delete_topics/<t> marker, is not a record (`deletion_marker_ops`).
- ConfigRecord: /config/topics/<t> (or /config/brokers/<id|<default>>) with the resource's
  configs after the change, plus a /config/changes/config_change_ notification (none for a
  topic created in the same append: brokers read a new topic's config with it).
- ProducerIdsRecord: /latest_producer_id_block (compare-and-set on its version).
- UserScramCredentialRecord / RemoveUserScramCredentialRecord: /config/users/<user> (the name
  URL-encoded as Kafka's Sanitizer does) with every mechanism the user has after the change
  (Kafka's ScramCredentialUtils text), deleted when none is left, plus a `users/<user>`
  /config/changes/config_change_ notification (brokers re-read the user's znode on it).
- AccessControlEntryRecord / RemoveAccessControlEntryRecord (by id, the ACL looked up in the
  mirror's image): per resource pattern touched, /kafka-acl/<ResourceType>/<name> (LITERAL) or
  /kafka-acl-extended/prefixed/<ResourceType>/<name> (PREFIXED) with every ACL the pattern has
  after the append (Kafka's AclAuthorizer JSON; ZooKeeper keeps no ACL ids), deleted when none
  is left, plus one /kafka-acl-changes (or /kafka-acl-extended-changes) acl_changes_
  notification (brokers re-read the resource's znode on it). A resource name that cannot be a
  znode name (Kafka writes it unescaped) is INVALID_REQUEST; nothing is written.
- RegisterBroker/UnregisterBroker/FenceBroker/UnfenceBroker/NoOp: nothing (brokers own their
  ephemerals; fencing is the session's).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from protocol.acls import AclBinding
from protocol.errors import ErrorCode, KafkaError
from protocol.metadata.delta import MetadataDelta, binding_of
from protocol.metadata.image import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    MetadataImage,
    MetadataReplayError,
    PartitionRegistration,
    TopicImage,
)
from protocol.metadata.records import (
    AccessControlEntryRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from protocol.names import topic_name_problem
from protocol.scram import ScramCredential
from zkstore.fenced_writer import CreateOp, DeleteOp, SetDataOp, ZkOp
from zkstore.znodes import (
    DEFAULT_CONFIG_ENTITY,
    PRODUCER_ID_BLOCK_SIZE,
    AclChangeNotificationZNode,
    AclResource,
    AclStoreZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    DeleteTopicZNode,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    ReplicaAssignment,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
    TopicZNode,
    UserScramCredentialsZNode,
    sanitize,
    znode_name_problem,
)

NO_PARTITION_ZNODE = -2
"""Partition version: neither /partitions/<p> nor its state znode exists."""
NO_STATE_ZNODE = -1
"""Partition version: /partitions/<p> exists but has no state znode (a New partition)."""


@dataclass
class ZkMirror:
    """What the controller believes ZooKeeper holds."""

    image: MetadataImage
    partition_versions: dict[tuple[str, int], int] = field(default_factory=dict)
    """(topic id, partition) -> state znode version (NO_STATE_ZNODE / NO_PARTITION_ZNODE)."""
    config_entities: set[tuple[str, str]] = field(default_factory=set)
    """(entity type, entity name) of the /config/<type>/<name> znodes that exist."""
    producer_id_block_version: int = -1
    """Version of /latest_producer_id_block, -1 when absent."""
    controller_epoch: int = 0
    """Written into every partition state znode ("controller_epoch")."""
    acl_resources: set[AclResource] = field(default_factory=set)
    """The resource patterns whose ACL znode exists (/kafka-acl/<type>/<name>, ...)."""

    def partition_version(self, topic_id: str, partition: int) -> int:
        return self.partition_versions.get((topic_id, partition), NO_PARTITION_ZNODE)


@dataclass(frozen=True, slots=True)
class ExistingTopicZNodes:
    """What ZooKeeper holds for a topic about to be deleted (read just before planning)."""

    paths_to_delete: tuple[str, ...]
    """The topic's znodes, children before parents (states, partitions, /partitions, topic)."""
    config_exists: bool = False
    delete_marker_exists: bool = False


@dataclass(frozen=True, slots=True)
class WritePlan:
    ops: tuple[ZkOp, ...]
    image: MetadataImage
    partition_versions: Mapping[tuple[str, int], int]
    """Changed entries only; NO_PARTITION_ZNODE for partitions whose znodes are deleted."""
    config_entities_created: frozenset[tuple[str, str]]
    config_entities_deleted: frozenset[tuple[str, str]]
    producer_id_block_version: int
    acl_resources_created: frozenset[AclResource] = frozenset()
    acl_resources_deleted: frozenset[AclResource] = frozenset()

    def apply_to(self, mirror: ZkMirror) -> None:
        """Make `mirror` what ZooKeeper holds once every op is applied."""
        mirror.image = self.image
        for key, version in self.partition_versions.items():
            if version == NO_PARTITION_ZNODE:
                mirror.partition_versions.pop(key, None)
            else:
                mirror.partition_versions[key] = version
        mirror.config_entities -= self.config_entities_deleted
        mirror.config_entities |= self.config_entities_created
        mirror.producer_id_block_version = self.producer_id_block_version
        mirror.acl_resources -= self.acl_resources_deleted
        mirror.acl_resources |= self.acl_resources_created


def config_entity(record: ConfigRecord) -> tuple[str, str]:
    """The /config/<type>/<name> entity of a ConfigRecord's resource."""
    if record.resource_type == TOPIC_RESOURCE:
        return "topics", record.resource_name
    if record.resource_type == BROKER_RESOURCE:
        return "brokers", record.resource_name or DEFAULT_CONFIG_ENTITY
    raise KafkaError(
        ErrorCode.INVALID_REQUEST,
        f"ConfigRecord for resource type {record.resource_type} has no ZooKeeper znode "
        "(only TOPIC and BROKER configs are stored)",
    )


def change_notification(entity: tuple[str, str]) -> CreateOp:
    """/config/changes/config_change_<seq> naming `entity` (type, znode name): brokers re-read
    the entity's znode on it."""
    return CreateOp(
        ConfigEntityChangeNotificationSequenceZNode.create_path(),
        ConfigEntityChangeNotificationSequenceZNode.encode(f"{entity[0]}/{entity[1]}"),
        sequential=True,
    )


def topic_assignment(topic: TopicImage) -> dict[int, ReplicaAssignment]:
    return {
        p: ReplicaAssignment(reg.replicas, reg.adding_replicas, reg.removing_replicas)
        for p, reg in topic.partitions.items()
    }


def state_data(reg: PartitionRegistration, controller_epoch: int) -> bytes:
    return TopicPartitionStateZNode.encode(
        reg.leader, reg.leader_epoch, reg.isr, controller_epoch, reg.leader_recovery_state
    )


class _Lazy:
    """An op whose data is known only once every record is replayed (a topic's assignment, a
    config entity's full config)."""

    __slots__ = ("create", "frozen", "make", "path")

    def __init__(self, path: str, create: bool, make: Callable[[MetadataImage], bytes]) -> None:
        self.path = path
        self.create = create
        self.make = make
        self.frozen: bytes | None = None

    def resolve(self, image: MetadataImage) -> ZkOp:
        data = self.frozen if self.frozen is not None else self.make(image)
        return CreateOp(self.path, data) if self.create else SetDataOp(self.path, data)


def user_credentials(image: MetadataImage, user: str) -> dict[int, ScramCredential]:
    """Mechanism id -> `user`'s credential in `image`."""
    scram = image.scram
    found = {m: scram.credential(m, user) for m in scram.mechanisms}
    return {m: c for m, c in found.items() if c is not None}


class _LazyUser:
    """A user's /config/users znode: whether it is written or deleted, and with what, is known
    only once every record is replayed (an append may add one mechanism and remove another)."""

    __slots__ = ("existed", "user")

    def __init__(self, user: str, existed: bool) -> None:
        self.user = user
        self.existed = existed

    @property
    def entity(self) -> tuple[str, str]:
        return UserScramCredentialsZNode.ENTITY_TYPE, sanitize(self.user)

    def resolve(self, image: MetadataImage) -> ZkOp | None:
        path = UserScramCredentialsZNode.path(self.user)
        credentials = user_credentials(image, self.user)
        if not credentials:
            return DeleteOp(path) if self.existed else None
        data = UserScramCredentialsZNode.encode(credentials)
        return SetDataOp(path, data) if self.existed else CreateOp(path, data)


def acl_change_notification(resource: AclResource) -> CreateOp:
    """/kafka-acl-changes/acl_changes_<seq> (or the extended one) naming `resource`."""
    return CreateOp(
        AclChangeNotificationZNode.create_path(resource.pattern_type),
        AclChangeNotificationZNode.encode(resource),
        sequential=True,
    )


def acls_by_resource(
    image: MetadataImage, resources: Collection[AclResource]
) -> dict[AclResource, list[AclBinding]]:
    """The ACLs `image` holds for each of `resources` (one pass over the image's ACLs)."""
    found: dict[AclResource, list[AclBinding]] = {r: [] for r in resources}
    for acl in image.acls.by_id.values():
        bindings = found.get(AclResource.of(acl))
        if bindings is not None:
            bindings.append(acl)
    return found


class _LazyAcls:
    """A resource pattern's ACL znode: written, created or deleted as the pattern's ACLs end
    after every record is replayed (an append may delete one ACL and create another)."""

    __slots__ = ("existed", "resource")

    def __init__(self, resource: AclResource, existed: bool) -> None:
        self.resource = resource
        self.existed = existed

    def resolve(self, acls: Sequence[AclBinding]) -> ZkOp | None:
        path = AclStoreZNode.path(self.resource)
        if not acls:
            return DeleteOp(path) if self.existed else None
        data = AclStoreZNode.encode(acls)
        return SetDataOp(path, data) if self.existed else CreateOp(path, data)


class _Planner:
    def __init__(self, mirror: ZkMirror, existing: Mapping[str, ExistingTopicZNodes]) -> None:
        self.mirror = mirror
        self.existing = existing
        self.delta = MetadataDelta(mirror.image)
        self.ops: list[ZkOp | _Lazy | _LazyUser | _LazyAcls] = []
        self.versions: dict[tuple[str, int], int] = {}
        self.created_topics: dict[str, str] = {}  # id -> name, created in this append
        self.topic_ops: dict[str, _Lazy] = {}  # id -> lazy topic znode write
        self.config_ops: dict[tuple[str, str], _Lazy] = {}
        self.user_ops: dict[str, _LazyUser] = {}
        self.acl_ops: dict[AclResource, _LazyAcls] = {}
        self.acls_added: dict[str, AclBinding] = {}  # id -> ACL, created in this append
        self.entities = set(mirror.config_entities)
        self.entities_created: set[tuple[str, str]] = set()
        self.entities_deleted: set[tuple[str, str]] = set()
        self.pid_version = mirror.producer_id_block_version

    # -- lookups over the delta in progress ---------------------------------------------------

    def version(self, topic_id: str, partition: int) -> int:
        key = (topic_id, partition)
        if key in self.versions:
            return self.versions[key]
        return self.mirror.partition_version(topic_id, partition)

    def topic_name(self, topic_id: str) -> str:
        topics = self.delta.topics_delta
        name = topics.topic_name(topic_id) if topics is not None else None
        if name is None:
            topic = self.mirror.image.topics.get_topic_by_id(topic_id)
            name = topic.name if topic is not None else None
        if name is None:
            raise MetadataReplayError(f"no topic with id {topic_id}")
        return name

    def partition(self, topic_id: str, partition: int) -> PartitionRegistration:
        topics = self.delta.topics_delta
        delta = topics.topic_delta(topic_id) if topics is not None else None
        reg = delta.partition(partition) if delta is not None else None
        if reg is None:
            reg = self.mirror.image.topics.get_partition(topic_id, partition)
        if reg is None:
            raise MetadataReplayError(f"no partition {partition} of topic id {topic_id}")
        return reg

    def topic_image(self, topic_id: str) -> TopicImage | None:
        topics = self.delta.topics_delta
        delta = topics.topic_delta(topic_id) if topics is not None else None
        if delta is not None:
            return delta.apply()
        return self.mirror.image.topics.get_topic_by_id(topic_id)

    # -- records ------------------------------------------------------------------------------

    def add(self, record: MetadataRecord) -> None:
        match record:
            case TopicRecord():
                self.delta.replay(record)
                self.topic_created(record)
            case PartitionRecord():
                self.delta.replay(record)
                self.partition_written(record.topic_id, record.partition_id, assignment=True)
            case PartitionChangeRecord():
                self.delta.replay(record)
                assignment = (
                    record.replicas is not None
                    or record.adding_replicas is not None
                    or record.removing_replicas is not None
                )
                self.partition_written(record.topic_id, record.partition_id, assignment=assignment)
            case RemoveTopicRecord():
                name = self.topic_name(record.topic_id)
                before = self.topic_image(record.topic_id)
                self.delta.replay(record)
                self.topic_removed(record.topic_id, name, before)
            case ConfigRecord():
                entity = config_entity(record)
                self.delta.replay(record)
                self.config_changed(record, entity)
            case ProducerIdsRecord():
                self.delta.replay(record)
                self.producer_ids(record)
            case UserScramCredentialRecord() | RemoveUserScramCredentialRecord():
                self.delta.replay(record)
                self.user_changed(record.name)
            case AccessControlEntryRecord():
                self.delta.replay(record)
                self.acl_added(record)
            case RemoveAccessControlEntryRecord():
                removed = self.acl(record.id)
                self.delta.replay(record)  # refuses an id it does not know
                if removed is not None:
                    self.acl_changed(AclResource.of(removed))
            case _:
                self.delta.replay(record)  # brokers and no-ops: nothing in ZooKeeper

    def topic_created(self, record: TopicRecord) -> None:
        name, topic_id = record.name, record.topic_id
        self.created_topics[topic_id] = name
        entity = ("topics", name)
        self.config_write(entity, notify=False)
        lazy = _Lazy(
            TopicZNode.path(name),
            True,
            lambda image: TopicZNode.encode(
                topic_id, topic_assignment(image.topics.by_id[topic_id])
            ),
        )
        self.topic_ops[topic_id] = lazy
        self.ops.append(lazy)
        self.ops.append(CreateOp(TopicPartitionsZNode.path(name)))

    def topic_write(self, topic_id: str) -> None:
        if topic_id in self.topic_ops:
            return
        name = self.topic_name(topic_id)
        lazy = _Lazy(
            TopicZNode.path(name),
            False,
            lambda image: TopicZNode.encode(
                topic_id, topic_assignment(image.topics.by_id[topic_id])
            ),
        )
        self.topic_ops[topic_id] = lazy
        self.ops.append(lazy)

    def partition_written(self, topic_id: str, partition: int, *, assignment: bool) -> None:
        name = self.topic_name(topic_id)
        if assignment:
            self.topic_write(topic_id)
        reg = self.partition(topic_id, partition)
        data = state_data(reg, self.mirror.controller_epoch)
        version = self.version(topic_id, partition)
        if version == NO_PARTITION_ZNODE:
            self.ops.append(CreateOp(TopicPartitionZNode.path(name, partition)))
        if version < 0:
            self.ops.append(CreateOp(TopicPartitionStateZNode.path(name, partition), data))
            self.versions[(topic_id, partition)] = 0
        else:
            self.ops.append(
                SetDataOp(TopicPartitionStateZNode.path(name, partition), data, version)
            )
            self.versions[(topic_id, partition)] = version + 1

    def topic_removed(self, topic_id: str, name: str, before: TopicImage | None) -> None:
        lazy = self.topic_ops.pop(topic_id, None)
        if lazy is not None and before is not None:
            lazy.frozen = TopicZNode.encode(topic_id, topic_assignment(before))
        entity = ("topics", name)
        if topic_id in self.created_topics:
            # Created in this very append: delete what the earlier ops create.
            prefix = TopicZNode.path(name)
            created = [
                op.path
                for op in self.ops
                if isinstance(op, CreateOp | _Lazy)
                and (op.path == prefix or op.path.startswith(prefix + "/"))
                and (not isinstance(op, _Lazy) or op.create)
            ]
            self.ops.extend(DeleteOp(path) for path in reversed(created))
            del self.created_topics[topic_id]
        else:
            found = self.existing.get(name)
            if found is None:
                raise KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"topic {name!r} to remove was not read from ZooKeeper before planning",
                )
            self.ops.extend(DeleteOp(path) for path in found.paths_to_delete)
            if found.config_exists:
                self.entities.add(entity)
            if found.delete_marker_exists:
                self.ops.append(DeleteOp(DeleteTopicZNode.path(name)))
        if before is not None:
            for partition in before.partitions:
                self.versions[(topic_id, partition)] = NO_PARTITION_ZNODE
        self.config_ops.pop(entity, None)
        if entity in self.entities:
            self.ops.append(DeleteOp(ConfigEntityZNode.path(*entity)))
            self.entities.discard(entity)
            self.entities_created.discard(entity)
            self.entities_deleted.add(entity)

    def config_write(self, entity: tuple[str, str], *, notify: bool) -> None:
        if entity in self.config_ops:
            return
        resource_type = TOPIC_RESOURCE if entity[0] == "topics" else BROKER_RESOURCE
        resource_name = "" if entity == ("brokers", DEFAULT_CONFIG_ENTITY) else entity[1]
        create = entity not in self.entities
        lazy = _Lazy(
            ConfigEntityZNode.path(*entity),
            create,
            lambda image: ConfigEntityZNode.encode(
                image.configs.configs(resource_type, resource_name)
            ),
        )
        self.config_ops[entity] = lazy
        self.ops.append(lazy)
        if create:
            self.entities.add(entity)
            self.entities_created.add(entity)
            self.entities_deleted.discard(entity)
        if notify:
            self.ops.append(change_notification(entity))

    def config_changed(self, record: ConfigRecord, entity: tuple[str, str]) -> None:
        created_here = entity[0] == "topics" and entity[1] in self.created_topics.values()
        self.config_write(entity, notify=not created_here)

    def user_changed(self, user: str) -> None:
        if user in self.user_ops:
            return
        lazy = _LazyUser(
            user, existed=(UserScramCredentialsZNode.ENTITY_TYPE, sanitize(user)) in self.entities
        )
        self.user_ops[user] = lazy
        self.ops.append(lazy)
        self.ops.append(change_notification(lazy.entity))

    def users_written(self, image: MetadataImage) -> None:
        """The config entity bookkeeping of the users' znodes, as they resolve on `image`."""
        for lazy in self.user_ops.values():
            entity = lazy.entity
            if user_credentials(image, lazy.user):
                self.entities_deleted.discard(entity)
                if not lazy.existed:
                    self.entities_created.add(entity)
            elif lazy.existed:
                self.entities_deleted.add(entity)

    def acl(self, acl_id: str) -> AclBinding | None:
        """The ACL `acl_id` names so far in this append (None when unknown)."""
        found = self.acls_added.get(acl_id)
        return found if found is not None else self.mirror.image.acls.by_id.get(acl_id)

    def acl_added(self, record: AccessControlEntryRecord) -> None:
        acl = binding_of(record)
        problem = znode_name_problem(acl.resource_name)
        if problem is not None:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"an ACL's resource cannot be stored in ZooKeeper: {problem}",
            )
        replaced = self.acl(record.id)
        if replaced is not None:  # a record reusing an id moves that ACL
            self.acl_changed(AclResource.of(replaced))
        self.acls_added[record.id] = acl
        self.acl_changed(AclResource.of(acl))

    def acl_changed(self, resource: AclResource) -> None:
        if resource in self.acl_ops:
            return
        lazy = _LazyAcls(resource, existed=resource in self.mirror.acl_resources)
        self.acl_ops[resource] = lazy
        self.ops.append(lazy)
        self.ops.append(acl_change_notification(resource))

    def acls_written(
        self, acls: Mapping[AclResource, Sequence[AclBinding]]
    ) -> tuple[frozenset[AclResource], frozenset[AclResource]]:
        """The ACL znodes created and deleted, as they resolve on `acls`."""
        created = {r for r, lazy in self.acl_ops.items() if acls[r] and not lazy.existed}
        deleted = {r for r, lazy in self.acl_ops.items() if not acls[r] and lazy.existed}
        return frozenset(created), frozenset(deleted)

    @staticmethod
    def resolve(
        op: ZkOp | _Lazy | _LazyUser | _LazyAcls,
        image: MetadataImage,
        acls: Mapping[AclResource, Sequence[AclBinding]],
    ) -> ZkOp | None:
        if isinstance(op, _LazyAcls):
            return op.resolve(acls[op.resource])
        if isinstance(op, _Lazy | _LazyUser):
            return op.resolve(image)
        return op

    def producer_ids(self, record: ProducerIdsRecord) -> None:
        block = ProducerIdBlock(
            broker_id=record.broker_id,
            first_producer_id=max(0, record.next_producer_id - PRODUCER_ID_BLOCK_SIZE),
            last_producer_id=record.next_producer_id - 1,
        )
        data = ProducerIdBlockZNode.encode(block)
        if self.pid_version < 0:
            self.ops.append(CreateOp(ProducerIdBlockZNode.PATH, data))
            self.pid_version = 0
        else:
            self.ops.append(SetDataOp(ProducerIdBlockZNode.PATH, data, self.pid_version))
            self.pid_version += 1

    def finish(self) -> WritePlan:
        image = self.delta.apply()
        self.users_written(image)
        acls = acls_by_resource(image, self.acl_ops)
        acls_created, acls_deleted = self.acls_written(acls)
        resolved = (self.resolve(op, image, acls) for op in self.ops)
        return WritePlan(
            ops=tuple(op for op in resolved if op is not None),
            image=image,
            partition_versions=dict(self.versions),
            config_entities_created=frozenset(self.entities_created),
            config_entities_deleted=frozenset(self.entities_deleted),
            producer_id_block_version=self.pid_version,
            acl_resources_created=acls_created,
            acl_resources_deleted=acls_deleted,
        )


def plan_writes(
    mirror: ZkMirror,
    records: Sequence[MetadataRecord],
    existing: Mapping[str, ExistingTopicZNodes] | None = None,
) -> WritePlan:
    """The znode ops for `records` on top of `mirror` (unchanged). `existing` must describe
    every topic a RemoveTopicRecord removes (see `topics_to_read`). A record that does not fit
    the mirror raises KafkaError (UNKNOWN_SERVER_ERROR) naming it; nothing is planned."""
    planner = _Planner(mirror, existing or {})
    for record in records:
        try:
            planner.add(record)
        except MetadataReplayError as exc:
            raise KafkaError(
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"{type(record).__name__} does not fit the metadata in ZooKeeper: {exc}",
            ) from None
    return planner.finish()


def deletion_marker_ops(create: Sequence[str] = (), delete: Sequence[str] = ()) -> tuple[ZkOp, ...]:
    """The ops that queue topics for deletion (/admin/delete_topics/<t>, Kafka's
    DeleteTopicsTopicZNode) and that drop markers naming no topic or written while
    delete.topic.enable is false. Not a record: queueing is the ZK backend's first phase of a
    deletion (see controller.topic_deletion); the RemoveTopicRecord at its end deletes the
    marker with the topic's znodes. The caller leaves out markers that exist already (a create
    of an existing znode fails the whole multi-op)."""
    for name in create:
        problem = topic_name_problem(name)
        if problem is not None:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"deletion marker {name!r}: {problem}"
            )
    return tuple(
        [CreateOp(DeleteTopicZNode.path(n)) for n in create]
        + [DeleteOp(DeleteTopicZNode.path(n)) for n in delete]
    )


def topics_to_read(mirror: ZkMirror, records: Sequence[MetadataRecord]) -> list[str]:
    """Names of the topics whose znodes must be read before planning `records` (those removed
    that existed before this append)."""
    names: list[str] = []
    for record in records:
        if isinstance(record, RemoveTopicRecord):
            topic = mirror.image.topics.get_topic_by_id(record.topic_id)
            if topic is not None:
                names.append(topic.name)
    return names


__all__ = [
    "NO_PARTITION_ZNODE",
    "NO_STATE_ZNODE",
    "ExistingTopicZNodes",
    "WritePlan",
    "ZkMirror",
    "acl_change_notification",
    "acls_by_resource",
    "change_notification",
    "config_entity",
    "deletion_marker_ops",
    "plan_writes",
    "state_data",
    "topic_assignment",
    "topics_to_read",
    "user_credentials",
]
