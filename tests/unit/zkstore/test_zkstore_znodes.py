"""Kafka's znode JSON, exactly as kafka.zk.ZkData writes it (key order aside)."""

from __future__ import annotations

import json

import pytest

from protocol.metadata.records import BrokerEndpoint
from zkstore.znodes import (
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
    desanitize,
    sanitize,
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
