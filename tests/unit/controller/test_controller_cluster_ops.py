"""BrokerChange, ControlledShutdown, AlterPartition, ElectLeaders and the rebalance check."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from controller.broker_lifecycle import BrokerChange, LiveBroker
from controller.elect_leaders import AutoLeaderRebalance, rebalance_candidates
from protocol.errors import ErrorCode
from protocol.messages.alter_partition import (
    AlterPartitionPartition,
    AlterPartitionRequest,
    AlterPartitionTopic,
)
from protocol.messages.configs import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
    ResourceType,
)
from protocol.messages.controlled_shutdown import ControlledShutdownRequest, RemainingPartition
from protocol.messages.elect_leaders import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersTopicPartitions,
)
from protocol.messages.topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
)
from protocol.metadata.image import PartitionRegistration
from protocol.metadata.records import (
    NO_LEADER,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from protocol.names import TopicPartition

Harness = Any


def create(h: Harness, name: str, *assignments: tuple[int, ...]) -> str:
    response = h.apply(
        CreateTopicsRequest(
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
    )
    assert response.topics[0].error_code == 0, response
    return response.topics[0].topic_id


def part(h: Harness, name: str, pid: int = 0) -> PartitionRegistration:
    topic = h.state.topic(name)
    assert topic is not None
    return topic.partitions[pid]


def lia(p: PartitionRegistration) -> tuple[int, tuple[int, ...]]:
    return p.leader, p.isr


def live(h: Harness, *ids: int) -> BrokerChange:
    """The registered brokers are `ids`, with the epochs they have (new ones get 1000 + id)."""
    brokers = h.state.image.cluster.brokers
    return BrokerChange(
        tuple(LiveBroker(i, brokers[i].epoch if i in brokers else 1000 + i, rack=None) for i in ids)
    )


def set_unclean(h: Harness, topic: str) -> None:
    h.apply(
        IncrementalAlterConfigsRequest(
            resources=(
                AlterConfigsResource(
                    resource_type=int(ResourceType.TOPIC),
                    resource_name=topic,
                    configs=(
                        AlterableConfig(
                            name="unclean.leader.election.enable",
                            config_operation=int(AlterConfigOp.SET),
                            value="true",
                        ),
                    ),
                ),
            )
        )
    )


@pytest.fixture
def h(make_harness: Callable[..., Harness]) -> Harness:
    return make_harness({1: None, 2: None, 3: None})


# BrokerChange.


def test_dead_leader_reelected_and_removed_from_isrs(h: Harness) -> None:
    create(h, "t", (1, 2, 3), (2, 1, 3), (3, 2, 1))
    result = h.run(live(h, 2, 3))
    assert result.response.dead_broker_ids == (1,)
    assert isinstance(result.records[0], UnregisterBrokerRecord)
    h.commit(result.records)
    assert lia(part(h, "t", 0)) == (2, (2, 3))
    assert lia(part(h, "t", 1)) == (2, (2, 3))
    assert part(h, "t", 1).leader_epoch == 1  # follower removal bumps the leader epoch
    assert lia(part(h, "t", 2)) == (3, (3, 2))
    assert h.state.image.cluster.broker(1) is None


def test_a_dead_brokers_elections_come_before_the_shrinks_in_batches(h: Harness) -> None:
    """The controller appends a large BrokerChange in batches and propagates each: the new
    leaders first, as Kafka's onBrokerFailure elects before it takes replicas offline (the
    result used to be one atomic write in partition order)."""
    create(h, "t", (2, 1, 3), (1, 2, 3), (3, 1, 2), (2, 3, 1), (1, 3, 2))
    result = h.run(live(h, 2, 3))
    assert not result.atomic
    changes = [r for r in result.records if isinstance(r, PartitionChangeRecord)]
    # Partitions 1 and 4 were led by the dead broker 1; the others only lose it from the ISR.
    assert [r.partition_id for r in changes] == [1, 4, 0, 2, 3]
    assert [r.leader for r in changes[:2]] == [2, 3]


def test_replica_dead_before_failover_leaves_isrs_it_only_followed(h: Harness) -> None:
    # A new controller loads /brokers/ids without broker 3, but the partition state znodes still
    # list 3 in ISRs: its first BrokerChange takes 3 out of them, as Kafka's replica state
    # machine takes replicas on dead brokers offline at controller start-up.
    create(h, "t", (1, 2, 3), (3, 1, 2))
    h.commit(
        [UnregisterBrokerRecord(broker_id=3, broker_epoch=h.state.image.cluster.broker(3).epoch)]
    )
    assert lia(part(h, "t", 0)) == (1, (1, 2, 3))  # nothing has noticed yet
    result = h.run(live(h, 1, 2))
    assert result.response.dead_broker_ids == ()  # not registered: not "newly" dead
    h.commit(result.records)
    assert lia(part(h, "t", 0)) == (1, (1, 2))  # followed only: leaves the ISR
    assert lia(part(h, "t", 1)) == (1, (1, 2))  # led: re-elected from the ISR in order


def test_last_isr_member_dies_stays_in_isr_leaderless_then_returns(h: Harness) -> None:
    create(h, "t", (1, 2))
    h.commit(h.run(live(h, 1, 3)).records)  # 2 dies: ISR (1)
    assert lia(part(h, "t")) == (1, (1,))
    h.commit(h.run(live(h, 3)).records)  # 1 dies too: ISR stays (1), no leader
    assert lia(part(h, "t")) == (NO_LEADER, (1,))
    h.commit(h.run(live(h, 2, 3)).records)  # 2 back: not in sync, clean election fails
    assert lia(part(h, "t")) == (NO_LEADER, (1,))
    result = h.run(live(h, 1, 2, 3))  # 1 back: leads again, cleanly
    assert result.response.new_broker_ids == (1,)
    h.commit(result.records)
    assert lia(part(h, "t")) == (1, (1,))


def test_unclean_topic_elects_out_of_sync_replica(h: Harness) -> None:
    create(h, "t", (1, 2))
    h.commit(h.run(live(h, 1, 3)).records)
    set_unclean(h, "t")
    h.commit(h.run(live(h, 3)).records)
    assert lia(part(h, "t")) == (NO_LEADER, (1,))
    h.commit(h.run(live(h, 2, 3)).records)
    p = part(h, "t")
    assert lia(p) == (2, (2,)) and p.leader_recovery_state == 1


def test_bounced_broker_loses_leadership_and_reregisters(h: Harness) -> None:
    create(h, "t", (1, 2, 3))
    old_epoch = h.state.image.cluster.broker(1).epoch
    change = BrokerChange(
        (
            LiveBroker(1, old_epoch + 50),
            *(
                LiveBroker(i, h.state.image.cluster.broker(i).epoch)  # unchanged
                for i in (2, 3)
            ),
        )
    )
    result = h.run(change)
    assert result.response.bounced_broker_ids == (1,)
    h.commit(result.records)
    assert h.state.image.cluster.broker(1).epoch == old_epoch + 50
    assert lia(part(h, "t")) == (2, (2, 3))


def test_broker_change_without_changes_writes_nothing(h: Harness) -> None:
    create(h, "t", (1, 2, 3))
    assert h.run(live(h, 1, 2, 3)).records == []


def test_new_partition_gets_a_leader_when_a_replica_appears(
    make_harness: Callable[..., Harness],
) -> None:
    h = make_harness({1: None, 2: None})
    create(h, "t", (1, 2))
    h.commit(h.run(live(h)).records)  # everybody gone
    assert lia(part(h, "t")) == (NO_LEADER, (1, 2))
    h.commit(h.run(live(h, 2)).records)
    assert lia(part(h, "t")) == (2, (2,))


# ControlledShutdown.


def test_controlled_shutdown_moves_leaders_and_leaves_isrs(h: Harness) -> None:
    create(h, "t", (1, 2, 3), (2, 1, 3))
    create(h, "u", (1,))
    create(h, "v", (1, 2))
    h.commit(h.run(live(h, 1, 3)).records)  # 2 gone: v-0 has ISR (1)
    epoch = h.state.image.cluster.broker(1).epoch
    result = h.run(ControlledShutdownRequest(broker_id=1, broker_epoch=epoch))
    assert isinstance(result.records[0], RegisterBrokerRecord)
    assert result.records[0].in_controlled_shutdown
    h.commit(result.records)
    assert lia(part(h, "t", 0)) == (3, (3,))
    assert lia(part(h, "t", 1)) == (3, (3,))
    # RF 1 and no other in-sync replica: broker 1 keeps leading, reported as remaining.
    assert lia(part(h, "u")) == (1, (1,))
    assert lia(part(h, "v")) == (1, (1,))
    assert result.response.remaining_partitions == (
        RemainingPartition(topic_name="u", partition_index=0),
        RemainingPartition(topic_name="v", partition_index=0),
    )
    again = h.run(ControlledShutdownRequest(broker_id=1, broker_epoch=epoch))
    assert again.records == [] and len(again.response.remaining_partitions) == 2
    # A shutting-down broker is not elected, and a broker change keeps its leaderships.
    assert h.run(live(h, 1, 3)).records == []


@pytest.mark.parametrize(
    ("broker_id", "epoch_delta", "code"),
    [
        (9, 0, ErrorCode.BROKER_NOT_AVAILABLE),
        (3, -1, ErrorCode.STALE_BROKER_EPOCH),
        (3, 1, ErrorCode.STALE_BROKER_EPOCH),
        (3, None, ErrorCode.STALE_BROKER_EPOCH),
    ],
)
def test_controlled_shutdown_refusals(
    h: Harness, broker_id: int, epoch_delta: int | None, code: ErrorCode
) -> None:
    """A broker epoch of -1 (Kafka's pre-2.2 brokers) is refused too: without it anyone moved a
    broker's leaderships away. The current epoch is never in the message."""
    current = h.state.image.cluster.broker(3).epoch
    epoch = -1 if epoch_delta is None else current + epoch_delta
    with pytest.raises(Exception) as info:
        h.run(ControlledShutdownRequest(broker_id=broker_id, broker_epoch=epoch))
    assert info.value.code is code
    assert f"epoch {current}" not in info.value.message


# AlterPartition.


def alter(
    h: Harness,
    topic_id: str,
    new_isr: tuple[int, ...],
    *,
    broker: int = 1,
    broker_epoch: int | None = None,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
    recovery: int = 0,
    pid: int = 0,
) -> AlterPartitionRequest:
    return AlterPartitionRequest(
        broker_id=broker,
        broker_epoch=h.state.image.cluster.broker(broker).epoch
        if broker_epoch is None
        else broker_epoch,
        topics=(
            AlterPartitionTopic(
                topic_name="t",
                topic_id=topic_id,
                partitions=(
                    AlterPartitionPartition(
                        partition_index=pid,
                        leader_epoch=leader_epoch,
                        new_isr=new_isr,
                        partition_epoch=partition_epoch,
                        leader_recovery_state=recovery,
                    ),
                ),
            ),
        ),
    )


def test_alter_partition_shrink_and_expand(h: Harness) -> None:
    tid = create(h, "t", (1, 2, 3))
    result = h.run(alter(h, tid, (1, 2)))
    (record,) = result.records
    assert isinstance(record, PartitionChangeRecord) and record.leader == -2  # no epoch bump
    h.commit(result.records)
    got = result.response.topics[0].partitions[0]
    assert (got.error_code, got.isr, got.leader_epoch, got.partition_epoch) == (0, (1, 2), 0, 1)
    # A retry of the same proposal is answered with the current state, no record.
    retry = h.run(alter(h, tid, (1, 2)))
    assert retry.records == [] and retry.response.topics[0].partitions[0].partition_epoch == 1
    expand = h.run(alter(h, tid, (1, 2, 3), partition_epoch=1))
    assert expand.response.topics[0].partitions[0].isr == (1, 2, 3)


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"topic_id": "AAAAAAAAAAAAAAAAAAAABQ"}, ErrorCode.UNKNOWN_TOPIC_ID),
        ({"pid": 5}, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ({"leader_epoch": 1}, ErrorCode.FENCED_LEADER_EPOCH),
        ({"broker": 2, "new_isr": (2, 3)}, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ({"partition_epoch": 3}, ErrorCode.INVALID_UPDATE_VERSION),
        ({"new_isr": (1, 9)}, ErrorCode.INVALID_REQUEST),
        ({"new_isr": (1, 1)}, ErrorCode.INVALID_REQUEST),
        ({"new_isr": (2, 3)}, ErrorCode.INVALID_REQUEST),
        ({"new_isr": (1,), "recovery": 1}, ErrorCode.INVALID_REQUEST),
        ({"new_isr": (1, 2, 3, 4)}, ErrorCode.INVALID_REQUEST),
    ],
)
def test_alter_partition_partition_errors(h: Harness, kwargs: dict, code: ErrorCode) -> None:
    tid = create(h, "t", (1, 2, 3))
    h.commit(h.run(alter(h, tid, (1, 2))).records)
    args = {"new_isr": (1, 3), "partition_epoch": 1} | kwargs
    topic_id = args.pop("topic_id", tid)
    result = h.run(alter(h, topic_id, **args))
    assert result.records == []
    assert result.response.topics[0].partitions[0].error_code == code


def test_alter_partition_stale_broker_epoch_and_ineligible_replica(h: Harness) -> None:
    tid = create(h, "t", (1, 2, 3))
    stale = h.run(alter(h, tid, (1, 2), broker_epoch=12345))
    assert stale.response.error_code == ErrorCode.STALE_BROKER_EPOCH and stale.records == []
    h.commit(h.run(live(h, 1, 2)).records)  # 3 dies: ISR (1, 2), leader epoch 1
    p = part(h, "t")
    result = h.run(alter(h, tid, (1, 2, 3), leader_epoch=p.leader_epoch, partition_epoch=1))
    assert result.response.topics[0].partitions[0].error_code == ErrorCode.INELIGIBLE_REPLICA


def test_alter_partition_stale_topic_id_after_recreate(h: Harness) -> None:
    old = create(h, "t", (1, 2, 3))
    h.apply(DeleteTopicsRequest(topic_names=("t",)))
    new = create(h, "t", (1, 2, 3))
    assert new != old
    result = h.run(alter(h, old, (1, 2)))
    assert result.response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


# ElectLeaders and the rebalance check.


def elect(h: Harness, kind: ElectionType, *tps: tuple[str, int], all_: bool = False) -> Any:
    request = ElectLeadersRequest(
        election_type=int(kind),
        topic_partitions=None
        if all_
        else tuple(ElectLeadersTopicPartitions(topic=t, partitions=(p,)) for t, p in tps),
    )
    result = h.run(request)
    h.commit(result.records)
    return {
        (t.topic, r.partition_id): r.error_code
        for t in result.response.replica_election_results
        for r in t.partition_result
    }


def test_elect_preferred(h: Harness) -> None:
    create(h, "t", (1, 2, 3), (2, 3, 1))
    h.commit(h.run(live(h, 2, 3)).records)  # 1 dies: t-0 led by 2
    assert elect(h, ElectionType.PREFERRED, ("t", 0)) == {
        ("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    }
    h.commit(h.run(live(h, 1, 2, 3)).records)  # back, but not in the ISR yet
    assert elect(h, ElectionType.PREFERRED, ("t", 0)) == {
        ("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    }
    tid = h.state.topic("t").topic_id
    p = part(h, "t")
    h.commit(h.run(alter(h, tid, (2, 3, 1), broker=2, leader_epoch=p.leader_epoch,
                         partition_epoch=p.partition_epoch)).records)  # fmt: skip
    assert elect(h, ElectionType.PREFERRED, ("t", 0), ("t", 1), ("x", 0)) == {
        ("t", 0): 0,
        ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
        ("x", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert part(h, "t").leader == 1
    assert elect(h, ElectionType.PREFERRED, all_=True) == {}  # all preferred now


def test_elect_unclean(h: Harness) -> None:
    create(h, "t", (1, 2), (3, 2))
    h.commit(h.run(live(h, 1, 3)).records)
    h.commit(h.run(live(h, 3)).records)
    assert lia(part(h, "t")) == (NO_LEADER, (1,))
    assert elect(h, ElectionType.UNCLEAN, ("t", 0)) == {
        ("t", 0): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    }
    h.commit(h.run(live(h, 2, 3)).records)
    assert elect(h, ElectionType.UNCLEAN, ("t", 0), ("t", 1)) == {
        ("t", 0): 0,
        ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
    }
    assert lia(part(h, "t")) == (2, (2,)) and part(h, "t").leader_recovery_state == 1


def test_unknown_election_type(h: Harness) -> None:
    with pytest.raises(Exception, match="Unknown election type 7"):
        h.run(ElectLeadersRequest(election_type=7))


def test_rebalance_candidates_follow_the_imbalance_ratio(
    make_harness: Callable[..., Harness],
) -> None:
    h = make_harness({1: None, 2: None, 3: None}, leader_imbalance_per_broker_percentage=10)
    create(h, "t", *[(1, 2, 3)] * 5, *[(2, 1, 3)] * 5)
    h.commit(h.run(live(h, 2, 3)).records)  # 1 gone: 2 leads everything
    h.commit(h.run(live(h, 1, 2, 3)).records)
    tid = h.state.topic("t").topic_id
    for pid in range(10):  # broker 1 catches up everywhere
        p = part(h, "t", pid)
        h.commit(h.run(alter(h, tid, (*p.isr, 1), broker=p.leader, leader_epoch=p.leader_epoch,
                             partition_epoch=p.partition_epoch, pid=pid)).records)  # fmt: skip
    assert rebalance_candidates(h.state, 10) == [TopicPartition("t", i) for i in range(5)]
    assert rebalance_candidates(h.state, 100) == []
    result = h.run(AutoLeaderRebalance())
    (topic,) = result.response.replica_election_results
    assert [r.error_code for r in topic.partition_result] == [0] * 5
    h.commit(result.records)
    assert [part(h, "t", i).leader for i in range(10)] == [1] * 5 + [2] * 5
    assert rebalance_candidates(h.state, 0) == []
