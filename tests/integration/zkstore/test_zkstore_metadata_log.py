"""ZkMetadataLog against a real ZooKeeper: records become Kafka's znodes, the loader reads them
back as the same metadata, large changes are split under jute.maxbuffer, zombies are fenced."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import trio

from protocol.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.errors import ErrorCode
from protocol.metadata.acls import acl_id, acl_record
from protocol.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from protocol.metadata.records import (
    ConfigRecord,
    MetadataRecord,
    OffsetRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from protocol.metadata.topic_ids import random_uuid
from protocol.scram import ScramMechanism
from tests.support.zookeeper import ZooKeeperChroot
from zkstore.client import ZkClient
from zkstore.election import register_controller_and_increment_epoch
from zkstore.errors import ControllerMovedError, ZkMetadataWriteError
from zkstore.fenced_writer import JUTE_MAXBUFFER
from zkstore.loader import load_metadata
from zkstore.metadata_log import ZkMetadataLog
from zkstore.registration import ensure_persistent_paths
from zkstore.znodes import (
    AclResource,
    DeleteTopicZNode,
    TopicPartitionStateZNode,
    TopicZNode,
    UserScramCredentialsZNode,
    ZNodeDecodeError,
)

SESSION_S = 2.0


@pytest.fixture
async def zk(zookeeper: ZooKeeperChroot) -> AsyncIterator[ZkClient]:
    async with ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as client:
        await ensure_persistent_paths(client)
        yield client


async def _controller_log(zk: ZkClient, broker_id: int = 1) -> ZkMetadataLog:
    epoch, version = await register_controller_and_increment_epoch(zk, broker_id)
    loaded = await load_metadata(zk)
    return ZkMetadataLog.from_loaded(zk, loaded, epoch=epoch, epoch_zk_version=version)


def _topic(
    name: str, partitions: int, replicas: tuple[int, ...] = (1, 2, 3)
) -> list[MetadataRecord]:
    topic_id = random_uuid()
    records: list[MetadataRecord] = [TopicRecord(name=name, topic_id=topic_id)]
    for p in range(partitions):
        rotated = replicas[p % len(replicas) :] + replicas[: p % len(replicas)]
        records.append(
            PartitionRecord(
                partition_id=p, topic_id=topic_id, replicas=rotated, isr=rotated, leader=rotated[0]
            )
        )
    return records


def _config(resource_type: int, resource: str, name: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(resource_type=resource_type, resource_name=resource, name=name, value=value)


def _without_provenance(image: MetadataImage) -> tuple[object, ...]:
    return (
        image.cluster.brokers,
        dict(image.topics.by_id),
        image.configs.resources,
        image.producer_ids,
    )


async def test_records_become_kafka_znodes_and_load_back(zk: ZkClient) -> None:
    log = await _controller_log(zk)
    seen: list[OffsetRecord] = []

    async def listener(batch: list[OffsetRecord]) -> None:
        seen.extend(batch)

    log.add_listener(listener)
    created = _topic("orders", 3)
    topic_id = created[0].topic_id  # type: ignore[attr-defined]
    records = [*created, _config(TOPIC_RESOURCE, "orders", "retention.ms", "1000")]
    last = await log.append(records)
    assert last == len(records) - 1
    await log.wait_committed(last)
    assert [r.offset for r in seen] == list(range(len(records)))

    data, _ = await zk.get(TopicZNode.path("orders"))
    assert json.loads(data) == {
        "version": 3,
        "topic_id": topic_id,
        "partitions": {"0": [1, 2, 3], "1": [2, 3, 1], "2": [3, 1, 2]},
        "adding_replicas": {},
        "removing_replicas": {},
    }
    data, stat = await zk.get(TopicPartitionStateZNode.path("orders", 1))
    assert json.loads(data) == {
        "controller_epoch": 1,
        "leader": 2,
        "version": 1,
        "leader_epoch": 0,
        "isr": [2, 3, 1],
    }
    assert stat.version == 0
    data, _ = await zk.get("/config/topics/orders")
    assert json.loads(data) == {"version": 1, "config": {"retention.ms": "1000"}}
    assert await zk.get_children("/config/changes") == []  # a new topic's config: no notice

    # A leader change: compare-and-set on the state znode; its version is the partition epoch.
    change = PartitionChangeRecord(partition_id=1, topic_id=topic_id, leader=3, isr=(3, 1))
    await log.append([change])
    data, stat = await zk.get(TopicPartitionStateZNode.path("orders", 1))
    assert stat.version == 1
    assert json.loads(data)["leader"] == 3 and json.loads(data)["leader_epoch"] == 1
    assert log.image.topics.get_partition(topic_id, 1).partition_epoch == 1  # type: ignore[union-attr]

    # A config change on an existing topic: the znode and a change notification.
    await log.append(
        [
            _config(TOPIC_RESOURCE, "orders", "cleanup.policy", "compact"),
            _config(TOPIC_RESOURCE, "orders", "retention.ms", None),
            _config(BROKER_RESOURCE, "", "log.retention.ms", "5000"),
        ]
    )
    data, _ = await zk.get("/config/topics/orders")
    assert json.loads(data)["config"] == {"cleanup.policy": "compact"}
    data, _ = await zk.get("/config/brokers/<default>")
    assert json.loads(data)["config"] == {"log.retention.ms": "5000"}
    changes = sorted(await zk.get_children("/config/changes"))
    assert len(changes) == 2 and all(c.startswith("config_change_") for c in changes)
    paths = [json.loads((await zk.get(f"/config/changes/{c}"))[0]) for c in changes]
    assert paths == [
        {"version": 2, "entity_path": "topics/orders"},
        {"version": 2, "entity_path": "brokers/<default>"},
    ]

    await log.append([ProducerIdsRecord(broker_id=2, broker_epoch=7, next_producer_id=2000)])
    data, _ = await zk.get("/latest_producer_id_block")
    assert json.loads(data) == {
        "version": 1,
        "broker": 2,
        "block_start": "1000",
        "block_end": "1999",
    }

    # Reassignment-style change: the topic znode carries adding/removing replicas.
    await log.append(
        [
            PartitionChangeRecord(
                partition_id=0,
                topic_id=topic_id,
                replicas=(1, 2, 3, 4),
                adding_replicas=(4,),
                removing_replicas=(3,),
            )
        ]
    )
    data, _ = await zk.get(TopicZNode.path("orders"))
    assert json.loads(data)["adding_replicas"] == {"0": [4]}
    assert json.loads(data)["removing_replicas"] == {"0": [3]}

    # Everything reads back as the same metadata.
    loaded = await load_metadata(zk)
    assert loaded.controller_epoch == 1
    assert _without_provenance(loaded.image()) == _without_provenance(log.image)
    assert loaded.partition_versions == log.mirror.partition_versions
    assert loaded.producer_id_block_version == log.mirror.producer_id_block_version


def _scram(user: str, mechanism: ScramMechanism) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(
        name=user,
        mechanism=int(mechanism),
        salt=f"salt-of-{user}".encode(),
        stored_key=bytes([int(mechanism)]) * 32,
        server_key=bytes([int(mechanism) + 2]) * 32,
        iterations=4096 + int(mechanism),
    )


async def test_scram_credentials_load_back_and_a_corrupt_one_is_named(zk: ZkClient) -> None:
    sha256, sha512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
    log = await _controller_log(zk)
    await log.append(
        [
            _scram("alice", sha256),
            _scram("alice", sha512),
            _scram("bob", sha256),
            _scram("c d", sha512),
        ]
    )
    await log.append([RemoveUserScramCredentialRecord(name="bob", mechanism=int(sha256))])
    assert sorted(await zk.get_children("/config/users")) == ["alice", "c%20d"]
    # A key that is not a credential (Kafka keeps user quotas in the same znode) is not loaded.
    data, _ = await zk.get(UserScramCredentialsZNode.path("c d"))
    config = json.loads(data)["config"]
    await zk.set(
        UserScramCredentialsZNode.path("c d"),
        json.dumps({"version": 1, "config": {**config, "producer_byte_rate": "1024"}}).encode(),
    )

    loaded = await load_metadata(zk)
    assert loaded.image().scram == log.image.scram
    assert set(loaded.image().scram.users()) == {"alice", "c d"}
    assert (
        loaded.config_entities
        == log.mirror.config_entities
        == {
            ("users", "alice"),
            ("users", "c%20d"),
        }
    )

    bad = {"SCRAM-SHA-256": "salt=c2FsdA==,stored_key=not base64!,server_key=,iterations=4096"}
    await zk.create("/config/users/mallory", json.dumps({"version": 1, "config": bad}).encode())
    with pytest.raises(ZNodeDecodeError, match=r"^/config/users/mallory: SCRAM-SHA-256: "):
        await load_metadata(zk)


ORDERS = AclResource(ResourceType.TOPIC, PatternType.LITERAL, "orders")
TEAM = AclResource(ResourceType.GROUP, PatternType.PREFIXED, "team-")
KAFKA_CLUSTER = AclResource(ResourceType.CLUSTER, PatternType.LITERAL, "kafka-cluster")


def _acl(resource: AclResource, principal: str, op: AclOperation) -> AclBinding:
    return AclBinding(
        resource.resource_type, resource.name, resource.pattern_type, principal, "*", op,
        AclPermissionType.ALLOW,
    )  # fmt: skip


async def test_acls_load_back_under_derived_ids_and_a_corrupt_one_is_named(
    zookeeper: ZooKeeperChroot, zk: ZkClient
) -> None:
    read = _acl(ORDERS, "User:alice", AclOperation.READ)
    write = _acl(ORDERS, "User:bob", AclOperation.WRITE)
    team = _acl(TEAM, "User:carol", AclOperation.READ)
    cluster = _acl(KAFKA_CLUSTER, "User:admin", AclOperation.ALTER)
    ids = {a: random_uuid() for a in (read, write, team, cluster)}  # as CreateAcls picks them
    log = await _controller_log(zk)
    await log.append([acl_record(ids[a], a) for a in (read, write, team, cluster)])
    await log.append([RemoveAccessControlEntryRecord(id=ids[a]) for a in (write, cluster)])
    assert await zk.get_children("/kafka-acl/Topic") == ["orders"]
    assert await zk.get_children("/kafka-acl/Cluster") == []
    assert await zk.get_children("/kafka-acl-extended/prefixed/Group") == ["team-"]
    data, _ = await zk.get("/kafka-acl/Topic/orders")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
    ]}  # fmt: skip
    assert len(await zk.get_children("/kafka-acl-changes")) == 4  # orders, cluster; twice
    assert len(await zk.get_children("/kafka-acl-extended-changes")) == 1
    # A znode without ACLs (Kafka reads empty data as none) exists all the same.
    await zk.create("/kafka-acl/Topic/empty", b"")

    loaded = await load_metadata(zk)
    assert dict(loaded.image().acls.by_id) == {acl_id(read): read, acl_id(team): team}
    assert loaded.acl_resources == {
        ORDERS,
        TEAM,
        AclResource(ORDERS.resource_type, ORDERS.pattern_type, "empty"),
    }
    assert log.mirror.acl_resources == {ORDERS, TEAM}

    # The next controller deletes by the derived id, and writes to the empty znode in place.
    await zk.delete("/controller")
    async with ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as other:
        successor = await _controller_log(other, broker_id=2)
        late = _acl(AclResource(ResourceType.TOPIC, PatternType.LITERAL, "empty"), "User:d",
                    AclOperation.DESCRIBE)  # fmt: skip
        await successor.append(
            [RemoveAccessControlEntryRecord(id=acl_id(team)), acl_record(random_uuid(), late)]
        )
        assert await zk.get_children("/kafka-acl-extended/prefixed/Group") == []
        data, _ = await zk.get("/kafka-acl/Topic/empty")
        assert [a["operation"] for a in json.loads(data)["acls"]] == ["Describe"]

    bad = {"version": 1, "acls": [{"principal": "User:x", "permissionType": "Allow",
                                   "operation": "Teleport", "host": "*"}]}  # fmt: skip
    await zk.create("/kafka-acl/Group/mallory", json.dumps(bad).encode())
    with pytest.raises(ZNodeDecodeError, match=r"^/kafka-acl/Group/mallory: unknown operation"):
        await load_metadata(zk)


async def test_topic_deletion_removes_its_znodes_and_the_admin_request(zk: ZkClient) -> None:
    log = await _controller_log(zk)
    records = _topic("doomed", 2)
    topic_id = records[0].topic_id  # type: ignore[attr-defined]
    await log.append([*records, _config(TOPIC_RESOURCE, "doomed", "retention.ms", "1")])
    await zk.create(DeleteTopicZNode.path("doomed"))
    await log.append([RemoveTopicRecord(topic_id=topic_id)])
    assert await zk.exists(TopicZNode.path("doomed")) is None
    assert await zk.exists("/config/topics/doomed") is None
    assert await zk.exists(DeleteTopicZNode.path("doomed")) is None
    assert log.image.topics.get_topic("doomed") is None

    # Recreated under the same name: a new id, fresh state znodes (versions from 0).
    again = _topic("doomed", 1)
    await log.append(again)
    loaded = await load_metadata(zk)
    assert [r for r in loaded.records if isinstance(r, TopicRecord)] == [again[0]]
    assert loaded.partition_versions == {(again[0].topic_id, 0): 0}  # type: ignore[attr-defined]


async def test_a_large_change_is_split_into_multi_ops_under_jute_maxbuffer(zk: ZkClient) -> None:
    log = await _controller_log(zk)
    # ~3 creates per partition at ~200 bytes each: 4000 partitions need ~2.5 MB of requests.
    records = _topic("wide", 4000, replicas=tuple(range(1, 10)))
    topic_id = records[0].topic_id  # type: ignore[attr-defined]
    await log.append(records)
    assert log.last_write_multi_ops >= 2
    assert len(await zk.get_children("/brokers/topics/wide/partitions")) == 4000
    changes = [
        PartitionChangeRecord(partition_id=p, topic_id=topic_id, isr=(1 + p % 9,))
        for p in range(4000)
    ]
    await log.append(changes)
    loaded = await load_metadata(zk)
    assert _without_provenance(loaded.image()) == _without_provenance(log.image)
    assert set(loaded.partition_versions.values()) == {1}
    assert loaded.image().topics.get_partition(topic_id, 7).isr == (8,)  # type: ignore[union-attr]
    assert JUTE_MAXBUFFER == 1024 * 1024 - 1


async def test_zookeeper_refuses_an_unsplit_request_over_jute_maxbuffer(zk: ZkClient) -> None:
    """Why the split matters: the same change in one multi-op is refused by the server."""
    epoch, version = await register_controller_and_increment_epoch(zk, 1)
    unsplit = ZkMetadataLog(zk, epoch=epoch, epoch_zk_version=version, max_request_bytes=8 << 20)
    with pytest.raises(ZkMetadataWriteError):
        await unsplit.append(_topic("too-wide", 4000, replicas=tuple(range(1, 10))))
    assert await zk.exists(TopicZNode.path("too-wide")) is None


async def test_a_zombie_controller_is_fenced_and_changes_nothing(
    zookeeper: ZooKeeperChroot, zk: ZkClient
) -> None:
    zombie = await _controller_log(zk, broker_id=1)
    records = _topic("t", 1)
    topic_id = records[0].topic_id  # type: ignore[attr-defined]
    await zombie.append(records)
    # Another broker is elected (the zombie's /controller went with a session; here we delete
    # it by hand): /controller_epoch moves to 2.
    await zk.delete("/controller")
    async with ZkClient(zookeeper.hosts, session_timeout_s=SESSION_S) as other:
        active = await _controller_log(other, broker_id=2)
        assert active.epoch == 2
        before = await load_metadata(zk)
        change = PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=2, isr=(2,))
        with pytest.raises(ControllerMovedError) as raised:
            await zombie.append([change, *_topic("zombie-topic", 1)])
        assert raised.value.code == ErrorCode.NOT_CONTROLLER
        after = await load_metadata(zk)
        assert after.records == before.records
        assert after.partition_versions == before.partition_versions
        # Fenced for good; the active controller writes.
        with pytest.raises(ControllerMovedError):
            await zombie.append([change])
        await active.append([change])
        data, stat = await zk.get(TopicPartitionStateZNode.path("t", 0))
        assert json.loads(data)["controller_epoch"] == 2 and stat.version == 1


async def test_records_that_do_not_fit_write_nothing(zk: ZkClient) -> None:
    log = await _controller_log(zk)
    bad = PartitionChangeRecord(partition_id=0, topic_id=random_uuid(), leader=1)
    with pytest.raises(Exception, match="does not fit"):
        await log.append([*_topic("fine", 1), bad])
    assert await zk.exists(TopicZNode.path("fine")) is None
    assert log.committed_offset == -1
    await log.append(_topic("fine", 1))  # still usable
    with trio.fail_after(1):
        await log.wait_committed(0)
