"""Preferred elections (KRaft's electPreferredLeader, answered as ZK Kafka's) and topics queued
for deletion in ElectLeaders and the auto-rebalance check (Kafka's isTopicQueuedUpForDeletion)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from controller.elect_leaders import AutoLeaderRebalance, rebalance_candidates
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionPartition,
    AlterPartitionRequest,
    AlterPartitionTopic,
)
from protocol.messages.elect_leaders import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersTopicPartitions,
)
from protocol.metadata.records import UnregisterBrokerRecord
from protocol.names import TopicPartition
from tests.unit.controller.test_controller_cluster_ops import create, live, part

Harness = Any


@pytest.fixture
def h(make_harness: Callable[..., Harness]) -> Harness:
    harness = make_harness({1: None, 2: None, 3: None}, leader_imbalance_per_broker_percentage=10)
    harness.deleting = set()
    harness.ctx = dataclasses.replace(
        harness.ctx, topics_queued_for_deletion=lambda: frozenset(harness.deleting)
    )
    return harness


def elect(
    h: Harness, election: ElectionType, *tps: tuple[str, int], all_: bool = False
) -> tuple[dict[tuple[str, int], tuple[int, str | None]], Any]:
    request = ElectLeadersRequest(
        election_type=int(election),
        topic_partitions=None
        if all_
        else tuple(ElectLeadersTopicPartitions(topic=t, partitions=(p,)) for t, p in tps),
    )
    result = h.run(request)
    answers = {
        (r.topic, p.partition_id): (p.error_code, p.error_message)
        for r in result.response.replica_election_results
        for p in r.partition_result
    }
    return answers, result


def catch_up(h: Harness, name: str, pid: int, broker: int) -> None:
    """The leader adds `broker` back to the ISR (AlterPartition)."""
    p = part(h, name, pid)
    request = AlterPartitionRequest(
        broker_id=p.leader,
        broker_epoch=h.state.image.cluster.broker(p.leader).epoch,
        topics=(
            AlterPartitionTopic(
                topic_name=name,
                topic_id=h.state.topic(name).topic_id,
                partitions=(
                    AlterPartitionPartition(
                        partition_index=pid,
                        leader_epoch=p.leader_epoch,
                        new_isr=(*p.isr, broker),
                        partition_epoch=p.partition_epoch,
                    ),
                ),
            ),
        ),
    )
    response = h.apply(request)
    assert response.error_code == 0 and response.topics[0].partitions[0].error_code == 0


def test_preferred_on_an_offline_partition_elects_the_next_valid_replica_but_says_so(
    h: Harness,
) -> None:
    create(h, "t", (1, 2, 3))
    h.commit(h.run(live(h, 2, 3)).records)  # 1 (preferred) dies: 2 leads, ISR (2, 3)
    # Broker 2 goes too, before any BrokerChange noticed it: the partition is offline.
    epoch = h.state.image.cluster.broker(2).epoch
    h.commit([UnregisterBrokerRecord(broker_id=2, broker_epoch=epoch)])
    answers, result = elect(h, ElectionType.PREFERRED, ("t", 0))
    code, message = answers[("t", 0)]
    assert code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert "preferred replica 1" in message and "replica 3 leads instead" in message
    # ...but the record is kept (KRaft's electPreferredLeader): the partition has a leader.
    assert len(result.records) == 1 and result.records[0].leader == 3
    h.commit(result.records)
    assert part(h, "t").leader == 3


def test_preferred_keeps_a_valid_current_leader_when_the_preferred_is_not_eligible(
    h: Harness,
) -> None:
    create(h, "t", (1, 2, 3))
    h.commit(h.run(live(h, 2, 3)).records)  # 1 dies: 2 leads
    h.commit(h.run(live(h, 1, 2, 3)).records)  # 1 is back but out of the ISR
    answers, result = elect(h, ElectionType.PREFERRED, ("t", 0))
    assert answers[("t", 0)][0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert result.records == []  # the current leader stays: nothing to write
    catch_up(h, "t", 0, 1)
    answers, result = elect(h, ElectionType.PREFERRED, ("t", 0))
    assert answers[("t", 0)] == (0, None)
    h.commit(result.records)
    assert part(h, "t").leader == 1


def test_elect_leaders_refuses_topics_queued_for_deletion(h: Harness) -> None:
    create(h, "t", (1, 2, 3))
    create(h, "gone", (1, 2, 3), (2, 3, 1))
    h.commit(h.run(live(h, 2, 3)).records)
    h.commit(h.run(live(h, 1, 2, 3)).records)
    catch_up(h, "t", 0, 1)
    catch_up(h, "gone", 0, 1)
    h.deleting.add(h.state.topic("gone").topic_id)
    answers, result = elect(h, ElectionType.PREFERRED, ("gone", 0), ("t", 0))
    assert answers[("gone", 0)] == (
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        "The topic is being deleted",
    )
    assert answers[("t", 0)] == (0, None)
    assert [r.topic_id for r in result.records] == [h.state.topic("t").topic_id]
    # Electing for all partitions names them too (only ELECTION_NOT_NEEDED is left out).
    answers, _ = elect(h, ElectionType.PREFERRED, all_=True)
    assert answers[("gone", 0)][0] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert ("gone", 1) in answers and ("t", 0) in answers


def test_rebalance_skips_topics_queued_for_deletion(h: Harness) -> None:
    create(h, "keep", *[(1, 2, 3)] * 2)
    create(h, "gone", *[(1, 2, 3)] * 8)
    h.commit(h.run(live(h, 2, 3)).records)  # 1 gone: 2 leads everything
    h.commit(h.run(live(h, 1, 2, 3)).records)
    for name, n in (("keep", 2), ("gone", 8)):
        for pid in range(n):
            catch_up(h, name, pid, 1)
    everything = [TopicPartition("gone", i) for i in range(8)] + [
        TopicPartition("keep", i) for i in range(2)
    ]
    assert rebalance_candidates(h.state, 10) == everything
    gone = h.state.topic("gone").topic_id
    h.deleting.add(gone)
    assert rebalance_candidates(h.state, 10, {gone}) == everything[8:]
    # The ratio counts only the topics not being deleted: 2 of 2 -> 100 %, but not above 100.
    assert rebalance_candidates(h.state, 100, {gone}) == []
    result = h.run(AutoLeaderRebalance())
    (topic,) = result.response.replica_election_results
    assert topic.topic == "keep" and [p.error_code for p in topic.partition_result] == [0, 0]
    assert {r.topic_id for r in result.records} == {h.state.topic("keep").topic_id}
