"""CreateTopics: every validation branch as a table, and the records a success writes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.messages.topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from protocol.metadata.image import PartitionRegistration
from protocol.metadata.records import ConfigRecord, PartitionRecord, TopicRecord
from protocol.metadata.topic_ids import is_uuid


def topic(name: str = "t", **kwargs: Any) -> CreatableTopic:
    return CreatableTopic(name=name, **kwargs)


def assign(*parts: tuple[int, ...], start: int = 0) -> tuple[CreatableReplicaAssignment, ...]:
    return tuple(
        CreatableReplicaAssignment(partition_index=i + start, broker_ids=p)
        for i, p in enumerate(parts)
    )


def cfg(**values: str | None) -> tuple[CreatableTopicConfig, ...]:
    return tuple(CreatableTopicConfig(name=k.replace("_", "."), value=v) for k, v in values.items())


BROKERS3 = {1: None, 2: None, 3: None}

CASES = [
    # (id, brokers, existing topics, topics, expected code per topic, message needle)
    ("ok-defaults", None, [], [topic()], [ErrorCode.NONE], None),
    ("bad-name-empty", None, [], [topic("")], [ErrorCode.INVALID_TOPIC_EXCEPTION], "empty"),
    ("bad-name-dot", None, [], [topic(".")], [ErrorCode.INVALID_TOPIC_EXCEPTION], "'.'"),
    ("bad-name-dotdot", None, [], [topic("..")], [ErrorCode.INVALID_TOPIC_EXCEPTION], "'..'"),
    ("bad-name-chars", None, [], [topic("a/b")], [ErrorCode.INVALID_TOPIC_EXCEPTION], "'/'"),
    ("bad-name-long", None, [], [topic("x" * 250)], [ErrorCode.INVALID_TOPIC_EXCEPTION], "249"),
    ("name-249-ok", None, [], [topic("x" * 249)], [ErrorCode.NONE], None),
    (
        "metadata-log-name",
        None,
        [],
        [topic("__cluster_metadata")],
        [ErrorCode.INVALID_REQUEST],
        "Creation of internal topic __cluster_metadata is prohibited.",
    ),
    (
        "duplicates",
        None,
        [],
        [topic("a"), topic("b"), topic("a")],
        [ErrorCode.INVALID_REQUEST, ErrorCode.NONE, ErrorCode.INVALID_REQUEST],
        "Duplicate topic name 'a'",
    ),
    ("exists", None, ["t"], [topic("t")], [ErrorCode.TOPIC_ALREADY_EXISTS], "already exists"),
    (
        "collides-dot-underscore",
        None,
        ["a_b"],
        [topic("a.b")],
        [ErrorCode.INVALID_TOPIC_EXCEPTION],
        "collides with existing topic: a_b",
    ),
    (
        "collides-in-request",
        None,
        [],
        [topic("a.b"), topic("a_b")],
        [ErrorCode.NONE, ErrorCode.INVALID_TOPIC_EXCEPTION],
        "created in the same request",
    ),
    ("no-collision-chars", None, ["ab"], [topic("a-b")], [ErrorCode.NONE], None),
    (
        "partitions-zero",
        None,
        [],
        [topic(num_partitions=0)],
        [ErrorCode.INVALID_PARTITIONS],
        "non-positive",
    ),
    (
        "partitions-negative",
        None,
        [],
        [topic(num_partitions=-2)],
        [ErrorCode.INVALID_PARTITIONS],
        "non-positive",
    ),
    (
        "rf-zero",
        None,
        [],
        [topic(replication_factor=0)],
        [ErrorCode.INVALID_REPLICATION_FACTOR],
        "larger than 0",
    ),
    (
        "rf-negative",
        None,
        [],
        [topic(replication_factor=-5)],
        [ErrorCode.INVALID_REPLICATION_FACTOR],
        "or -1 to use the default",
    ),
    (
        "rf-too-big",
        None,
        [],
        [topic(replication_factor=3)],
        [ErrorCode.INVALID_REPLICATION_FACTOR],
        "replication factor of 3 cannot be reached because only 1 broker(s)",
    ),
    (
        "rf-int16",
        None,
        [],
        [topic(replication_factor=40000)],
        [ErrorCode.INVALID_REPLICATION_FACTOR],
        "maximum",
    ),
    ("rf-equal-brokers", BROKERS3, [], [topic(replication_factor=3)], [ErrorCode.NONE], None),
    (
        "bad-config-key",
        None,
        [],
        [topic(configs=cfg(retention_mss="1"))],
        [ErrorCode.INVALID_CONFIG],
        "retention.mss",
    ),
    (
        "bad-config-value",
        None,
        [],
        [topic(configs=cfg(retention_ms="soon"))],
        [ErrorCode.INVALID_CONFIG],
        "retention.ms",
    ),
    (
        "config-below-min",
        None,
        [],
        [topic(configs=cfg(segment_bytes="1"))],
        [ErrorCode.INVALID_CONFIG],
        "segment.bytes",
    ),
    (
        "config-choice",
        None,
        [],
        [topic(configs=cfg(cleanup_policy="bogus"))],
        [ErrorCode.INVALID_CONFIG],
        "cleanup.policy",
    ),
    (
        "config-duplicate-key",
        None,
        [],
        [topic(configs=(*cfg(retention_ms="1"), *cfg(retention_ms="2")))],
        [ErrorCode.INVALID_REQUEST],
        "retention.ms",
    ),
    (
        "manual-with-rf",
        BROKERS3,
        [],
        [topic(replication_factor=1, assignments=assign((1,)))],
        [ErrorCode.INVALID_REQUEST],
        "replication factor was not set to -1",
    ),
    (
        "manual-with-partitions",
        BROKERS3,
        [],
        [topic(num_partitions=1, assignments=assign((1,)))],
        [ErrorCode.INVALID_REQUEST],
        "numPartitions was not set to -1",
    ),
    (
        "manual-not-from-zero",
        BROKERS3,
        [],
        [topic(assignments=assign((1,), (2,), start=1))],
        [ErrorCode.INVALID_REPLICA_ASSIGNMENT],
        "consecutive 0-based",
    ),
    (
        "manual-gap",
        BROKERS3,
        [],
        [
            topic(
                assignments=(
                    CreatableReplicaAssignment(partition_index=0, broker_ids=(1,)),
                    CreatableReplicaAssignment(partition_index=2, broker_ids=(2,)),
                )
            )
        ],
        [ErrorCode.INVALID_REPLICA_ASSIGNMENT],
        "consecutive 0-based",
    ),
    (
        "manual-repeated-partition",
        BROKERS3,
        [],
        [topic(assignments=(*assign((1,)), *assign((2,))))],
        [ErrorCode.INVALID_REPLICA_ASSIGNMENT],
        "multiple manual partition assignments for partition 0",
    ),
    (
        "manual-different-rf",
        BROKERS3,
        [],
        [topic(assignments=assign((1, 2), (2,)))],
        [ErrorCode.INVALID_REPLICA_ASSIGNMENT],
        "with 1 replica(s), but this is not consistent with previous partitions, which have 2",
    ),
    (
        "manual-duplicate-broker",
        BROKERS3,
        [],
        [topic(assignments=assign((1, 1)))],
        [ErrorCode.INVALID_REPLICA_ASSIGNMENT],
        "broker 1 more than once",
    ),
    (
        "manual-unknown-broker",
        BROKERS3,
        [],
        [topic(assignments=assign((1, 9)))],
        [ErrorCode.INVALID_REPLICA_ASSIGNMENT],
        "broker 9, but no such broker is registered",
    ),
    (
        "manual-empty",
        BROKERS3,
        [],
        [topic(assignments=assign(()))],
        [ErrorCode.INVALID_REPLICA_ASSIGNMENT],
        "empty replica list",
    ),
    (
        "manual-ok",
        BROKERS3,
        [],
        [topic(assignments=assign((3, 1), (1, 2)))],
        [ErrorCode.NONE],
        None,
    ),
    (
        "partial-failure",
        None,
        ["x"],
        [topic("x"), topic("y"), topic("z", num_partitions=0)],
        [ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.NONE, ErrorCode.INVALID_PARTITIONS],
        None,
    ),
]


@pytest.mark.parametrize(
    ("brokers", "existing", "topics", "codes", "needle"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_create_topics_validation(
    make_harness: Callable[..., Any],
    brokers: dict[int, str | None] | None,
    existing: list[str],
    topics: list[CreatableTopic],
    codes: list[ErrorCode],
    needle: str | None,
) -> None:
    harness = make_harness(brokers)
    for name in existing:
        assert harness.apply(CreateTopicsRequest(topics=(topic(name),))).topics[0].error_code == 0
    result = harness.run(CreateTopicsRequest(topics=tuple(topics)))
    got = [ErrorCode(r.error_code) for r in result.response.topics]
    assert got == codes
    assert [r.name for r in result.response.topics] == [t.name for t in topics]
    for r in result.response.topics:
        if r.error_code:
            assert r.error_message and r.topic_id == "" and r.num_partitions == -1
        else:
            assert r.error_message is None and is_uuid(r.topic_id)
    if needle is not None:
        assert any(needle in (r.error_message or "") for r in result.response.topics)
    created = {r.topic_id for r in result.records if isinstance(r, TopicRecord)}
    assert created == {r.topic_id for r in result.response.topics if r.error_code == 0}


def test_success_records_and_image(make_harness: Callable[..., Any]) -> None:
    harness = make_harness({1: "a", 2: "b", 3: "c"})
    result = harness.run(
        CreateTopicsRequest(
            topics=(
                topic(
                    "orders",
                    num_partitions=6,
                    replication_factor=3,
                    configs=cfg(retention_ms=" 1000", cleanup_policy="delete"),
                ),
            )
        )
    )
    (res,) = result.response.topics
    assert (res.error_code, res.num_partitions, res.replication_factor) == (0, 6, 3)
    kinds = [type(r).__name__ for r in result.records]
    assert kinds == ["ConfigRecord"] * 2 + ["TopicRecord"] + ["PartitionRecord"] * 6
    configs = {r.name: r.value for r in result.records if isinstance(r, ConfigRecord)}
    assert configs == {"retention.ms": "1000", "cleanup.policy": "delete"}
    parts = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert [p.partition_id for p in parts] == list(range(6))
    for p in parts:
        assert p.topic_id == res.topic_id
        assert p.leader == p.replicas[0] and p.isr == p.replicas
        assert (p.leader_epoch, p.partition_epoch) == (0, 0)
    assert len({p.leader for p in parts}) == 3  # leaders spread over the brokers
    harness.commit(result.records)
    image = harness.state.image
    t = image.topics.get_topic("orders")
    assert t is not None and t.topic_id == res.topic_id and len(t.partitions) == 6
    assert image.configs.topic_configs("orders") == configs


def test_defaults_come_from_config(make_harness: Callable[..., Any]) -> None:
    harness = make_harness(BROKERS3, num_partitions=4, default_replication_factor=2)
    (res,) = harness.apply(CreateTopicsRequest(topics=(topic(),))).topics
    assert (res.num_partitions, res.replication_factor) == (4, 2)


def test_validate_only_writes_nothing(make_harness: Callable[..., Any]) -> None:
    harness = make_harness()
    result = harness.run(CreateTopicsRequest(topics=(topic(num_partitions=3),), validate_only=True))
    assert result.records == []
    (res,) = result.response.topics
    assert (res.error_code, res.num_partitions, res.topic_id) == (0, 3, "")
    bad = harness.run(CreateTopicsRequest(topics=(topic(num_partitions=0),), validate_only=True))
    assert bad.response.topics[0].error_code == ErrorCode.INVALID_PARTITIONS


def test_fenced_brokers_are_not_used(make_harness: Callable[..., Any]) -> None:
    harness = make_harness(BROKERS3, fenced=frozenset({2}))
    result = harness.run(
        CreateTopicsRequest(topics=(topic(num_partitions=6, replication_factor=2),))
    )
    parts = [r for r in result.records if isinstance(r, PartitionRecord)]
    assert all(2 not in p.replicas for p in parts)
    too_many = harness.run(CreateTopicsRequest(topics=(topic(replication_factor=3),)))
    assert "only 2 broker(s)" in (too_many.response.topics[0].error_message or "")


def test_manual_assignment_leader_is_first_live_replica(make_harness: Callable[..., Any]) -> None:
    harness = make_harness(BROKERS3, fenced=frozenset({3}))
    harness.apply(CreateTopicsRequest(topics=(topic(assignments=assign((3, 1, 2), (2, 3, 1))),)))
    t = harness.state.topic("t")
    assert t is not None
    assert t.partitions[0] == PartitionRegistration(replicas=(3, 1, 2), isr=(1, 2), leader=1)
    assert t.partitions[1] == PartitionRegistration(replicas=(2, 3, 1), isr=(2, 1), leader=2)


def test_manual_assignment_all_fenced(make_harness: Callable[..., Any]) -> None:
    harness = make_harness(BROKERS3, fenced=frozenset({2, 3}))
    (res,) = harness.run(
        CreateTopicsRequest(topics=(topic(assignments=assign((2, 3))),))
    ).response.topics
    assert res.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "fenced" in (res.error_message or "")


def test_too_many_partitions_in_one_request(make_harness: Callable[..., Any]) -> None:
    harness = make_harness(max_partitions_per_request=10)
    result = harness.run(
        CreateTopicsRequest(topics=(topic("a", num_partitions=6), topic("b", num_partitions=6)))
    )
    assert [r.error_code for r in result.response.topics] == [ErrorCode.POLICY_VIOLATION] * 2
    assert "12 requested" in (result.response.topics[0].error_message or "")
    assert result.records == []


def test_recreated_topic_gets_new_id(make_harness: Callable[..., Any]) -> None:
    from protocol.messages.topics import DeleteTopicsRequest

    harness = make_harness()
    first = harness.apply(CreateTopicsRequest(topics=(topic(),))).topics[0].topic_id
    harness.apply(DeleteTopicsRequest(topic_names=("t",)))
    second = harness.apply(CreateTopicsRequest(topics=(topic(),))).topics[0].topic_id
    assert first != second
    t = harness.state.topic("t")
    assert t is not None and t.topic_id == second


def test_topic_id_never_collides_with_existing(make_harness: Callable[..., Any]) -> None:
    harness = make_harness()
    ids = iter(["AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw"])
    from dataclasses import replace

    harness.ctx = replace(harness.ctx, new_topic_id=lambda: next(ids))
    harness.apply(CreateTopicsRequest(topics=(topic("a"),)))
    (res,) = harness.apply(CreateTopicsRequest(topics=(topic("b"),))).topics
    assert res.topic_id == "AAAAAAAAAAAAAAAAAAAAAw"
