"""Read the whole ZooKeeper state back as metadata records (a new controller's starting point).

Kafka's controller, on failover, reads brokers, topics, partition states and configs from
ZooKeeper into its context; here the same reads become metadata records the backend-agnostic
controller replays (`LoadedMetadata.offset_records()` / `.image()`), plus what ZooKeeper holds
beyond the image: znode versions for the fenced writer (`.mirror(epoch)`), topics queued in
/admin/delete_topics, a legacy /admin/reassign_partitions request.

Records, in replay order:
- RegisterBrokerRecord per live /brokers/ids/<id>: broker_epoch = the znode's czxid, unfenced
  (in ZK mode a registered broker is live); incarnation_id is derived from the czxid (ZooKeeper
  keeps none).
- TopicRecord + PartitionRecord per partition: replicas / adding / removing from the topic
  znode, leader / ISR / leader epoch / recovery state from the state znode, partition_epoch =
  the state znode's version. A partition without a state znode (New) has leader -1, empty ISR.
  A topic znode without a topic id (written by an old Kafka) gets a new random id, listed in
  `topics_without_id` (the next write of its topic znode stores it).
- ConfigRecord per key of /config/topics/<t> and /config/brokers/<id|<default>>.
- UserScramCredentialRecord per SCRAM mechanism of /config/users/<user> (the znode name
  URL-decoded as Kafka's Sanitizer.desanitize does; other keys, Kafka's user quotas, skipped).
- AccessControlEntryRecord per ACL of /kafka-acl/<ResourceType>/<name> (LITERAL) and
  /kafka-acl-extended/prefixed/<ResourceType>/<name> (PREFIXED). ZooKeeper keeps no ACL ids:
  each gets `protocol.metadata.acls.acl_id` (derived from the ACL, as ZK-mode brokers name it).
- ProducerIdsRecord from /latest_producer_id_block (next id = block_end + 1).

Reads are pipelined (kazoo async calls), so a large cluster loads in a few round trips.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kazoo.exceptions import NoNodeError

from protocol.metadata.acls import acl_id, acl_record
from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    MetadataImage,
    MetadataProvenance,
)
from protocol.metadata.records import (
    NO_LEADER,
    AccessControlEntryRecord,
    ConfigRecord,
    MetadataRecord,
    OffsetRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from protocol.metadata.topic_ids import random_uuid, uuid_to_string
from zkstore.client import ZkClient
from zkstore.record_writes import NO_PARTITION_ZNODE, NO_STATE_ZNODE, ZkMirror
from zkstore.znodes import (
    ACL_PATTERN_TYPES,
    ACL_RESOURCE_TYPES,
    DEFAULT_CONFIG_ENTITY,
    AclResource,
    AclStoreZNode,
    BrokerIdsZNode,
    BrokerIdZNode,
    ClusterIdZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsZNode,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicsZNode,
    TopicZNode,
    UserScramCredentialsZNode,
    ZNodeDecodeError,
    desanitize,
)


@dataclass(frozen=True)
class LoadedMetadata:
    records: tuple[MetadataRecord, ...]
    cluster_id: str | None = None
    controller_id: int | None = None
    controller_epoch: int | None = None
    controller_epoch_zk_version: int | None = None
    partition_versions: dict[tuple[str, int], int] = field(default_factory=dict)
    config_entities: frozenset[tuple[str, str]] = frozenset()
    producer_id_block_version: int = -1
    topics_to_delete: frozenset[str] = frozenset()
    """Topics named in /admin/delete_topics (deletion requested, not finished)."""
    legacy_reassignment: dict[tuple[str, int], tuple[int, ...]] | None = None
    topics_without_id: tuple[str, ...] = ()
    acl_resources: frozenset[AclResource] = frozenset()
    """The resource patterns whose ACL znode exists (even one holding no ACL)."""

    def offset_records(self) -> list[OffsetRecord]:
        """The records at offsets 0..n-1, as a controller or broker replays them."""
        return [OffsetRecord(i, r) for i, r in enumerate(self.records)]

    def image(self) -> MetadataImage:
        delta = MetadataDelta(MetadataImage.empty(self.cluster_id or ""))
        for offset, record in enumerate(self.records):
            delta.replay(record, offset=offset)
        return delta.apply(MetadataProvenance(len(self.records) - 1, -1))

    def mirror(self, controller_epoch: int) -> ZkMirror:
        """What the fenced writer starts from for a controller elected with `controller_epoch`."""
        return ZkMirror(
            image=self.image(),
            partition_versions=dict(self.partition_versions),
            config_entities=set(self.config_entities),
            producer_id_block_version=self.producer_id_block_version,
            controller_epoch=controller_epoch,
            acl_resources=set(self.acl_resources),
        )


def incarnation_from_czxid(czxid: int) -> str:
    """A stable Uuid string per registration (ZooKeeper's broker znode has no incarnation id)."""
    return uuid_to_string(czxid.to_bytes(16, "big", signed=False))


async def _children(zk: ZkClient, path: str) -> list[str]:
    try:
        return sorted(await zk.get_children(path))
    except NoNodeError:
        return []


async def _load_users(
    zk: ZkClient, max_in_flight: int
) -> tuple[list[UserScramCredentialRecord], set[tuple[str, str]]]:
    """Every /config/users/<user>'s SCRAM credentials as records, and the user entities found."""
    entity_type = UserScramCredentialsZNode.ENTITY_TYPE
    names = await _children(zk, f"/config/{entity_type}")
    paths = [ConfigEntityZNode.path(entity_type, n) for n in names]
    found = await zk.get_many(paths, max_in_flight=max_in_flight)
    records: list[UserScramCredentialRecord] = []
    entities: set[tuple[str, str]] = set()
    for name, path, got in zip(names, paths, found, strict=True):
        if got is None:
            continue
        entities.add((entity_type, name))
        user = desanitize(name, path)
        for mechanism, c in sorted(UserScramCredentialsZNode.decode(got[0], path).items()):
            records.append(
                UserScramCredentialRecord(
                    name=user,
                    mechanism=mechanism,
                    salt=c.salt,
                    stored_key=c.stored_key,
                    server_key=c.server_key,
                    iterations=c.iterations,
                )
            )
    return records, entities


async def _acl_resources(zk: ZkClient, max_in_flight: int) -> list[AclResource]:
    """Every resource pattern with an ACL znode, in both stores."""
    kinds = [(p, t) for p in ACL_PATTERN_TYPES for t in ACL_RESOURCE_TYPES]
    children = await zk.get_children_many(
        [AclStoreZNode.type_path(p, t) for p, t in kinds], max_in_flight=max_in_flight
    )
    return [
        AclResource(t, p, name)
        for (p, t), names in zip(kinds, children, strict=True)
        for name in sorted(names or ())
    ]


async def _load_acls(
    zk: ZkClient, max_in_flight: int
) -> tuple[list[AccessControlEntryRecord], set[AclResource]]:
    """Every ACL in ZooKeeper as a record, and the resource patterns whose znode exists."""
    resources = await _acl_resources(zk, max_in_flight)
    found = await zk.get_many(
        [AclStoreZNode.path(r) for r in resources], max_in_flight=max_in_flight
    )
    records: list[AccessControlEntryRecord] = []
    existing: set[AclResource] = set()
    for resource, got in zip(resources, found, strict=True):
        if got is None:
            continue  # deleted while we read
        existing.add(resource)
        acls = AclStoreZNode.decode(resource, got[0])
        records.extend(acl_record(acl_id(a), a) for a in acls)
    return records, existing


async def load_metadata(zk: ZkClient, *, max_in_flight: int = 1000) -> LoadedMetadata:
    """Read brokers, topics, partition states, configs, SCRAM credentials, ACLs, the producer-id
    block and the cluster id. A znode with unreadable data raises ZNodeDecodeError naming it."""
    records: list[MetadataRecord] = []

    found = await zk.get_or_none(ClusterIdZNode.PATH)
    cluster_id = ClusterIdZNode.decode(found[0]) if found else None
    found = await zk.get_or_none(ControllerZNode.PATH)
    controller_id = ControllerZNode.decode(found[0]).broker_id if found else None
    found = await zk.get_or_none(ControllerEpochZNode.PATH)
    epoch = ControllerEpochZNode.decode(found[0]) if found else None
    epoch_version = found[1].version if found else None

    # Brokers.
    broker_ids = sorted(int(b) for b in await _children(zk, BrokerIdsZNode.PATH) if b.isdigit())
    for broker_id, got in zip(
        broker_ids,
        await zk.get_many([BrokerIdZNode.path(b) for b in broker_ids], max_in_flight=max_in_flight),
        strict=True,
    ):
        if got is None:
            continue  # its session ended while we read
        info = BrokerIdZNode.decode(broker_id, got[0])
        records.append(
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id=incarnation_from_czxid(got[1].czxid),
                broker_epoch=got[1].czxid,
                endpoints=info.endpoints,
                rack=info.rack,
                fenced=False,
            )
        )

    # Topics and partitions.
    topics = await _children(zk, TopicsZNode.PATH)
    topic_data = await zk.get_many(
        [TopicZNode.path(t) for t in topics], max_in_flight=max_in_flight
    )
    partition_children = await zk.get_children_many(
        [TopicPartitionsZNode.path(t) for t in topics], max_in_flight=max_in_flight
    )
    assignments = []
    without_id: list[str] = []
    state_paths: list[str] = []
    for topic, got in zip(topics, topic_data, strict=True):
        if got is None:
            continue
        assignment = TopicZNode.decode(topic, got[0])
        topic_id = assignment.topic_id
        if topic_id is None:
            topic_id = random_uuid()
            without_id.append(topic)
        assignments.append((topic, topic_id, assignment))
        state_paths.extend(
            TopicPartitionStateZNode.path(topic, p) for p in sorted(assignment.partitions)
        )
    states = iter(await zk.get_many(state_paths, max_in_flight=max_in_flight))
    children_by_topic = dict(zip(topics, partition_children, strict=True))
    partition_versions: dict[tuple[str, int], int] = {}
    for topic, topic_id, assignment in assignments:
        records.append(TopicRecord(name=topic, topic_id=topic_id))
        existing_partitions = set(children_by_topic.get(topic) or ())
        for partition in sorted(assignment.partitions):
            replicas = assignment.partitions[partition]
            got = next(states)
            if got is None:
                state = None
                version = (
                    NO_STATE_ZNODE if str(partition) in existing_partitions else NO_PARTITION_ZNODE
                )
            else:
                state = TopicPartitionStateZNode.decode(topic, partition, got[0], got[1].version)
                version = got[1].version
            partition_versions[(topic_id, partition)] = version
            records.append(
                PartitionRecord(
                    partition_id=partition,
                    topic_id=topic_id,
                    replicas=replicas.replicas,
                    isr=state.isr if state else (),
                    leader=state.leader if state else NO_LEADER,
                    removing_replicas=replicas.removing_replicas,
                    adding_replicas=replicas.adding_replicas,
                    leader_epoch=state.leader_epoch if state else 0,
                    partition_epoch=max(version, 0),
                    leader_recovery_state=state.leader_recovery_state if state else 0,
                )
            )

    # Configs.
    config_entities: set[tuple[str, str]] = set()
    for entity_type, resource_type in (("topics", TOPIC_RESOURCE), ("brokers", BROKER_RESOURCE)):
        names = await _children(zk, f"/config/{entity_type}")
        paths = [ConfigEntityZNode.path(entity_type, n) for n in names]
        for name, path, got in zip(names, paths, await zk.get_many(paths), strict=True):
            if got is None:
                continue
            config_entities.add((entity_type, name))
            resource_name = (
                "" if entity_type == "brokers" and name == DEFAULT_CONFIG_ENTITY else name
            )
            for key, value in sorted(ConfigEntityZNode.decode(got[0], path).items()):
                records.append(
                    ConfigRecord(
                        resource_type=resource_type,
                        resource_name=resource_name,
                        name=key,
                        value=value,
                    )
                )

    users, user_entities = await _load_users(zk, max_in_flight)
    records.extend(users)
    config_entities |= user_entities
    acls, acl_resources = await _load_acls(zk, max_in_flight)
    records.extend(acls)

    # Producer ids (Kafka creates the znode empty at start-up).
    found = await zk.get_or_none(ProducerIdBlockZNode.PATH)
    pid_version = -1
    if found is not None:
        pid_version = found[1].version
        if found[0]:
            block = ProducerIdBlockZNode.decode(found[0])
            records.append(
                ProducerIdsRecord(
                    broker_id=block.broker_id,
                    broker_epoch=-1,
                    next_producer_id=block.next_producer_id,
                )
            )

    deleting = frozenset(await _children(zk, DeleteTopicsZNode.PATH))
    found = await zk.get_or_none(ReassignPartitionsZNode.PATH)
    reassignment = ReassignPartitionsZNode.decode(found[0]) if found and found[0] else None

    return LoadedMetadata(
        records=tuple(records),
        cluster_id=cluster_id,
        controller_id=controller_id,
        controller_epoch=epoch,
        controller_epoch_zk_version=epoch_version,
        partition_versions=partition_versions,
        config_entities=frozenset(config_entities),
        producer_id_block_version=pid_version,
        topics_to_delete=deleting,
        legacy_reassignment=reassignment,
        topics_without_id=tuple(without_id),
        acl_resources=frozenset(acl_resources),
    )


__all__ = ["LoadedMetadata", "ZNodeDecodeError", "incarnation_from_czxid", "load_metadata"]
