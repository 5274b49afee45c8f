"""Records -> znode ops, and the split of ops into multi-ops under jute.maxbuffer (pure)."""

from __future__ import annotations

import itertools
import json

import pytest

from protocol.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.errors import ErrorCode, KafkaError
from protocol.metadata.delta import MetadataDelta
from protocol.metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from protocol.metadata.records import (
    AccessControlEntryRecord,
    ConfigRecord,
    FenceBrokerRecord,
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
    UserScramCredentialRecord,
)
from protocol.scram import ScramCredential, ScramMechanism
from zkstore.errors import ZNodeTooLargeError
from zkstore.fenced_writer import (
    JUTE_MAXBUFFER,
    CheckOp,
    CreateOp,
    DeleteOp,
    SetDataOp,
    epoch_check,
    op_size,
    request_size,
    split_ops,
)
from zkstore.record_writes import (
    NO_PARTITION_ZNODE,
    NO_STATE_ZNODE,
    ExistingTopicZNodes,
    ZkMirror,
    plan_writes,
    topics_to_read,
)
from zkstore.znodes import AclResource

TID = "AAAAAAAAAAAAAAAAAAAAAg"
T = "/brokers/topics/t"


def cfg(name: str, key: str, value: str | None, kind: int = TOPIC_RESOURCE) -> ConfigRecord:
    return ConfigRecord(resource_type=kind, resource_name=name, name=key, value=value)


def part(p: int, replicas: tuple[int, ...] = (1, 2), tid: str = TID) -> PartitionRecord:
    return PartitionRecord(
        partition_id=p, topic_id=tid, replicas=replicas, isr=replicas, leader=replicas[0]
    )


def mirror_with(
    records: list[MetadataRecord], versions: dict | None = None, **kw: object
) -> ZkMirror:
    image = MetadataDelta(MetadataImage.empty()).replay_all(records).apply()
    return ZkMirror(image, dict(versions or {}), controller_epoch=4, **kw)  # type: ignore[arg-type]


def shape(ops: object) -> list[tuple[str, str]]:
    return [(type(op).__name__, op.path) for op in ops]  # type: ignore[attr-defined]


def test_topic_creation_writes_config_then_topic_then_partition_states() -> None:
    plan = plan_writes(
        ZkMirror(MetadataImage.empty(), controller_epoch=4),
        [
            TopicRecord(name="t", topic_id=TID),
            part(0),
            part(1, (2, 1)),
            cfg("t", "retention.ms", "9"),
        ],
    )
    assert shape(plan.ops) == [
        ("CreateOp", "/config/topics/t"),
        ("CreateOp", T),
        ("CreateOp", f"{T}/partitions"),
        ("CreateOp", f"{T}/partitions/0"),
        ("CreateOp", f"{T}/partitions/0/state"),
        ("CreateOp", f"{T}/partitions/1"),
        ("CreateOp", f"{T}/partitions/1/state"),
    ]
    assert json.loads(plan.ops[0].data) == {"version": 1, "config": {"retention.ms": "9"}}  # type: ignore[union-attr]
    assert json.loads(plan.ops[1].data)["partitions"] == {"0": [1, 2], "1": [2, 1]}  # type: ignore[union-attr]
    assert json.loads(plan.ops[6].data) == {  # type: ignore[union-attr]
        "controller_epoch": 4,
        "leader": 2,
        "version": 1,
        "leader_epoch": 0,
        "isr": [2, 1],
    }
    assert plan.partition_versions == {(TID, 0): 0, (TID, 1): 0}
    assert plan.config_entities_created == {("topics", "t")}


def test_partition_changes_are_compare_and_set_per_record() -> None:
    base = [TopicRecord(name="t", topic_id=TID), part(0, (1, 2, 3))]
    mirror = mirror_with(base, {(TID, 0): 5})
    plan = plan_writes(
        mirror,
        [
            PartitionChangeRecord(partition_id=0, topic_id=TID, isr=(1, 2)),
            PartitionChangeRecord(partition_id=0, topic_id=TID, leader=2),
        ],
    )
    assert [(type(o).__name__, o.version) for o in plan.ops] == [("SetDataOp", 5), ("SetDataOp", 6)]  # type: ignore[union-attr]
    assert json.loads(plan.ops[1].data)["leader_epoch"] == 1  # type: ignore[union-attr]
    assert plan.partition_versions == {(TID, 0): 7}
    assert mirror.partition_versions == {(TID, 0): 5}  # the mirror changes only on apply_to
    plan.apply_to(mirror)
    assert mirror.partition_versions == {(TID, 0): 7}


def test_reassignment_updates_the_topic_znode_and_a_new_partition_gets_its_znodes() -> None:
    base = [TopicRecord(name="t", topic_id=TID), part(0)]
    plan = plan_writes(
        mirror_with(base, {(TID, 0): 0}),
        [
            PartitionChangeRecord(
                partition_id=0, topic_id=TID, replicas=(1, 2, 3), adding_replicas=(3,)
            ),
            part(1),
        ],
    )
    assert shape(plan.ops) == [
        ("SetDataOp", T),
        ("SetDataOp", f"{T}/partitions/0/state"),
        ("CreateOp", f"{T}/partitions/1"),
        ("CreateOp", f"{T}/partitions/1/state"),
    ]
    topic = json.loads(plan.ops[0].data)  # type: ignore[union-attr]
    assert topic["partitions"] == {"0": [1, 2, 3], "1": [1, 2]}
    assert topic["adding_replicas"] == {"0": [3]}


def test_a_new_partition_without_state_znode_gets_one() -> None:
    base = [TopicRecord(name="t", topic_id=TID), part(0)]
    plan = plan_writes(
        mirror_with(base, {(TID, 0): NO_STATE_ZNODE}),
        [PartitionChangeRecord(partition_id=0, topic_id=TID, leader=1)],
    )
    assert shape(plan.ops) == [("CreateOp", f"{T}/partitions/0/state")]


def test_topic_removal_deletes_what_zookeeper_holds() -> None:
    base = [TopicRecord(name="t", topic_id=TID), part(0), cfg("t", "a", "b")]
    mirror = mirror_with(base, {(TID, 0): 3}, config_entities={("topics", "t")})
    records: list[MetadataRecord] = [RemoveTopicRecord(topic_id=TID)]
    assert topics_to_read(mirror, records) == ["t"]
    existing = {
        "t": ExistingTopicZNodes(
            (f"{T}/partitions/0/state", f"{T}/partitions/0", f"{T}/partitions", T),
            config_exists=True,
            delete_marker_exists=True,
        )
    }
    plan = plan_writes(mirror, records, existing)
    assert shape(plan.ops) == [
        ("DeleteOp", f"{T}/partitions/0/state"),
        ("DeleteOp", f"{T}/partitions/0"),
        ("DeleteOp", f"{T}/partitions"),
        ("DeleteOp", T),
        ("DeleteOp", "/admin/delete_topics/t"),
        ("DeleteOp", "/config/topics/t"),
    ]
    assert plan.partition_versions == {(TID, 0): NO_PARTITION_ZNODE}
    plan.apply_to(mirror)
    assert mirror.partition_versions == {} and mirror.config_entities == set()
    with pytest.raises(KafkaError, match="not read from ZooKeeper"):
        plan_writes(mirror_with(base, {(TID, 0): 3}), records, {})


def test_created_and_removed_in_one_append_cancels_out() -> None:
    plan = plan_writes(
        ZkMirror(MetadataImage.empty()),
        [TopicRecord(name="t", topic_id=TID), part(0), RemoveTopicRecord(topic_id=TID)],
    )
    creates = [op.path for op in plan.ops if isinstance(op, CreateOp)]
    deletes = [op.path for op in plan.ops if isinstance(op, DeleteOp)]
    assert sorted(creates) == sorted(deletes)
    assert deletes[0] == f"{T}/partitions/0/state"


def test_config_changes_write_the_whole_config_and_notify() -> None:
    base = [TopicRecord(name="t", topic_id=TID), part(0), cfg("t", "a", "1")]
    plan = plan_writes(
        mirror_with(base, {(TID, 0): 0}, config_entities={("topics", "t")}),
        [
            cfg("t", "b", "2"),
            cfg("t", "a", None),
            cfg("", "log.retention.ms", "5", BROKER_RESOURCE),
            cfg("3", "x", "y", BROKER_RESOURCE),
        ],
    )
    assert shape(plan.ops) == [
        ("SetDataOp", "/config/topics/t"),
        ("CreateOp", "/config/changes/config_change_"),
        ("CreateOp", "/config/brokers/<default>"),
        ("CreateOp", "/config/changes/config_change_"),
        ("CreateOp", "/config/brokers/3"),
        ("CreateOp", "/config/changes/config_change_"),
    ]
    assert json.loads(plan.ops[0].data)["config"] == {"b": "2"}  # type: ignore[union-attr]
    assert all(op.sequential for op in plan.ops if op.path.startswith("/config/changes"))  # type: ignore[union-attr]
    assert json.loads(plan.ops[5].data) == {"version": 2, "entity_path": "brokers/3"}  # type: ignore[union-attr]
    with pytest.raises(KafkaError, match="resource type 8"):
        plan_writes(ZkMirror(MetadataImage.empty()), [cfg("g", "k", "v", 8)])


def test_producer_ids_broker_records_and_noops() -> None:
    mirror = ZkMirror(MetadataImage.empty(), producer_id_block_version=0)
    plan = plan_writes(
        mirror,
        [
            RegisterBrokerRecord(broker_id=1, incarnation_id="x", broker_epoch=10),
            FenceBrokerRecord(id=1, epoch=10),
            NoOpRecord(),
            ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=1000),
        ],
    )
    assert len(plan.ops) == 1
    op = plan.ops[0]
    assert isinstance(op, SetDataOp) and op.version == 0
    assert json.loads(op.data) == {
        "version": 1,
        "broker": 1,
        "block_start": "0",
        "block_end": "999",
    }
    assert plan.producer_id_block_version == 1
    assert isinstance(
        plan_writes(
            ZkMirror(MetadataImage.empty()),
            [ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=1000)],
        ).ops[0],
        CreateOp,
    )


def test_records_that_do_not_fit_are_refused() -> None:
    with pytest.raises(KafkaError, match="PartitionChangeRecord does not fit"):
        plan_writes(
            ZkMirror(MetadataImage.empty()),
            [PartitionChangeRecord(partition_id=0, topic_id=TID, leader=1)],
        )


# -- SCRAM credentials: /config/users/<user> ------------------------------------------------------

SHA256 = int(ScramMechanism.SCRAM_SHA_256)
SHA512 = int(ScramMechanism.SCRAM_SHA_512)
USER = "alice smith"
USER_ZNODE = "/config/users/alice%20smith"  # Kafka's Sanitizer: a space is %20, never '+'


def scram(mechanism: int, user: str = USER, iterations: int = 4096) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(
        name=user,
        mechanism=mechanism,
        salt=b"salt-of-12-bytes",
        stored_key=bytes([mechanism]) * 32,
        server_key=bytes([mechanism + 1]) * 32,
        iterations=iterations,
    )


def credential_text(record: UserScramCredentialRecord) -> str:
    return ScramCredential(
        record.salt, record.stored_key, record.server_key, record.iterations
    ).to_text()


def user_change(entity_name: str = "alice%20smith") -> tuple[str, dict[str, object]]:
    return ("/config/changes/config_change_", {"version": 2, "entity_path": f"users/{entity_name}"})


def decoded(ops: object) -> list[tuple[str, str, object]]:
    """(op, path, JSON data or None) per op."""
    return [
        (type(op).__name__, op.path, json.loads(op.data) if getattr(op, "data", b"") else None)  # type: ignore[attr-defined]
        for op in ops  # type: ignore[attr-defined]
    ]


def test_a_first_credential_creates_the_user_znode_in_kafka_form_and_notifies() -> None:
    mirror = ZkMirror(MetadataImage.empty())
    record = scram(SHA256)
    plan = plan_writes(mirror, [record])
    assert decoded(plan.ops) == [
        (
            "CreateOp",
            USER_ZNODE,
            {"version": 1, "config": {"SCRAM-SHA-256": credential_text(record)}},
        ),
        ("CreateOp", *user_change()),
    ]
    assert credential_text(record).startswith("salt=c2FsdC1vZi0xMi1ieXRlcw==,stored_key=")
    assert plan.ops[1].sequential  # type: ignore[union-attr]
    assert plan.config_entities_created == {("users", "alice%20smith")}
    plan.apply_to(mirror)
    assert mirror.config_entities == {("users", "alice%20smith")}
    assert mirror.image.scram.credential(SHA256, USER) is not None


def test_a_second_mechanism_rewrites_the_znode_with_both() -> None:
    first = scram(SHA256)
    mirror = mirror_with([first], config_entities={("users", "alice%20smith")})
    second = scram(SHA512, iterations=8192)
    plan = plan_writes(mirror, [second])
    assert decoded(plan.ops) == [
        (
            "SetDataOp",
            USER_ZNODE,
            {
                "version": 1,
                "config": {
                    "SCRAM-SHA-256": credential_text(first),
                    "SCRAM-SHA-512": credential_text(second),
                },
            },
        ),
        ("CreateOp", *user_change()),
    ]
    assert plan.config_entities_created == plan.config_entities_deleted == frozenset()


def test_removing_one_mechanism_keeps_the_other() -> None:
    kept = scram(SHA512)
    mirror = mirror_with([scram(SHA256), kept], config_entities={("users", "alice%20smith")})
    plan = plan_writes(mirror, [RemoveUserScramCredentialRecord(name=USER, mechanism=SHA256)])
    assert decoded(plan.ops) == [
        (
            "SetDataOp",
            USER_ZNODE,
            {"version": 1, "config": {"SCRAM-SHA-512": credential_text(kept)}},
        ),
        ("CreateOp", *user_change()),
    ]


def test_removing_the_last_mechanism_deletes_the_znode() -> None:
    mirror = mirror_with(
        [scram(SHA256), scram(SHA256, user="bob")],
        config_entities={("users", "alice%20smith"), ("users", "bob"), ("topics", "t")},
    )
    plan = plan_writes(mirror, [RemoveUserScramCredentialRecord(name=USER, mechanism=SHA256)])
    assert decoded(plan.ops) == [("DeleteOp", USER_ZNODE, None), ("CreateOp", *user_change())]
    assert plan.config_entities_deleted == {("users", "alice%20smith")}
    plan.apply_to(mirror)
    assert mirror.config_entities == {("users", "bob"), ("topics", "t")}
    assert mirror.image.scram.users() == {
        "bob": {SHA256: mirror.image.scram.credential(SHA256, "bob")}
    }


def test_one_append_writes_each_user_once_as_it_ends() -> None:
    mirror = mirror_with([scram(SHA256)], config_entities={("users", "alice%20smith")})
    replaced = scram(SHA256, iterations=5000)
    plan = plan_writes(
        mirror,
        [
            RemoveUserScramCredentialRecord(name=USER, mechanism=SHA256),
            replaced,
            scram(SHA256, user="*/é"),
            RemoveUserScramCredentialRecord(name="*/é", mechanism=SHA256),
        ],
    )
    # alice ends with the new credential: one write; "*/é" was added and removed: no znode,
    # and Kafka's Sanitizer encodes '*' and '/' too, the name's UTF-8 bytes in upper-case hex.
    assert decoded(plan.ops) == [
        (
            "SetDataOp",
            USER_ZNODE,
            {"version": 1, "config": {"SCRAM-SHA-256": credential_text(replaced)}},
        ),
        ("CreateOp", *user_change()),
        ("CreateOp", *user_change("%2A%2F%C3%A9")),
    ]
    assert plan.config_entities_created == plan.config_entities_deleted == frozenset()


# -- ACLs: /kafka-acl/<ResourceType>/<name>, /kafka-acl-extended/prefixed/... ------------------------

LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ORDERS = AclResource(ResourceType.TOPIC, LIT, "orders")
TEAM = AclResource(ResourceType.GROUP, PRE, "team-")
ORDERS_ZNODE = "/kafka-acl/Topic/orders"
TEAM_ZNODE = "/kafka-acl-extended/prefixed/Group/team-"


def ace(
    acl_id: str,
    resource: AclResource = ORDERS,
    principal: str = "User:alice",
    op: AclOperation = AclOperation.READ,
) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=int(resource.resource_type),
        resource_name=resource.name,
        pattern_type=int(resource.pattern_type),
        principal=principal,
        host="*",
        operation=int(op),
        permission_type=int(AclPermissionType.ALLOW),
    )


def entry(principal: str = "User:alice", op: str = "Read") -> dict[str, str]:
    return {"principal": principal, "permissionType": "Allow", "operation": op, "host": "*"}


def acl_ops(ops: object) -> list[tuple[str, str, object]]:
    """(op, path, data) per op: ACL znodes and extended notifications as JSON, literal
    notifications as text."""
    out = []
    for op in ops:  # type: ignore[attr-defined]
        data = getattr(op, "data", b"")
        if op.path.startswith("/kafka-acl-changes/"):
            value: object = data.decode()
        else:
            value = json.loads(data) if data else None
        out.append((type(op).__name__, op.path, value))
    return out


ORDERS_CHANGE = ("CreateOp", "/kafka-acl-changes/acl_changes_", "TOPIC:orders")
TEAM_CHANGE = (
    "CreateOp",
    "/kafka-acl-extended-changes/acl_changes_",
    {"version": 1, "resourceType": "GROUP", "name": "team-", "patternType": "PREFIXED"},
)


def test_first_acls_create_each_resource_znode_once_in_kafka_form_and_notify() -> None:
    mirror = ZkMirror(MetadataImage.empty())
    plan = plan_writes(
        mirror,
        [
            ace("AAAAAAAAAAAAAAAAAAAAAw"),
            ace("AAAAAAAAAAAAAAAAAAAABA", TEAM, principal="User:bob"),
            ace("AAAAAAAAAAAAAAAAAAAABQ", op=AclOperation.WRITE),
        ],
    )
    assert acl_ops(plan.ops) == [
        ("CreateOp", ORDERS_ZNODE, {"version": 1, "acls": [entry(), entry(op="Write")]}),
        ORDERS_CHANGE,
        ("CreateOp", TEAM_ZNODE, {"version": 1, "acls": [entry("User:bob")]}),
        TEAM_CHANGE,
    ]
    assert all(op.sequential for op in plan.ops[1::2])  # type: ignore[union-attr]
    assert plan.acl_resources_created == {ORDERS, TEAM}
    plan.apply_to(mirror)
    assert mirror.acl_resources == {ORDERS, TEAM}
    assert len(mirror.image.acls.by_id) == 3


def test_another_acl_rewrites_the_znode_with_every_acl_of_the_resource() -> None:
    mirror = mirror_with([ace("AAAAAAAAAAAAAAAAAAAAAw"), ace("AAAAAAAAAAAAAAAAAAAABA", TEAM)],
                         acl_resources={ORDERS, TEAM})  # fmt: skip
    plan = plan_writes(mirror, [ace("AAAAAAAAAAAAAAAAAAAABQ", principal="User:carol")])
    assert acl_ops(plan.ops) == [
        ("SetDataOp", ORDERS_ZNODE, {"version": 1, "acls": [entry(), entry("User:carol")]}),
        ORDERS_CHANGE,
    ]
    assert plan.acl_resources_created == plan.acl_resources_deleted == frozenset()


def test_removing_by_id_rewrites_the_rest_and_the_last_one_deletes_the_znode() -> None:
    mirror = mirror_with(
        [
            ace("AAAAAAAAAAAAAAAAAAAAAw"),
            ace("AAAAAAAAAAAAAAAAAAAABA", op=AclOperation.DESCRIBE),
            ace("AAAAAAAAAAAAAAAAAAAABQ", TEAM),
        ],
        acl_resources={ORDERS, TEAM},
    )
    plan = plan_writes(
        mirror,
        [
            RemoveAccessControlEntryRecord(id="AAAAAAAAAAAAAAAAAAAAAw"),
            RemoveAccessControlEntryRecord(id="AAAAAAAAAAAAAAAAAAAABQ"),
        ],
    )
    assert acl_ops(plan.ops) == [
        ("SetDataOp", ORDERS_ZNODE, {"version": 1, "acls": [entry(op="Describe")]}),
        ORDERS_CHANGE,
        ("DeleteOp", TEAM_ZNODE, None),
        TEAM_CHANGE,
    ]
    assert plan.acl_resources_deleted == {TEAM}
    plan.apply_to(mirror)
    assert mirror.acl_resources == {ORDERS}
    assert list(mirror.image.acls.by_id) == ["AAAAAAAAAAAAAAAAAAAABA"]


def test_one_append_writes_each_resource_once_as_it_ends() -> None:
    mirror = mirror_with([ace("AAAAAAAAAAAAAAAAAAAAAw")], acl_resources={ORDERS})
    plan = plan_writes(
        mirror,
        [
            RemoveAccessControlEntryRecord(id="AAAAAAAAAAAAAAAAAAAAAw"),
            ace("AAAAAAAAAAAAAAAAAAAABA", op=AclOperation.ALTER),
            ace("AAAAAAAAAAAAAAAAAAAABQ", TEAM),
            RemoveAccessControlEntryRecord(id="AAAAAAAAAAAAAAAAAAAABQ"),
        ],
    )
    # orders ends with the new ACL only: one write; team- was created and removed: no znode.
    assert acl_ops(plan.ops) == [
        ("SetDataOp", ORDERS_ZNODE, {"version": 1, "acls": [entry(op="Alter")]}),
        ORDERS_CHANGE,
        TEAM_CHANGE,
    ]
    assert plan.acl_resources_created == plan.acl_resources_deleted == frozenset()


def test_acl_records_that_cannot_be_stored_are_refused() -> None:
    mirror = mirror_with([ace("AAAAAAAAAAAAAAAAAAAAAw")], acl_resources={ORDERS})
    with pytest.raises(KafkaError, match="RemoveAccessControlEntryRecord does not fit") as raised:
        plan_writes(mirror, [RemoveAccessControlEntryRecord(id="AAAAAAAAAAAAAAAAAAAABA")])
    assert raised.value.code is ErrorCode.UNKNOWN_SERVER_ERROR
    slashed = AclResource(ResourceType.GROUP, LIT, "team/a")
    with pytest.raises(KafkaError, match="cannot be stored in ZooKeeper") as raised:
        plan_writes(mirror, [ace("AAAAAAAAAAAAAAAAAAAABA", slashed)])
    assert raised.value.code is ErrorCode.INVALID_REQUEST


# -- splitting -----------------------------------------------------------------------------------


def test_request_size_is_the_sum_of_its_parts() -> None:
    ops = [
        CreateOp("/a", b"x" * 100),
        SetDataOp("/b", b"y", 3),
        DeleteOp("/c"),
        CreateOp("/d/", b"", sequential=True),
    ]
    check = epoch_check(7)
    base = request_size([check])
    assert request_size([check, *ops]) == base + sum(op_size(o) for o in ops)
    assert request_size([check, *ops], chroot="/root") == request_size([check, *ops]) + 5 * len(
        [check, *ops]
    )


@pytest.mark.parametrize("limit", [1000, 5000, JUTE_MAXBUFFER])
def test_split_keeps_order_and_every_request_under_the_limit(limit: int) -> None:
    ops = [
        CreateOp(f"/brokers/topics/t/partitions/{i}/state", b"s" * (i % 300)) for i in range(3000)
    ]
    check = CheckOp("/controller_epoch", 3)
    chunks = split_ops(ops, check, max_request_bytes=limit, chroot="/chroot")
    assert all(chunk[0] == check for chunk in chunks)
    assert [op for chunk in chunks for op in chunk[1:]] == ops
    sizes = [request_size(chunk, chroot="/chroot") for chunk in chunks]
    assert max(sizes) <= limit
    # Greedy: no two neighbouring requests would have fitted into one.
    for a, b in itertools.pairwise(chunks):
        assert request_size([*a, b[1]], chroot="/chroot") > limit


def test_an_op_too_large_alone_is_a_clear_error() -> None:
    with pytest.raises(ZNodeTooLargeError, match=r"jute\.maxbuffer"):
        split_ops([CreateOp("/big", b"x" * JUTE_MAXBUFFER)], epoch_check(1))
    assert split_ops([], epoch_check(1)) == []


def test_deletion_marker_ops() -> None:
    from zkstore.fenced_writer import CreateOp, DeleteOp
    from zkstore.record_writes import deletion_marker_ops

    assert deletion_marker_ops(create=["a"], delete=["gone", "x y"]) == (
        CreateOp("/admin/delete_topics/a"),
        DeleteOp("/admin/delete_topics/gone"),
        DeleteOp("/admin/delete_topics/x y"),  # a bad marker can still be removed
    )
    with pytest.raises(KafkaError, match="deletion marker 'a/b'") as info:
        deletion_marker_ops(create=["a/b"])
    assert info.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
