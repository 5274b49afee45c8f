"""CreatePartitions and AlterPartitionReassignments / ListPartitionReassignments (KIP-455)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.propagation import ControllerIdentity, plan_propagation
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionPartition,
    AlterPartitionRequest,
    AlterPartitionTopic,
)
from protocol.messages.create_partitions import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from protocol.messages.reassignments import (
    AlterPartitionReassignmentsRequest,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopic,
    ReassignablePartition,
    ReassignableTopic,
)
from protocol.messages.topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from protocol.metadata.records import UnfenceBrokerRecord

Harness = Any


@pytest.fixture
def h(make_harness: Callable[..., Harness]) -> Harness:
    harness = make_harness({1: None, 2: None, 3: None, 4: None}, fenced=frozenset({4}))
    harness.apply(
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="t",
                    assignments=tuple(
                        CreatableReplicaAssignment(partition_index=i, broker_ids=a)
                        for i, a in enumerate([(1, 2), (2, 3)])
                    ),
                ),
            )
        )
    )
    return harness


def grow(h: Harness, count: int, assignments: Any = None, name: str = "t", **kw: Any) -> Any:
    result = h.run(
        CreatePartitionsRequest(
            topics=(CreatePartitionsTopic(name=name, count=count, assignments=assignments),), **kw
        )
    )
    h.commit(result.records)
    return result


def test_create_partitions_placed(h: Harness) -> None:
    result = grow(h, 5)
    assert result.response.results[0].error_code == 0
    parts = h.state.topic("t").partitions
    assert sorted(parts) == [0, 1, 2, 3, 4]
    for pid in (2, 3, 4):
        assert len(parts[pid].replicas) == 2 and 4 not in parts[pid].replicas
        assert parts[pid].leader == parts[pid].replicas[0]
    assert {parts[pid].leader for pid in (2, 3, 4)} == {1, 2, 3}  # striped


def test_create_partitions_manual_and_validate_only(h: Harness) -> None:
    assert grow(h, 3, validate_only=True).records == []
    grow(h, 3, (CreatePartitionsAssignment(broker_ids=(3, 4)),))
    p = h.state.topic("t").partitions[2]
    assert (p.replicas, p.isr, p.leader) == ((3, 4), (3,), 3)


@pytest.mark.parametrize(
    ("name", "count", "assignments", "code"),
    [
        ("x", 3, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("t", 2, None, ErrorCode.INVALID_PARTITIONS),
        ("t", 1, None, ErrorCode.INVALID_PARTITIONS),
        ("t", 4, ((1, 2),), ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # one for two new
        ("t", 3, ((1,),), ErrorCode.INVALID_REPLICA_ASSIGNMENT),  # other RF
        ("t", 3, ((1, 1),), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("t", 3, ((1, 9),), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ("t", 3, ((4, 4),), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ],
)
def test_create_partitions_errors(
    h: Harness, name: str, count: int, assignments: Any, code: ErrorCode
) -> None:
    given = None if assignments is None else tuple(
        CreatePartitionsAssignment(broker_ids=a) for a in assignments
    )  # fmt: skip
    result = grow(h, count, given, name=name)
    assert result.records == []
    assert result.response.results[0].error_code == code, result.response


def test_create_partitions_duplicate_topic(h: Harness) -> None:
    topic = CreatePartitionsTopic(name="t", count=3)
    result = h.run(CreatePartitionsRequest(topics=(topic, topic)))
    assert [r.error_code for r in result.response.results] == [ErrorCode.INVALID_REQUEST] * 2


def reassign(h: Harness, pid: int, replicas: tuple[int, ...] | None, name: str = "t") -> int:
    result = h.run(
        AlterPartitionReassignmentsRequest(
            topics=(
                ReassignableTopic(
                    name=name,
                    partitions=(ReassignablePartition(partition_index=pid, replicas=replicas),),
                ),
            )
        )
    )
    h.commit(result.records)
    return result.response.responses[0].partitions[0].error_code


def ongoing(h: Harness, topics: Any = None) -> dict:
    response = h.run(ListPartitionReassignmentsRequest(topics=topics)).response
    return {
        (t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
        for t in response.topics
        for p in t.partitions
    }


def catch_up(h: Harness, pid: int, isr: tuple[int, ...]) -> Any:
    topic = h.state.topic("t")
    p = topic.partitions[pid]
    result = h.run(
        AlterPartitionRequest(
            broker_id=p.leader,
            broker_epoch=h.state.image.cluster.broker(p.leader).epoch,
            topics=(
                AlterPartitionTopic(
                    topic_name="t",
                    topic_id=topic.topic_id,
                    partitions=(
                        AlterPartitionPartition(
                            partition_index=pid,
                            leader_epoch=p.leader_epoch,
                            new_isr=isr,
                            partition_epoch=p.partition_epoch,
                        ),
                    ),
                ),
            ),
        )
    )
    h.commit(result.records)
    return result.response.topics[0].partitions[0]


def test_reassignment_adds_catches_up_then_removes(h: Harness) -> None:
    h.commit([UnfenceBrokerRecord(id=4, epoch=h.state.image.cluster.broker(4).epoch)])
    assert reassign(h, 0, (3, 4)) == 0
    p = h.state.topic("t").partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader) == (
        (3, 4, 1, 2),
        (3, 4),
        (1, 2),
        1,
    )
    assert ongoing(h) == {("t", 0): ((3, 4, 1, 2), (3, 4), (1, 2))}
    assert ongoing(h, (ListPartitionReassignmentsTopic(name="t", partition_indexes=(1,)),)) == {}
    catch_up(h, 0, (1, 2, 3))  # 3 in sync, 4 not yet: still moving
    assert h.state.topic("t").partitions[0].adding_replicas == (3, 4)
    before = h.state.image
    answer = catch_up(h, 0, (1, 2, 3, 4))
    assert answer.error_code == ErrorCode.NEW_LEADER_ELECTED  # leadership moved with it
    p = h.state.topic("t").partitions[0]
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) == (
        (3, 4),
        (3, 4),
        3,
        (),
        (),
    )
    plans = plan_propagation(before, h.state.image, ControllerIdentity(1, 1))
    for removed in (1, 2):
        assert plans[removed].stop_replica.topic_states[0].partition_states[0].delete_partition
    assert ongoing(h) == {}


def test_reassignment_without_catch_up_completes_at_once(h: Harness) -> None:
    assert reassign(h, 1, (3, 2)) == 0  # a reorder
    p = h.state.topic("t").partitions[1]
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.leader) == ((3, 2), (), (), 2)
    assert reassign(h, 1, (3,)) == 0  # a removal
    p = h.state.topic("t").partitions[1]
    assert (p.replicas, p.isr, p.leader) == ((3,), (3,), 3)


def test_cancel_reverts_and_errors(h: Harness) -> None:
    assert reassign(h, 0, None) == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert reassign(h, 0, (1, 3)) == 0
    assert h.state.topic("t").partitions[0].adding_replicas == (3,)
    assert reassign(h, 0, None) == 0
    p = h.state.topic("t").partitions[0]
    assert (p.replicas, p.isr, p.adding_replicas, p.removing_replicas) == ((1, 2), (1, 2), (), ())
    assert reassign(h, 9, (1, 2)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert reassign(h, 0, (1, 2), name="x") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert reassign(h, 0, ()) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert reassign(h, 0, (1, 1)) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert reassign(h, 0, (1, 9)) == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_new_target_replaces_ongoing_reassignment(h: Harness) -> None:
    assert reassign(h, 0, (1, 3)) == 0
    assert reassign(h, 0, (2, 4)) == 0
    p = h.state.topic("t").partitions[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 4, 1), (4,), (1,))
