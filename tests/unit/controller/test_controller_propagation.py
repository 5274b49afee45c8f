"""Who gets which LeaderAndIsr / UpdateMetadata / StopReplica after an event."""

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
)
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.leader_and_isr import LeaderAndIsrType
from protocol.messages.topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from protocol.metadata.records import PartitionChangeRecord

CTRL = ControllerIdentity(controller_id=1, controller_epoch=5)
Harness = Any


@pytest.fixture
def h(make_harness: Callable[..., Harness]) -> Harness:
    return make_harness({1: None, 2: None, 3: None, 4: None})


def step(h: Harness, request: object) -> dict:
    before = h.state.image
    h.apply(request)
    return plan_propagation(before, h.state.image, CTRL)


def step_records(h: Harness, records: list) -> dict:
    before = h.state.image
    h.commit(records)
    return plan_propagation(before, h.state.image, CTRL)


def create(name: str, *assignments: tuple[int, ...]) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name=name,
                assignments=tuple(
                    CreatableReplicaAssignment(partition_index=i, broker_ids=a)
                    for i, a in enumerate(assignments)
                ),
            ),
        )
    )


def lai_partitions(plan: Any) -> dict[tuple[str, int], tuple[int, bool]]:
    if plan.leader_and_isr is None:
        return {}
    return {
        (t.topic_name, p.partition_index): (p.leader, p.is_new)
        for t in plan.leader_and_isr.topic_states
        for p in t.partition_states
    }


def test_create_topic_sends_leader_and_isr_to_replicas_and_metadata_to_all(h: Harness) -> None:
    plans = step(h, create("t", (1, 2), (2, 3)))
    assert sorted(plans) == [1, 2, 3, 4]
    assert lai_partitions(plans[1]) == {("t", 0): (1, True)}
    assert lai_partitions(plans[2]) == {("t", 0): (1, True), ("t", 1): (2, True)}
    assert plans[4].leader_and_isr is None
    lai = plans[2].leader_and_isr
    assert (lai.controller_id, lai.controller_epoch, lai.type) == (1, 5, 0)
    assert lai.broker_epoch == h.state.image.cluster.broker(2).epoch
    assert [ll.broker_id for ll in lai.live_leaders] == [1, 2]
    assert lai.live_leaders[0].port == 9001
    topic_id = h.state.topic("t").topic_id
    assert lai.topic_states[0].topic_id == topic_id
    for plan in plans.values():
        um = plan.update_metadata
        assert um is not None and [b.id for b in um.live_brokers] == [1, 2, 3, 4]
        assert {p.partition_index for t in um.topic_states for p in t.partition_states} == {0, 1}
        assert plan.stop_replica is None


def test_dead_broker_leader_moves_and_offline_replicas(h: Harness) -> None:
    h.apply(create("t", (1, 2, 3)))
    brokers = h.state.image.cluster.brokers
    before = h.state.image
    result = h.run(BrokerChange(tuple(LiveBroker(i, brokers[i].epoch) for i in (2, 3, 4))))
    h.commit(result.records)
    plans = plan_propagation(before, h.state.image, CTRL)
    assert sorted(plans) == [2, 3, 4]  # the dead broker gets nothing
    assert lai_partitions(plans[2]) == {("t", 0): (2, False)}
    assert lai_partitions(plans[3]) == {("t", 0): (2, False)}
    state = plans[4].update_metadata.topic_states[0].partition_states[0]
    assert (state.leader, state.isr, state.offline_replicas) == (2, (2, 3), (1,))
    assert [b.id for b in plans[4].update_metadata.live_brokers] == [2, 3, 4]


def test_broker_coming_up_gets_full_metadata_and_its_partitions(h: Harness) -> None:
    h.apply(create("t", (1, 2)))
    h.apply(create("u", (3, 4)))
    brokers = h.state.image.cluster.brokers
    h.commit(h.run(BrokerChange(tuple(LiveBroker(i, brokers[i].epoch) for i in (1, 3, 4)))).records)
    brokers = h.state.image.cluster.brokers
    before = h.state.image
    live = (*(LiveBroker(i, brokers[i].epoch) for i in (1, 3, 4)), LiveBroker(2, 500))
    h.commit(h.run(BrokerChange(live)).records)
    plans = plan_propagation(before, h.state.image, CTRL)
    assert lai_partitions(plans[2]) == {("t", 0): (1, False)}
    full = {t.topic_name for t in plans[2].update_metadata.topic_states}
    assert full == {"t", "u"}
    # Others only hear that the broker set changed (no partition changed).
    assert plans[3].update_metadata.topic_states == ()
    assert plans[3].leader_and_isr is None


def test_delete_topic_stops_and_deletes_replicas(h: Harness) -> None:
    h.apply(create("t", (1, 2)))
    old_id = h.state.topic("t").topic_id
    plans = step(h, DeleteTopicsRequest(topic_names=("t",)))
    stop = plans[1].stop_replica
    assert stop is not None and stop.topic_states[0].topic_id == old_id
    state = stop.topic_states[0].partition_states[0]
    assert (state.leader_epoch, state.delete_partition) == (EPOCH_DURING_DELETE, True)
    assert plans[3].stop_replica is None
    um_state = plans[3].update_metadata.topic_states[0].partition_states[0]
    assert um_state.leader == LEADER_DURING_DELETE


def test_recreated_topic_in_one_event_deletes_old_and_creates_new(h: Harness) -> None:
    h.apply(create("t", (1, 2)))
    old_id = h.state.topic("t").topic_id
    before = h.state.image
    h.apply(DeleteTopicsRequest(topic_names=("t",)))
    h.apply(create("t", (1, 2)))
    new_id = h.state.topic("t").topic_id
    plans = plan_propagation(before, h.state.image, CTRL)
    assert plans[1].stop_replica.topic_states[0].topic_id == old_id
    assert plans[1].leader_and_isr.topic_states[0].topic_id == new_id
    assert lai_partitions(plans[1]) == {("t", 0): (1, True)}


def test_controlled_shutdown_stops_followers_without_delete(h: Harness) -> None:
    h.apply(create("t", (1, 2), (2, 1)))
    epoch = h.state.image.cluster.broker(2).epoch
    plans = step(h, ControlledShutdownRequest(broker_id=2, broker_epoch=epoch))
    stop = plans[2].stop_replica
    assert stop is not None
    assert [(p.partition_index, p.delete_partition) for p in stop.topic_states[0].partition_states] == [
        (0, False),
        (1, False),
    ]  # fmt: skip
    assert lai_partitions(plans[1]) == {("t", 0): (1, False), ("t", 1): (1, False)}


def test_reassignment_removed_replica_gets_stop_replica_with_delete(h: Harness) -> None:
    h.apply(create("t", (1, 2)))
    topic_id = h.state.topic("t").topic_id
    plans = step_records(
        h, [PartitionChangeRecord(partition_id=0, topic_id=topic_id, replicas=(1, 3), isr=(1,))]
    )
    assert plans[2].stop_replica.topic_states[0].partition_states[0].delete_partition
    assert lai_partitions(plans[3]) == {("t", 0): (1, True)}
    assert lai_partitions(plans[1]) == {("t", 0): (1, False)}


def test_nothing_changed_nothing_sent(h: Harness) -> None:
    image = h.state.image
    assert plan_propagation(image, image, CTRL) == {}


def test_failover_sends_full_leader_and_isr_and_metadata(h: Harness) -> None:
    h.apply(create("t", (1, 2), (3, 4)))
    plans = plan_failover(h.state.image, CTRL)
    assert sorted(plans) == [1, 2, 3, 4]
    assert plans[1].leader_and_isr.type == LeaderAndIsrType.FULL
    assert lai_partitions(plans[4]) == {("t", 1): (3, False)}
    for plan in plans.values():
        assert len(plan.update_metadata.topic_states[0].partition_states) == 2
        assert len(plan.requests()) == 2
