"""controller.log_events: which broker failures and leader elections (with their cause) an
event's records make, in both modes, and the driver logging them as catalogued
(protocol.telemetry.LOG_EVENTS: names, fields, types, allowed values)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
import trio

from controller.broker_lifecycle import BrokerChange, LiveBroker
from controller.elect_leaders import AutoLeaderRebalance
from controller.log_events import (
    BrokerFailure,
    LeaderElection,
    broker_failures,
    event_type,
    leader_elections,
)
from controller.raft_lifecycle import FenceStaleBrokers, WriteNoOp
from protocol.messages.broker_lifecycle import BrokerHeartbeatRequest, BrokerRegistrationRequest
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from protocol.messages.elect_leaders import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersTopicPartitions,
)
from protocol.messages.topics import CreateTopicsRequest
from protocol.metadata.records import NO_LEADER, UnfenceBrokerRecord
from protocol.telemetry import ELECTION_CAUSES
from tests.support.log_events import assert_schema, catalogued
from tests.unit.controller.test_controller_cluster_ops import (
    alter,
    create,
    live,
    part,
    set_unclean,
)
from tests.unit.controller.test_controller_driver import FakeLog, make_driver, me
from tests.unit.controller.test_controller_partitions_reassign import reassign
from tests.unit.controller.test_controller_raft_broker_lifecycle import SESSION_MS, Cluster

Harness = Any


def happened(h: Harness, request: object) -> tuple[list[BrokerFailure], list[LeaderElection]]:
    """Run `request`, commit its records; the failures and elections they made."""
    before = h.state.image
    result = h.run(request)
    failures = broker_failures(request, before, result.records)
    h.commit(result.records)
    return failures, leader_elections(request, before, h.state.image, result.records)


def causes(elections: list[LeaderElection]) -> dict[tuple[str, int], str]:
    return {(e.topic, e.partition): e.cause for e in elections}


def test_event_type_is_the_api_or_event_name() -> None:
    assert event_type(CreateTopicsRequest(topics=())) == "CreateTopics"
    assert event_type(BrokerChange(())) == "BrokerChange"
    assert event_type(FenceStaleBrokers()) == "FenceStaleBrokers"
    assert event_type(WriteNoOp()) == "WriteNoOp"


# -- ZK mode (BrokerChange, ControlledShutdown) ---------------------------------------------


def test_zk_dead_leader_is_a_failure_and_an_offline_election(
    make_harness: Callable[..., Harness],
) -> None:
    h = make_harness({1: None, 2: None, 3: None})
    _, created = happened(h, create_request("t", (1, 2, 3), (2, 1, 3)))
    assert causes(created) == {("t", 0): "new_partition", ("t", 1): "new_partition"}
    assert created[0].previous_leader == NO_LEADER and created[0].leader == 1
    epoch = h.state.image.cluster.broker(1).epoch
    failures, elections = happened(h, live(h, 2, 3))
    assert failures == [BrokerFailure(1, epoch, "znode_deleted", "zk")]
    # t-0 loses its leader; t-1 only loses a follower: no election there.
    assert elections == [
        LeaderElection("t", 0, 2, 1, part(h, "t", 0).leader_epoch, (2, 3), "offline", False)
    ]


def test_zk_bounced_broker(make_harness: Callable[..., Harness]) -> None:
    h = make_harness({1: None, 2: None, 3: None})
    create(h, "t", (1, 2, 3))
    epoch = h.state.image.cluster.broker(1).epoch
    change = BrokerChange(
        (
            LiveBroker(1, epoch + 50),
            *(LiveBroker(i, h.state.image.cluster.broker(i).epoch) for i in (2, 3)),
        )
    )
    failures, elections = happened(h, change)
    assert failures == [BrokerFailure(1, epoch, "bounced", "zk")]
    assert causes(elections) == {("t", 0): "offline"}


def test_zk_unclean_election(make_harness: Callable[..., Harness]) -> None:
    h = make_harness({1: None, 2: None, 3: None})
    create(h, "t", (1, 2))
    set_unclean(h, "t")
    happened(h, live(h, 1, 3))  # 2 leaves the ISR
    happened(h, live(h, 3))  # 1 too: leaderless, ISR (1)
    _, elections = happened(h, live(h, 2, 3))
    (e,) = elections
    assert (e.cause, e.unclean, e.leader, e.previous_leader) == ("unclean", True, 2, NO_LEADER)


def test_zk_controlled_shutdown_is_no_failure(make_harness: Callable[..., Harness]) -> None:
    h = make_harness({1: None, 2: None, 3: None})
    create(h, "t", (1, 2, 3))
    epoch = h.state.image.cluster.broker(1).epoch
    failures, elections = happened(h, ControlledShutdownRequest(broker_id=1, broker_epoch=epoch))
    assert failures == [] and causes(elections) == {("t", 0): "controlled_shutdown"}
    failures, elections = happened(h, live(h, 2, 3))  # then its znode goes: it left cleanly
    assert failures == [] and elections == []


def test_preferred_and_auto_rebalance(make_harness: Callable[..., Harness]) -> None:
    h = make_harness({1: None, 2: None, 3: None}, leader_imbalance_per_broker_percentage=0)
    create(h, "t", (1, 2, 3))
    create(h, "u", (1, 2, 3))
    happened(h, live(h, 2, 3))
    happened(h, live(h, 1, 2, 3))
    for name in ("t", "u"):
        p = part(h, name)
        tid = h.state.topic(name).topic_id
        request = alter(h, tid, (*p.isr, 1), broker=p.leader, leader_epoch=p.leader_epoch,
                        partition_epoch=p.partition_epoch)  # fmt: skip
        _, elections = happened(h, request)
        assert elections == []  # an ISR expansion elects nobody
    request = ElectLeadersRequest(
        election_type=int(ElectionType.PREFERRED),
        topic_partitions=(ElectLeadersTopicPartitions(topic="t", partitions=(0,)),),
    )
    _, elections = happened(h, request)
    assert causes(elections) == {("t", 0): "preferred"}
    _, elections = happened(h, AutoLeaderRebalance())
    assert causes(elections) == {("u", 0): "auto_rebalance"}


def test_reassignment_moves_the_leader(make_harness: Callable[..., Harness]) -> None:
    h = make_harness({1: None, 2: None, 3: None, 4: None})
    tid = create(h, "t", (1, 2))
    assert reassign(h, 0, (3, 4)) == 0

    def catch_up(isr: tuple[int, ...]) -> list[LeaderElection]:
        p = part(h, "t")
        request = alter(h, tid, isr, broker=p.leader, leader_epoch=p.leader_epoch,
                        partition_epoch=p.partition_epoch)  # fmt: skip
        return happened(h, request)[1]

    assert catch_up((1, 2, 3)) == []
    # The reassignment completes: 1 is no replica any more, 3 leads.
    assert causes(catch_up((1, 2, 3, 4))) == {("t", 0): "reassignment"}
    assert part(h, "t").leader == 3


# -- Raft mode (ClusterControl) --------------------------------------------------------------


def test_raft_session_expiry(make_harness: Callable[..., Harness]) -> None:
    c = Cluster(make_harness({}))
    c.start(1, 2, 3)
    create(c.h, "a", (1, 2, 3))
    epoch = c.epoch(1)
    c.now += SESSION_MS + 1
    c.heartbeat(2)
    c.heartbeat(3)
    before = c.h.state.image
    assert c.fence_stale() == (1,)
    failures = broker_failures(FenceStaleBrokers(), before, c.last_records)
    assert failures == [BrokerFailure(1, epoch, "session_expired", "raft")]
    elections = leader_elections(FenceStaleBrokers(), before, c.h.state.image, c.last_records)
    assert causes(elections) == {("a", 0): "offline"}
    assert elections[0].isr == (2, 3)


def test_raft_new_incarnation_fences_the_old_one(make_harness: Callable[..., Harness]) -> None:
    c = Cluster(make_harness({}))
    c.start(1, 2, 3)
    create(c.h, "a", (1, 2, 3))
    epoch = c.epoch(1)
    c.now += SESSION_MS + 1  # 1's session ended, not fenced yet; 1 restarts
    c.heartbeat(2)
    c.heartbeat(3)
    before = c.h.state.image
    c.register(1, "incarnation-1-b")
    request = BrokerRegistrationRequest(
        broker_id=1, cluster_id="", incarnation_id="incarnation-1-b", listeners=()
    )
    assert broker_failures(request, before, c.last_records) == [
        BrokerFailure(1, epoch, "new_incarnation", "raft")
    ]


def test_raft_want_fence_and_shutdown(make_harness: Callable[..., Harness]) -> None:
    c = Cluster(make_harness({}))
    c.start(1, 2, 3)
    create(c.h, "a", (1, 2, 3))
    create(c.h, "b", (2, 1, 3))
    before = c.h.state.image
    c.heartbeat(2, want_shut_down=True)
    request = BrokerHeartbeatRequest(
        broker_id=2,
        broker_epoch=c.epoch(2),
        current_metadata_offset=0,
        want_fence=False,
        want_shut_down=True,
    )
    assert broker_failures(request, before, c.last_records) == []
    elections = leader_elections(request, before, c.h.state.image, c.last_records)
    assert causes(elections) == {("b", 0): "controlled_shutdown"}
    before = c.h.state.image
    epoch = c.epoch(1)
    c.heartbeat(1, want_fence=True)
    request = BrokerHeartbeatRequest(
        broker_id=1,
        broker_epoch=epoch,
        current_metadata_offset=0,
        want_fence=True,
        want_shut_down=False,
    )
    assert broker_failures(request, before, c.last_records) == [
        BrokerFailure(1, epoch, "fence_requested", "raft")
    ]
    # b-0 moved to 1 when 2 shut down; both move on, to 3 (2 is shutting down).
    assert causes(leader_elections(request, before, c.h.state.image, c.last_records)) == {
        ("a", 0): "offline",
        ("b", 0): "offline",
    }


def test_unfencing_elects_leaderless_partitions_as_offline(
    make_harness: Callable[..., Harness],
) -> None:
    c = Cluster(make_harness({}))
    c.start(1, 2)
    create(c.h, "s", (1,))
    c.now += SESSION_MS + 1
    c.heartbeat(2)
    c.fence_stale()
    assert part(c.h, "s").leader == NO_LEADER
    c.now += 1
    c.register(1, "incarnation-1-b")
    before = c.h.state.image
    c.heartbeat(1)  # caught up: unfenced, and s-0 gets its leader back
    assert any(isinstance(r, UnfenceBrokerRecord) for r in c.last_records)
    request = BrokerHeartbeatRequest(
        broker_id=1,
        broker_epoch=c.epoch(1),
        current_metadata_offset=0,
        want_fence=False,
        want_shut_down=False,
    )
    elections = leader_elections(request, before, c.h.state.image, c.last_records)
    assert causes(elections) == {("s", 0): "offline"}


def test_every_cause_is_catalogued() -> None:
    # The values this module produces are the catalogue's (the schema test checks the rest).
    assert {
        "offline",
        "controlled_shutdown",
        "preferred",
        "auto_rebalance",
        "reassignment",
        "unclean",
        "new_partition",
    } == set(ELECTION_CAUSES)


# -- the driver logs them --------------------------------------------------------------------


async def test_driver_logs_catalogued_events() -> None:
    log = FakeLog()
    driver = make_driver(log, listen=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        with structlog.testing.capture_logs() as events:
            for i in (1, 2, 3):
                await driver.register_broker(me(i))
            await driver.submit(create_request("t", (1, 2, 3)))
            brokers = driver.state.image.cluster.brokers
            await driver.submit(
                BrokerChange(tuple(LiveBroker(i, brokers[i].epoch) for i in (2, 3)))
            )
            await driver.submit(WriteNoOp())
        nursery.cancel_scope.cancel()
    assert_schema(events)
    processed = catalogued(events, "controller event processed")
    assert [e["event_type"] for e in processed] == [
        "RegisterBroker",
        "RegisterBroker",
        "RegisterBroker",
        "CreateTopics",
        "BrokerChange",
    ]  # not WriteNoOp (nor heartbeats): QUIET_CONTROLLER_EVENTS
    assert all(e["error"] == "NONE" and e["queue_ms"] >= 0 for e in processed)
    assert processed[-1]["records"] >= 2
    (failure,) = catalogued(events, "broker failure detected")
    assert (failure["broker_id"], failure["reason"], failure["event_type"]) == (
        1,
        "znode_deleted",
        "BrokerChange",
    )
    elections = catalogued(events, "leader election")
    assert [(e["cause"], e["leader"], e["previous_leader"]) for e in elections] == [
        ("new_partition", 1, -1),
        ("offline", 2, 1),
    ]
    names = [e["event"] for e in events]
    # Detection, then the election, then the event's answer.
    assert (
        names.index("broker failure detected")
        < names.index("leader election", names.index("broker failure detected"))
        < len(names) - 1 - names[::-1].index("controller event processed")
    )


# -- helpers -----------------------------------------------------------------------------------


def create_request(name: str, *assignments: tuple[int, ...]) -> CreateTopicsRequest:
    from protocol.messages.topics import CreatableReplicaAssignment, CreatableTopic

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
