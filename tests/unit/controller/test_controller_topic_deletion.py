"""Topic deletion in Kafka's ZK-mode order (controller.topic_deletion) and what propagation
sends while a topic is queued: StopReplica(delete) to live replicas only, Ineligible on dead
brokers until they come back, failed answers retried when a hosting broker starts, the
RemoveTopicRecord only once every replica answered; FULL LeaderAndIsr to a broker that comes
up; no LeaderAndIsr and leader -2 for a topic being deleted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.broker_lifecycle import BrokerChange, LiveBroker
from controller.propagation import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    ControllerIdentity,
    plan_failover,
    plan_propagation,
    plan_topic_deletion,
)
from controller.state_machines import ReplicaState
from controller.topic_deletion import (
    TopicDeletionManager,
    liveness_change,
    stop_replica_answers,
)
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrType
from protocol.messages.topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)

CTRL = ControllerIdentity(controller_id=1, controller_epoch=5)
Harness = Any


@pytest.fixture
def h(make_harness: Callable[..., Harness]) -> Harness:
    harness = make_harness({1: None, 2: None, 3: None})
    harness.apply(
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="t",
                    assignments=(
                        CreatableReplicaAssignment(partition_index=0, broker_ids=(1, 2)),
                        CreatableReplicaAssignment(partition_index=1, broker_ids=(2, 3)),
                    ),
                ),
            )
        )
    )
    return harness


def topic_id(h: Harness) -> str:
    return h.state.image.topics.by_name["t"].topic_id


def stops(step: Any) -> dict[int, list[int]]:
    return {b: [t.partition for t in targets] for b, targets in step.stop_replicas.items()}


def test_all_live_stop_replicas_then_complete(h: Harness) -> None:
    m = TopicDeletionManager()
    tid = topic_id(h)
    assert m.enqueue(h.state.image, ["t", "missing"]) == [tid]
    assert m.enqueue(h.state.image, ["t"]) == []  # queued once
    step = m.resume(h.state.image, {1, 2, 3}, [tid])
    assert stops(step) == {1: [0], 2: [0, 1], 3: [1]}
    assert step.complete == () and step.newly_queued == (tid,)
    # Nothing new while answers are pending.
    assert m.resume(h.state.image, {1, 2, 3}).empty
    m.stop_replica_answered(1, [(tid, 0, 0)])
    m.stop_replica_answered(2, [(tid, 0, 0), (tid, 1, 0)])
    assert m.resume(h.state.image, {1, 2, 3}).complete == ()
    m.stop_replica_answered(3, [(tid, 1, 0)])
    assert m.resume(h.state.image, {1, 2, 3}).complete == (tid,)
    assert m.resume(h.state.image, {1, 2, 3}).complete == ()  # offered once
    h.apply(DeleteTopicsRequest(topic_names=("t",)))
    assert m.forget_removed(h.state.image) == [tid]
    assert m.deleting_ids() == frozenset()


def test_dead_replica_waits_until_its_broker_is_back(h: Harness) -> None:
    m = TopicDeletionManager()
    tid = topic_id(h)
    m.enqueue(h.state.image, ["t"])
    step = m.resume(h.state.image, {1, 2})  # broker 3 is down
    assert stops(step) == {1: [0], 2: [0, 1]}
    assert m.replica_state(tid, 1, 3) is ReplicaState.DELETION_INELIGIBLE
    assert m.is_ineligible(tid)
    m.stop_replica_answered(1, [(tid, 0, 0)])
    m.stop_replica_answered(2, [(tid, 0, 0), (tid, 1, 0)])
    step = m.resume(h.state.image, {1, 2})
    assert step.empty  # retried to Offline, but the topic stays ineligible
    assert m.replica_state(tid, 1, 3) is ReplicaState.OFFLINE
    m.brokers_changed(dead=set(), started={3})
    step = m.resume(h.state.image, {1, 2, 3})
    assert stops(step) == {3: [1]}
    m.stop_replica_answered(3, [(tid, 1, 0)])
    assert m.resume(h.state.image, {1, 2, 3}).complete == (tid,)


def test_broker_dying_with_stop_replica_in_flight(h: Harness) -> None:
    m = TopicDeletionManager()
    tid = topic_id(h)
    m.enqueue(h.state.image, ["t"])
    m.resume(h.state.image, {1, 2, 3})
    m.brokers_changed(dead={3}, started=set())
    assert m.replica_state(tid, 1, 3) is ReplicaState.DELETION_INELIGIBLE
    # The late answer of the dead broker's earlier attempt changes nothing.
    m.stop_replica_answered(3, [(tid, 1, 0)])
    assert m.replica_state(tid, 1, 3) is ReplicaState.DELETION_INELIGIBLE
    # A bounced broker (new epoch) is dead and started at once: retried.
    dead, started = liveness_change({1: 10, 2: 20}, {1: 10, 2: 21, 3: 30})
    assert (dead, started) == ({2}, {2, 3})


def test_failed_answer_is_ineligible_and_retried_when_a_hosting_broker_starts(h: Harness) -> None:
    m = TopicDeletionManager()
    tid = topic_id(h)
    m.enqueue(h.state.image, ["t"])
    m.resume(h.state.image, {1, 2, 3})
    m.stop_replica_answered(1, [(tid, 0, int(ErrorCode.KAFKA_STORAGE_ERROR))])
    m.stop_replica_answered(2, [(tid, 0, 0), (tid, 1, 0)])
    m.stop_replica_answered(3, [(tid, 1, 0)])
    assert m.replica_state(tid, 0, 1) is ReplicaState.DELETION_INELIGIBLE
    assert m.resume(h.state.image, {1, 2, 3}).empty  # as Kafka: not in a tight loop
    m.brokers_changed(dead={1}, started={1})  # broker 1 restarted
    step = m.resume(h.state.image, {1, 2, 3})
    assert stops(step) == {1: [0]}
    m.stop_replica_answered(1, [(tid, 0, 0)])
    assert m.resume(h.state.image, {1, 2, 3}).complete == (tid,)


def test_stop_replica_answers_only_count_deletion_partitions() -> None:
    sent = [
        ("t", "T", [(0, EPOCH_DURING_DELETE, True), (1, 4, True)]),
        ("u", "U", [(0, EPOCH_DURING_DELETE, True)]),
    ]
    answers = stop_replica_answers(sent, 0, [("t", 0, 0), ("t", 1, 0)])
    # u-0 is missing from the answer: failed.
    assert answers == [("T", 0, 0), ("U", 0, int(ErrorCode.UNKNOWN_SERVER_ERROR))]
    stale = int(ErrorCode.STALE_BROKER_EPOCH)
    assert stop_replica_answers(sent, stale, []) == [("T", 0, stale), ("U", 0, stale)]


def test_propagation_while_deleting_sends_no_leader_and_isr(h: Harness) -> None:
    tid = topic_id(h)
    brokers = h.state.image.cluster.brokers
    h.commit(h.run(BrokerChange(tuple(LiveBroker(i, brokers[i].epoch) for i in (1, 2)))).records)
    before = h.state.image
    brokers = h.state.image.cluster.brokers
    live = (*(LiveBroker(i, brokers[i].epoch) for i in (1, 2)), LiveBroker(3, 900))
    h.commit(h.run(BrokerChange(live)).records)
    plans = plan_propagation(before, h.state.image, CTRL, deleting={tid})
    # The broker coming back gets a FULL LeaderAndIsr without the topic being deleted: it
    # deletes its replica as a stray rather than serving it.
    lai = plans[3].leader_and_isr
    assert lai is not None and lai.type == LeaderAndIsrType.FULL and lai.topic_states == ()
    for plan in plans.values():
        assert plan.leader_and_isr is None or plan.leader_and_isr.topic_states == ()
    leaders = {
        p.leader
        for t in plans[3].update_metadata.topic_states
        for p in t.partition_states
        if t.topic_id == tid
    }
    assert leaders == {LEADER_DURING_DELETE}
    # Without the deletion the same event sends the broker its partitions (FULL).
    plans = plan_propagation(before, h.state.image, CTRL)
    assert plans[3].leader_and_isr.type == LeaderAndIsrType.FULL
    assert len(plans[3].leader_and_isr.topic_states[0].partition_states) == 1


def test_removal_after_deletion_sends_no_second_stop_replica(h: Harness) -> None:
    tid = topic_id(h)
    before = h.state.image
    h.apply(DeleteTopicsRequest(topic_names=("t",)))
    plans = plan_propagation(before, h.state.image, CTRL, deleting={tid})
    assert all(p.stop_replica is None for p in plans.values())
    assert all(p.update_metadata is not None for p in plans.values())
    plans = plan_propagation(before, h.state.image, CTRL)
    assert plans[1].stop_replica is not None


def test_failover_leaves_deleting_topics_out_and_sends_full_to_everyone(
    make_harness: Callable[..., Harness],
) -> None:
    h = make_harness({1: None, 2: None, 3: None, 4: None})
    h.apply(
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="t",
                    assignments=(CreatableReplicaAssignment(partition_index=0, broker_ids=(1,)),),
                ),
            )
        )
    )
    tid = topic_id(h)
    plans = plan_failover(h.state.image, CTRL, deleting={tid})
    assert sorted(plans) == [1, 2, 3, 4]
    for plan in plans.values():
        assert plan.leader_and_isr.type == LeaderAndIsrType.FULL
        assert plan.leader_and_isr.topic_states == ()
        states = plan.update_metadata.topic_states[0].partition_states
        assert [s.leader for s in states] == [LEADER_DURING_DELETE]


def test_plan_topic_deletion(h: Harness) -> None:
    tid = topic_id(h)
    plans = plan_topic_deletion(
        h.state.image, CTRL, newly_queued=[tid], stop_replicas={2: [("t", tid, 0), ("t", tid, 1)]}
    )
    assert sorted(plans) == [1, 2, 3]
    stop = plans[2].stop_replica
    assert stop is not None and plans[1].stop_replica is None
    states = stop.topic_states[0].partition_states
    assert [(s.partition_index, s.leader_epoch, s.delete_partition) for s in states] == [
        (0, EPOCH_DURING_DELETE, True),
        (1, EPOCH_DURING_DELETE, True),
    ]
    assert stop.topic_states[0].topic_id == tid
    assert {p.leader for p in plans[3].update_metadata.topic_states[0].partition_states} == {
        LEADER_DURING_DELETE
    }
    assert all(p.leader_and_isr is None for p in plans.values())
    # StopReplicas alone (a retry) carry no UpdateMetadata.
    plans = plan_topic_deletion(h.state.image, CTRL, newly_queued=(), stop_replicas={3: []})
    assert plans == {} or all(p.update_metadata is None for p in plans.values())
