"""Kafka's znode JSON, exactly as kafka.zk.ZkData writes it (key order aside)."""

from __future__ import annotations

import json

import pytest

from protocol.acls import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from protocol.metadata.records import BrokerEndpoint
from zkstore.znodes import (
    AclChangeNotificationZNode,
    AclResource,
    AclStoreZNode,
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerInfo,
    ControllerZNode,
    DeleteTopicZNode,
    IsrChangeNotificationZNode,
    LeaderIsrAndControllerEpoch,
    ProducerIdBlock,
    ProducerIdBlockZNode,
    ReassignPartitionsZNode,
    ReplicaAssignment,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicZNode,
    UserScramCredentialsZNode,
    ZNodeDecodeError,
    acl_store_paths,
    desanitize,
    pascal_case,
    sanitize,
    znode_name_problem,
)

EP = (
    BrokerEndpoint(name="INTERNAL", host="broker1", port=9093, security_protocol=0),
    BrokerEndpoint(name="EXTERNAL", host="::1", port=19092, security_protocol=1),
)

ENCODED = [
    ("/cluster/id", ClusterIdZNode.encode("abc"), {"version": "1", "id": "abc"}),
    (
        "/controller",
        ControllerZNode.encode(2, 1700000000123),
        {"version": 2, "brokerid": 2, "timestamp": "1700000000123", "kraftControllerEpoch": -1},
    ),
    (
        "/brokers/ids/1",
        BrokerIdZNode.encode(BrokerInfo(1, EP, rack="rack-a", timestamp_ms=42)),
        {
            "version": 5,
            "host": "broker1",
            "port": 9093,
            "endpoints": ["INTERNAL://broker1:9093", "EXTERNAL://[::1]:19092"],
            "listener_security_protocol_map": {"INTERNAL": "PLAINTEXT", "EXTERNAL": "SSL"},
            "rack": "rack-a",
            "jmx_port": -1,
            "timestamp": "42",
            "features": {},
        },
    ),
    (
        "/brokers/ids/2 (no PLAINTEXT endpoint, no rack)",
        BrokerIdZNode.encode(BrokerInfo(2, EP[1:], timestamp_ms=1)),
        {
            "version": 5,
            "host": None,
            "port": -1,
            "endpoints": ["EXTERNAL://[::1]:19092"],
            "listener_security_protocol_map": {"EXTERNAL": "SSL"},
            "jmx_port": -1,
            "timestamp": "1",
            "features": {},
        },
    ),
    (
        "/brokers/topics/t",
        TopicZNode.encode(
            "AAAAAAAAAAAAAAAAAAAAAg",
            {0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 4), (4,), (1,))},
        ),
        {
            "version": 3,
            "topic_id": "AAAAAAAAAAAAAAAAAAAAAg",
            "partitions": {"0": [1, 2, 3], "1": [2, 3, 4]},
            "adding_replicas": {"1": [4]},
            "removing_replicas": {"1": [1]},
        },
    ),
    (
        "/brokers/topics/t/partitions/0/state",
        TopicPartitionStateZNode.encode(1, 5, [1, 2], 3),
        {"controller_epoch": 3, "leader": 1, "version": 1, "leader_epoch": 5, "isr": [1, 2]},
    ),
    (
        "/brokers/topics/t/partitions/0/state (recovering)",
        TopicPartitionStateZNode.encode(2, 6, [2], 3, 1),
        {
            "controller_epoch": 3,
            "leader": 2,
            "version": 1,
            "leader_epoch": 6,
            "isr": [2],
            "leader_recovery_state": 1,
        },
    ),
    (
        "/config/topics/t",
        ConfigEntityZNode.encode({"retention.ms": "1000", "cleanup.policy": "compact"}),
        {"version": 1, "config": {"retention.ms": "1000", "cleanup.policy": "compact"}},
    ),
    (
        "/config/changes/config_change_",
        ConfigEntityChangeNotificationSequenceZNode.encode("topics/t"),
        {"version": 2, "entity_path": "topics/t"},
    ),
    (
        "/latest_producer_id_block",
        ProducerIdBlockZNode.encode(ProducerIdBlock(3, 1000, 1999)),
        {"version": 1, "broker": 3, "block_start": "1000", "block_end": "1999"},
    ),
    (
        "/admin/reassign_partitions",
        ReassignPartitionsZNode.encode({("t", 0): [3, 4]}),
        {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [3, 4]}]},
    ),
    (
        "/isr_change_notification/isr_change_",
        IsrChangeNotificationZNode.encode([("t", 1)]),
        {"version": 1, "partitions": [{"topic": "t", "partition": 1}]},
    ),
]


@pytest.mark.parametrize(("what", "data", "expected"), ENCODED, ids=[e[0] for e in ENCODED])
def test_encoded_json_is_kafkas(what: str, data: bytes, expected: object) -> None:
    assert json.loads(data) == expected
    assert b" " not in data.replace(b'"version"', b"")  # compact, as Jackson writes it


def test_paths() -> None:
    assert BrokerIdZNode.path(3) == "/brokers/ids/3"
    assert TopicZNode.path("t") == "/brokers/topics/t"
    assert TopicPartitionStateZNode.path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert DeleteTopicZNode.path("t") == "/admin/delete_topics/t"
    assert ConfigEntityZNode.path("topics", "t") == "/config/topics/t"
    assert (
        ConfigEntityChangeNotificationSequenceZNode.create_path()
        == "/config/changes/config_change_"
    )
    assert ControllerZNode.path() == "/controller"
    assert ControllerEpochZNode.path() == "/controller_epoch"
    assert ProducerIdBlockZNode.path() == "/latest_producer_id_block"
    assert ClusterIdZNode.path() == "/cluster/id"


def test_round_trips() -> None:
    assert ControllerEpochZNode.encode(17) == b"17"
    assert ControllerEpochZNode.decode(b"17") == 17
    assert ControllerZNode.decode(ControllerZNode.encode(4, 99)) == ControllerInfo(4, 99, -1)
    info = BrokerInfo(1, EP, rack="r", timestamp_ms=5)
    assert BrokerIdZNode.decode(1, BrokerIdZNode.encode(info)) == info
    assignment = {0: ReplicaAssignment((1, 2)), 3: ReplicaAssignment((3,), (4,), ())}
    assert TopicZNode.decode("t", TopicZNode.encode("id", assignment)) == TopicAssignment(
        "id", assignment
    )
    assert TopicPartitionStateZNode.decode(
        "t", 0, TopicPartitionStateZNode.encode(1, 2, [1], 3, 1), zk_version=9
    ) == LeaderIsrAndControllerEpoch(1, 2, (1,), 3, 1, 9)
    assert (
        ProducerIdBlockZNode.decode(
            ProducerIdBlockZNode.encode(ProducerIdBlock(1, 0, 999))
        ).next_producer_id
        == 1000
    )
    assert ClusterIdZNode.decode(ClusterIdZNode.encode("x")) == "x"
    assert ConfigEntityZNode.decode(ConfigEntityZNode.encode({"a": "b"})) == {"a": "b"}
    assert ConfigEntityZNode.decode(b"") == {}


def test_decodes_what_older_kafkas_wrote() -> None:
    # Topic znode version 1 (no topic id, no adding/removing), controller version 1.
    old = TopicZNode.decode("t", b'{"version":1,"partitions":{"0":[1,2]}}')
    assert old == TopicAssignment(None, {0: ReplicaAssignment((1, 2))})
    assert ControllerZNode.decode(b'{"version":1,"brokerid":3,"timestamp":"5"}').broker_id == 3
    v1 = BrokerIdZNode.decode(1, b'{"version":1,"host":"h","port":9092,"jmx_port":-1}')
    assert v1.endpoints == (BrokerEndpoint(name="PLAINTEXT", host="h", port=9092),)
    # v4 without a protocol map: the listener name is the protocol.
    v4 = BrokerIdZNode.decode(
        1, b'{"version":4,"host":"h","port":9092,"jmx_port":-1,"endpoints":["SSL://h:9093"]}'
    )
    assert v4.endpoints[0].security_protocol == 1


@pytest.mark.parametrize(
    ("decode", "data", "message"),
    [
        (lambda d: ControllerEpochZNode.decode(d), b"one", "not an integer epoch"),
        (lambda d: ControllerZNode.decode(d), b"{", "does not hold JSON"),
        (lambda d: ControllerZNode.decode(d), b"[1]", "expected a JSON object"),
        (lambda d: ControllerZNode.decode(d), b'{"version":2}', "'brokerid' is missing"),
        (lambda d: TopicZNode.decode("t", d), b'{"partitions":{"x":[1]}}', "not a number"),
        (lambda d: TopicZNode.decode("t", d), b'{"partitions":{"0":[true]}}', "list of broker ids"),
        (
            lambda d: TopicPartitionStateZNode.decode("t", 0, d),
            b'{"leader":1,"leader_epoch":0,"isr":[1]}',
            "controller_epoch",
        ),
        (
            lambda d: BrokerIdZNode.decode(1, d),
            b'{"version":5,"endpoints":["nope"]}',
            "LISTENER://",
        ),
        (
            lambda d: ProducerIdBlockZNode.decode(d),
            b'{"broker":1,"block_start":"a","block_end":"1"}',
            "not an integer",
        ),
        (lambda d: ClusterIdZNode.decode(d), None, "has no data"),
        (
            lambda d: UserScramCredentialsZNode.decode(d, "/config/users/u"),
            b'{"version":1,"config":{"SCRAM-SHA-512":"salt=AAAA"}}',
            "^/config/users/u: SCRAM-SHA-512: credential lacks iterations, server_key, stored_key",
        ),
    ],
)
def test_bad_data_is_a_clear_error(decode: object, data: bytes | None, message: str) -> None:
    with pytest.raises(ZNodeDecodeError, match=message):
        decode(data)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("name", "znode_name"),
    [
        ("alice", "alice"),
        ("a.b-c_d", "a.b-c_d"),
        ("a b+c", "a%20b%2Bc"),
        ("*", "%2A"),
        ("CN=x,O=y/z", "CN%3Dx%2CO%3Dy%2Fz"),
        ("~é", "%7E%C3%A9"),
    ],
)
def test_user_names_are_sanitized_as_kafka_does(name: str, znode_name: str) -> None:
    assert sanitize(name) == znode_name
    assert UserScramCredentialsZNode.path(name) == f"/config/users/{znode_name}"
    assert desanitize(znode_name) == name


# -- ACLs: Kafka's ZkAclStore and ZkAclChangeStore ---------------------------------------------

LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def acl(
    kind: ResourceType,
    name: str,
    pattern: PatternType = LIT,
    principal: str = "User:alice",
    op: AclOperation = AclOperation.READ,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, host, op, permission)


@pytest.mark.parametrize(
    ("resource", "path"),
    [
        (AclResource(ResourceType.TOPIC, LIT, "orders"), "/kafka-acl/Topic/orders"),
        (
            AclResource(ResourceType.CLUSTER, LIT, "kafka-cluster"),
            "/kafka-acl/Cluster/kafka-cluster",
        ),
        (AclResource(ResourceType.GROUP, LIT, "*"), "/kafka-acl/Group/*"),
        (
            AclResource(ResourceType.TRANSACTIONAL_ID, PRE, "tx-"),
            "/kafka-acl-extended/prefixed/TransactionalId/tx-",
        ),
        (
            AclResource(ResourceType.DELEGATION_TOKEN, PRE, "t"),
            "/kafka-acl-extended/prefixed/DelegationToken/t",
        ),
        (AclResource(ResourceType.USER, LIT, "User:bob"), "/kafka-acl/User/User:bob"),
    ],
)
def test_acl_znode_paths_are_kafkas(resource: AclResource, path: str) -> None:
    assert AclStoreZNode.path(resource) == path


def test_acl_store_paths_are_what_kafkas_authorizer_creates() -> None:
    paths = acl_store_paths()
    assert paths[:2] == ("/kafka-acl", "/kafka-acl/Topic")
    assert {p.rsplit("/", 1)[1] for p in paths if p.startswith("/kafka-acl/")} == {
        "Topic",
        "Group",
        "Cluster",
        "TransactionalId",
        "DelegationToken",
        "User",
    }
    assert "/kafka-acl-extended/prefixed/Group" in paths
    assert paths[-2:] == ("/kafka-acl-changes", "/kafka-acl-extended-changes")


def test_acl_znode_json_is_kafkas_and_round_trips() -> None:
    resource = AclResource(ResourceType.CLUSTER, LIT, "kafka-cluster")
    acls = [
        acl(ResourceType.CLUSTER, "kafka-cluster", op=AclOperation.IDEMPOTENT_WRITE),
        acl(
            ResourceType.CLUSTER,
            "kafka-cluster",
            principal="User:bob",
            host="10.0.0.1",
            op=AclOperation.CLUSTER_ACTION,
            permission=AclPermissionType.DENY,
        ),
        acl(ResourceType.CLUSTER, "kafka-cluster", op=AclOperation.DESCRIBE_CONFIGS),
    ]
    data = AclStoreZNode.encode(acls)
    assert json.loads(data) == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "DescribeConfigs",
             "host": "*"},
            {"principal": "User:alice", "permissionType": "Allow", "operation": "IdempotentWrite",
             "host": "*"},
            {"principal": "User:bob", "permissionType": "Deny", "operation": "ClusterAction",
             "host": "10.0.0.1"},
        ],
    }  # fmt: skip
    assert b" " not in data
    assert set(AclStoreZNode.decode(resource, data)) == set(acls)
    assert AclStoreZNode.decode(resource, b"") == AclStoreZNode.decode(resource, None) == ()


def test_every_operation_name_is_kafkas_pascal_case() -> None:
    names = {op: pascal_case(op.name) for op in AclOperation}
    assert names[AclOperation.ALL] == "All"
    assert names[AclOperation.ALTER_CONFIGS] == "AlterConfigs"
    assert names[AclOperation.CREATE_TOKENS] == "CreateTokens"
    resource = AclResource(ResourceType.TOPIC, LIT, "t")
    for op in AclOperation:
        if op in (AclOperation.ANY, AclOperation.UNKNOWN):
            continue
        written = acl(ResourceType.TOPIC, "t", op=op)
        assert AclStoreZNode.decode(resource, AclStoreZNode.encode([written])) == (written,)


def test_acl_change_notifications_are_kafkas() -> None:
    literal = AclResource(ResourceType.TRANSACTIONAL_ID, LIT, "tx:1")
    assert AclChangeNotificationZNode.create_path(LIT) == "/kafka-acl-changes/acl_changes_"
    # Kafka 2.5+ writes the Java enum name; the name after the first ':' is the resource's.
    assert AclChangeNotificationZNode.encode(literal) == b"TRANSACTIONAL_ID:tx:1"
    change = "/kafka-acl-changes/acl_changes_0000000003"
    assert AclChangeNotificationZNode.decode(change, b"TRANSACTIONAL_ID:tx:1") == literal
    # Kafka before 2.5 wrote the Scala name.
    assert AclChangeNotificationZNode.decode(change, b"TransactionalId:tx:1") == literal
    prefixed = AclResource(ResourceType.GROUP, PRE, "team-")
    assert AclChangeNotificationZNode.create_path(PRE) == "/kafka-acl-extended-changes/acl_changes_"
    data = AclChangeNotificationZNode.encode(prefixed)
    assert json.loads(data) == {
        "version": 1,
        "resourceType": "GROUP",
        "name": "team-",
        "patternType": "PREFIXED",
    }
    extended = "/kafka-acl-extended-changes/acl_changes_0000000000"
    assert AclChangeNotificationZNode.decode(extended, data) == prefixed


@pytest.mark.parametrize(
    ("decode", "data", "message"),
    [
        (
            lambda d: AclStoreZNode.decode(AclResource(ResourceType.TOPIC, LIT, "t"), d),
            b'{"version":2,"acls":[]}',
            r"^/kafka-acl/Topic/t: unsupported ACL version 2$",
        ),
        (
            lambda d: AclStoreZNode.decode(AclResource(ResourceType.TOPIC, PRE, "t"), d),
            b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow",'
            b'"operation":"Fly","host":"*"}]}',
            r"^/kafka-acl-extended/prefixed/Topic/t: unknown operation 'Fly'",
        ),
        (
            lambda d: AclStoreZNode.decode(AclResource(ResourceType.GROUP, LIT, "g"), d),
            b'{"version":1,"acls":[{"principal":"alice","permissionType":"Allow",'
            b'"operation":"Read","host":"*"}]}',
            r"^/kafka-acl/Group/g: principal 'alice' is not Type:name$",
        ),
        (
            lambda d: AclStoreZNode.decode(AclResource(ResourceType.GROUP, LIT, "g"), d),
            b'{"version":1,"acls":[{"principal":"User:a","permissionType":"Maybe",'
            b'"operation":"Read","host":"*"}]}',
            r"^/kafka-acl/Group/g: unknown permissionType 'Maybe'",
        ),
        (
            lambda d: AclStoreZNode.decode(AclResource(ResourceType.GROUP, LIT, "g"), d),
            b'{"version":1,"acls":[{"principal":"User:a","operation":"Read","host":"*"}]}',
            r"^/kafka-acl/Group/g: field 'permissionType' is missing$",
        ),
        (
            lambda d: AclStoreZNode.decode(AclResource(ResourceType.GROUP, LIT, "g"), d),
            b'{"version":1,"acls":"all"}',
            r"^/kafka-acl/Group/g: field 'acls' is 'all', not of the expected type$",
        ),
        (
            lambda d: AclChangeNotificationZNode.decode("/kafka-acl-changes/acl_changes_1", d),
            b"Planet:earth",
            r"^/kafka-acl-changes/acl_changes_1: unknown resource type 'PLANET'",
        ),
        (
            lambda d: AclChangeNotificationZNode.decode("/kafka-acl-changes/acl_changes_1", d),
            b"orders",
            r"^/kafka-acl-changes/acl_changes_1: 'orders' is not ResourceType:name$",
        ),
        (
            lambda d: AclChangeNotificationZNode.decode(
                "/kafka-acl-extended-changes/acl_changes_2", d
            ),
            b'{"version":1,"resourceType":"TOPIC","name":"t","patternType":"LITERAL"}',
            r"^/kafka-acl-extended-changes/acl_changes_2: unknown patternType 'LITERAL'",
        ),
        (
            lambda d: AclChangeNotificationZNode.decode(
                "/kafka-acl-extended-changes/acl_changes_2", d
            ),
            b'{"version":2,"resourceType":"TOPIC","name":"t","patternType":"PREFIXED"}',
            r"^/kafka-acl-extended-changes/acl_changes_2: unsupported ACL change version 2$",
        ),
    ],
)
def test_bad_acl_data_is_a_clear_error(decode: object, data: bytes, message: str) -> None:
    with pytest.raises(ZNodeDecodeError, match=message):
        decode(data)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("name", "fit"),
    [("orders", True), ("*", True), ("a:b c", True), ("é", True), ("a/b", False), (".", False),
     ("..", False), ("", False), ("a\x00", False), ("tab\t", False), ("\ue000", False)],
)  # fmt: skip
def test_resource_names_that_cannot_be_a_znode_are_named(name: str, fit: bool) -> None:
    assert (znode_name_problem(name) is None) is fit
