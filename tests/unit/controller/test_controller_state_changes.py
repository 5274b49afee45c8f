"""The controller going through Kafka's partition and replica state machines: the state changes
each operation makes (derived states, checked transitions), their log, and an invalid
transition failing the operation with an error naming the partition and both states."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from controller import topics as topics_module
from controller.metrics import ControllerMetrics
from controller.service.driver import ControllerDriver
from controller.state_machines import (
    IllegalStateTransition,
    PartitionState,
    ReplicaState,
    StateChange,
    StateChangeLog,
)
from protocol.errors import ErrorCode
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.elect_leaders import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersTopicPartitions,
)
from protocol.messages.topics import DeleteTopicsRequest
from protocol.metadata.records import MetadataRecord
from tests.unit.controller.test_controller_cluster_ops import create, live

Harness = Any
P = PartitionState
R = ReplicaState


@pytest.fixture
def h(make_harness: Callable[..., Harness]) -> Harness:
    return make_harness({1: None, 2: None, 3: None})


def partitions(changes: Sequence[StateChange]) -> list[tuple[str, str, str, bool]]:
    return [
        (c.what, c.current.value, c.target.value, c.reached) for c in changes if c.replica is None
    ]


def replicas(changes: Sequence[StateChange]) -> list[tuple[str, str, str]]:
    return [(c.what, c.current.value, c.target.value) for c in changes if c.replica is not None]


# -- the checks ----------------------------------------------------------------------------------


def test_invalid_partition_transition_names_partition_and_both_states() -> None:
    sm = StateChangeLog()
    with pytest.raises(IllegalStateTransition) as info:
        sm.partition("t", 3, P.ONLINE, P.NEW)
    message = str(info.value)
    assert "Partition t-3" in message
    assert "before moving to NewPartition state" in message
    assert "Instead it is in OnlinePartition state" in message
    with pytest.raises(IllegalStateTransition, match=r"t-0.*NonExistentPartition state"):
        sm.partition("t", 0, P.NON_EXISTENT, P.ONLINE)
    # A change whose records end somewhere else than its target or its start is a bug too.
    with pytest.raises(IllegalStateTransition, match="t-1 ends in NonExistentPartition"):
        sm.partition("t", 1, P.OFFLINE, P.ONLINE, P.NON_EXISTENT)
    assert sm.changes == []


def test_invalid_replica_transition_names_replica_and_both_states() -> None:
    sm = StateChangeLog()
    with pytest.raises(IllegalStateTransition) as info:
        sm.replica("t", 0, 2, R.ONLINE, R.DELETION_STARTED)
    message = str(info.value)
    assert "[Topic=t,Partition=0,Replica=2]" in message
    assert "ReplicaDeletionStarted" in message and "OnlineReplica state" in message


def test_failed_change_stays_in_its_state() -> None:
    sm = StateChangeLog()
    assert sm.partition("t", 0, P.OFFLINE, P.ONLINE, P.OFFLINE) is P.OFFLINE
    assert sm.partition("t", 1, P.ONLINE, P.ONLINE, failed=True) is P.ONLINE
    assert [c.reached for c in sm.changes] == [False, False]
    assert sm.changes[0].transition == "OfflinePartition->OnlinePartition"


# -- operations ----------------------------------------------------------------------------------


def test_create_topic_moves_partitions_and_replicas_new_then_online(h: Harness) -> None:
    from protocol.messages.topics import (
        CreatableReplicaAssignment,
        CreatableTopic,
        CreateTopicsRequest,
    )

    request = CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name="t",
                assignments=(CreatableReplicaAssignment(partition_index=0, broker_ids=(1, 2)),),
            ),
        )
    )
    changes = h.run(request).state_changes
    assert partitions(changes) == [
        ("t-0", "NonExistentPartition", "NewPartition", True),
        ("t-0", "NewPartition", "OnlinePartition", True),
    ]
    assert replicas(changes) == [
        ("[Topic=t,Partition=0,Replica=1]", "NonExistentReplica", "NewReplica"),
        ("[Topic=t,Partition=0,Replica=2]", "NonExistentReplica", "NewReplica"),
        ("[Topic=t,Partition=0,Replica=1]", "NewReplica", "OnlineReplica"),
        ("[Topic=t,Partition=0,Replica=2]", "NewReplica", "OnlineReplica"),
    ]


def test_broker_failure_offline_then_online_and_replicas_offline(h: Harness) -> None:
    create(h, "t", (1, 2, 3), (2, 3, 1))
    create(h, "u", (1,))
    result = h.run(live(h, 2, 3))  # broker 1 dies
    assert partitions(result.state_changes) == [
        ("t-0", "OnlinePartition", "OfflinePartition", True),
        ("t-0", "OfflinePartition", "OnlinePartition", True),  # 2 elected
        # t-1 is led by 2: no partition state change, only its replica on 1 goes offline
        ("u-0", "OnlinePartition", "OfflinePartition", True),
        ("u-0", "OfflinePartition", "OnlinePartition", False),  # nobody left to lead
    ]
    assert replicas(result.state_changes) == [
        (f"[Topic={t},Partition={p},Replica=1]", "OnlineReplica", "OfflineReplica")
        for t, p in (("t", 0), ("t", 1), ("u", 0))
    ]
    h.commit(result.records)
    # Broker 1 comes back: its replicas go online, the offline partition gets its leader back.
    result = h.run(live(h, 1, 2, 3))
    assert replicas(result.state_changes) == [
        (f"[Topic={t},Partition={p},Replica=1]", "OfflineReplica", "OnlineReplica")
        for t, p in (("t", 0), ("t", 1), ("u", 0))
    ]
    assert partitions(result.state_changes) == [
        ("u-0", "OfflinePartition", "OnlinePartition", True)
    ]


def test_bounced_broker_goes_offline_then_online(h: Harness) -> None:
    from controller.broker_lifecycle import BrokerChange, LiveBroker

    create(h, "t", (1, 2))
    brokers = h.state.image.cluster.brokers
    change = BrokerChange(
        (LiveBroker(1, brokers[1].epoch + 100), LiveBroker(2, brokers[2].epoch), LiveBroker(3, 3))
    )
    changes = h.run(change).state_changes
    assert replicas(changes) == [
        ("[Topic=t,Partition=0,Replica=1]", "OnlineReplica", "OfflineReplica"),
        ("[Topic=t,Partition=0,Replica=1]", "OfflineReplica", "OnlineReplica"),
    ]
    assert partitions(changes) == [
        ("t-0", "OnlinePartition", "OfflinePartition", True),
        ("t-0", "OfflinePartition", "OnlinePartition", True),
    ]


def test_controlled_shutdown_led_partitions_online_followed_replicas_offline(h: Harness) -> None:
    create(h, "t", (1, 2), (2, 1))
    create(h, "u", (1,))
    epoch = h.state.image.cluster.broker(1).epoch
    changes = h.run(ControlledShutdownRequest(broker_id=1, broker_epoch=epoch)).state_changes
    assert partitions(changes) == [("t-0", "OnlinePartition", "OnlinePartition", True)]
    assert replicas(changes) == [
        ("[Topic=t,Partition=1,Replica=1]", "OnlineReplica", "OfflineReplica")
    ]
    # u-0 has a single replica: Kafka's controlled shutdown leaves it alone.


def test_controlled_shutdown_without_another_leader_is_a_failed_change(h: Harness) -> None:
    create(h, "t", (1, 2))
    h.commit(h.run(live(h, 1, 3)).records)  # 2 leaves: ISR (1)
    h.commit(h.run(live(h, 1, 2, 3)).records)  # back, not in sync
    epoch = h.state.image.cluster.broker(1).epoch
    changes = h.run(ControlledShutdownRequest(broker_id=1, broker_epoch=epoch)).state_changes
    assert partitions(changes) == [("t-0", "OnlinePartition", "OnlinePartition", False)]


def test_elect_leaders_goes_through_online(h: Harness) -> None:
    create(h, "t", (1, 2, 3))
    h.commit(h.run(live(h, 2, 3)).records)
    h.commit(h.run(live(h, 1, 2, 3)).records)
    request = ElectLeadersRequest(
        election_type=int(ElectionType.PREFERRED),
        topic_partitions=(ElectLeadersTopicPartitions(topic="t", partitions=(0,)),),
    )
    # 1 is not in the ISR: the preferred election fails, the partition stays Online under 2.
    assert partitions(h.run(request).state_changes) == [
        ("t-0", "OnlinePartition", "OnlinePartition", False)
    ]


def test_delete_topic_offline_then_non_existent(h: Harness) -> None:
    create(h, "t", (1, 2), (2, 1))
    changes = h.run(DeleteTopicsRequest(topic_names=("t",))).state_changes
    assert partitions(changes) == [
        ("t-0", "OnlinePartition", "OfflinePartition", True),
        ("t-0", "OfflinePartition", "NonExistentPartition", True),
        ("t-1", "OnlinePartition", "OfflinePartition", True),
        ("t-1", "OfflinePartition", "NonExistentPartition", True),
    ]


# -- through the driver ----------------------------------------------------------------------


class OffsetLog:
    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset
        self.appended: list[MetadataRecord] = []

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        self.appended.extend(records)
        self.next_offset += len(records)
        return self.next_offset - 1

    async def wait_committed(self, offset: int) -> None:
        return None


async def test_driver_logs_state_changes_after_commit(h: Harness) -> None:
    create(h, "t", (1, 2, 3))
    create(h, "u", (1,))
    log = OffsetLog(h.state.next_offset)
    driver = ControllerDriver(log, h.state, h.ctx, metrics=ControllerMetrics(CollectorRegistry()))
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        with capture_logs() as logs:
            await driver.submit(live(h, 2, 3))
        nursery.cancel_scope.cancel()
    summary = next(e for e in logs if e["event"] == "state changes")
    assert summary["trigger"] == "BrokerChange"
    assert summary["changes"] == {
        "OfflinePartition->OnlinePartition": 2,
        "OnlinePartition->OfflinePartition": 2,
        "OnlineReplica->OfflineReplica": 2,
    }
    failed = next(e for e in logs if e["event"] == "state changes failed")
    assert failed["count"] == 1 and failed["changes"] == ["u-0 OfflinePartition->OnlinePartition"]
    assert failed["log_level"] == "warning"


async def test_an_invalid_transition_fails_the_operation_before_any_record(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(h, "t", (1, 2))
    # A bug: the deletion believes the partition does not exist (NonExistent -> Offline).
    monkeypatch.setattr(topics_module, "partition_state", lambda *_: PartitionState.NON_EXISTENT)
    log = OffsetLog(h.state.next_offset)
    driver = ControllerDriver(log, h.state, h.ctx, metrics=ControllerMetrics(CollectorRegistry()))
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        with capture_logs():
            response = await driver.submit(DeleteTopicsRequest(topic_names=("t",)))
        nursery.cancel_scope.cancel()
    assert response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "Partition t-0" in response.error_message
    assert "NonExistentPartition" in response.error_message
    assert "OfflinePartition" in response.error_message
    assert log.appended == []
    assert h.state.topic("t") is not None


def test_reassignment_new_replicas_then_online_and_removed_ones_deleted(
    make_harness: Callable[..., Harness],
) -> None:
    from protocol.messages.reassignments import (
        AlterPartitionReassignmentsRequest,
        ReassignablePartition,
        ReassignableTopic,
    )

    h = make_harness({1: None, 2: None, 3: None, 4: None})
    create(h, "t", (1, 2))
    request = AlterPartitionReassignmentsRequest(
        topics=(
            ReassignableTopic(
                name="t", partitions=(ReassignablePartition(partition_index=0, replicas=(3, 4)),)
            ),
        )
    )
    result = h.run(request)
    assert replicas(result.state_changes) == [
        ("[Topic=t,Partition=0,Replica=3]", "NonExistentReplica", "NewReplica"),
        ("[Topic=t,Partition=0,Replica=4]", "NonExistentReplica", "NewReplica"),
    ]
    h.commit(result.records)
    # Completion comes with the AlterPartition that puts the adding replicas in the ISR.
    topic = h.state.topic("t")
    p = topic.partitions[0]
    from protocol.messages.alter_partition import (
        AlterPartitionPartition,
        AlterPartitionRequest,
        AlterPartitionTopic,
    )

    finish = AlterPartitionRequest(
        broker_id=p.leader,
        broker_epoch=h.state.image.cluster.broker(p.leader).epoch,
        topics=(
            AlterPartitionTopic(
                topic_name="t",
                topic_id=topic.topic_id,
                partitions=(
                    AlterPartitionPartition(
                        partition_index=0,
                        leader_epoch=p.leader_epoch,
                        new_isr=(1, 2, 3, 4),
                        partition_epoch=p.partition_epoch,
                    ),
                ),
            ),
        ),
    )
    changes = h.run(finish).state_changes
    chain = ["OnlineReplica", "OfflineReplica", "ReplicaDeletionStarted"]
    chain += ["ReplicaDeletionSuccessful", "NonExistentReplica"]
    assert replicas(changes) == [
        ("[Topic=t,Partition=0,Replica=3]", "NewReplica", "OnlineReplica"),
        ("[Topic=t,Partition=0,Replica=4]", "NewReplica", "OnlineReplica"),
        *[
            (f"[Topic=t,Partition=0,Replica={r}]", a, b)
            for r in (1, 2)
            for a, b in itertools.pairwise(chain)
        ],
    ]
    # The leader (1) left with the removed replicas: the reassign election moved it.
    assert partitions(changes) == [("t-0", "OnlinePartition", "OnlinePartition", True)]


def test_enabling_unclean_election_elects_offline_partitions_at_once(h: Harness) -> None:
    from tests.unit.controller.test_controller_cluster_ops import set_unclean

    create(h, "t", (1, 2), (3, 2))
    h.commit(h.run(live(h, 1, 3)).records)  # 2 leaves: t-0 ISR (1)
    h.commit(h.run(live(h, 3)).records)  # 1 dies: t-0 offline, ISR stays (1)
    h.commit(h.run(live(h, 2, 3)).records)  # 2 back, out of sync: still offline
    assert h.state.topic("t").partitions[0].leader == -1
    # Kafka's TopicUncleanLeaderElectionEnable: the config change itself elects.
    set_unclean(h, "t")
    p = h.state.topic("t").partitions[0]
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)
    assert h.state.topic("t").partitions[1].leader == 3  # online: untouched
    # Setting it again (no change) elects nothing and writes nothing.
    from protocol.messages.configs import (
        AlterableConfig,
        AlterConfigOp,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
        ResourceType,
    )

    again = IncrementalAlterConfigsRequest(
        resources=(
            AlterConfigsResource(
                resource_type=int(ResourceType.TOPIC),
                resource_name="t",
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
    result = h.run(again)
    assert result.records == [] and result.state_changes == ()


def test_enabling_unclean_election_state_changes(h: Harness) -> None:
    from protocol.messages.configs import (
        AlterableConfig,
        AlterConfigOp,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
        ResourceType,
    )

    create(h, "t", (1, 2))
    create(h, "u", (1,))
    h.commit(h.run(live(h, 1, 3)).records)
    h.commit(h.run(live(h, 3)).records)  # t-0 and u-0 offline
    request = IncrementalAlterConfigsRequest(
        resources=tuple(
            AlterConfigsResource(
                resource_type=int(ResourceType.TOPIC),
                resource_name=name,
                configs=(
                    AlterableConfig(
                        name="unclean.leader.election.enable",
                        config_operation=int(AlterConfigOp.SET),
                        value="true",
                    ),
                ),
            )
            for name in ("t", "u")
        )
    )
    # No live replica anywhere yet: both changes fail, nothing but the configs is written.
    result = h.run(request)
    assert partitions(result.state_changes) == [
        ("t-0", "OfflinePartition", "OnlinePartition", False),
        ("u-0", "OfflinePartition", "OnlinePartition", False),
    ]
    assert {type(r).__name__ for r in result.records} == {"ConfigRecord"}
