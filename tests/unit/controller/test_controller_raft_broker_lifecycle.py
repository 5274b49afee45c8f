"""Raft-mode broker lifecycle (controller.cluster_control, controller.heartbeats): registration,
heartbeats until caught up, session expiry and fencing, controlled shutdown through heartbeats,
stale epochs and duplicate registrations, as KRaft's ClusterControlManager,
BrokerHeartbeatManager and ReplicationControlManager. Every result's records are replayed into
the ControllerState (the harness commits them), so the image checks replay too."""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio
import trio.testing

from controller.cluster_control import ClusterControl
from controller.heartbeats import (
    NEVER,
    BrokerControlState,
    BrokerHeartbeatManager,
)
from controller.service.kraft_mode import KRaftMode, _Sessions
from protocol.errors import ErrorCode
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationListener,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    UnregisterBrokerRequest,
)
from protocol.metadata.image import PartitionRegistration
from protocol.metadata.records import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from tests.unit.controller.test_controller_cluster_ops import create, part, set_unclean

Harness = Any
SESSION_MS = 9_000
INC = {1: "incarnation-1-a", 2: "incarnation-2-a", 3: "incarnation-3-a"}


class Cluster:
    """A harness (records committed at once) plus an active ClusterControl and a clock."""

    def __init__(self, h: Harness) -> None:
        self.h = h
        self.now = 1_000_000
        self.control = ClusterControl.activate(
            h.state.image, self.now, session_timeout_ms=SESSION_MS
        )
        self.last_records: Sequence[MetadataRecord] = ()

    def _commit(self, result: Any) -> Any:
        self.last_records = list(result.records)
        if result.records:
            self.h.commit(result.records)
        return result.response

    def register(self, broker_id: int, incarnation: str | None = None, **kw: Any) -> Any:
        request = BrokerRegistrationRequest(
            broker_id=broker_id,
            cluster_id=kw.pop("cluster_id", ""),
            incarnation_id=incarnation or INC[broker_id],
            listeners=kw.pop(
                "listeners",
                (BrokerRegistrationListener(name="PLAINTEXT", host="h", port=9000 + broker_id),),
            ),
            **kw,
        )
        response = self._commit(
            self.control.register_broker(self.h.state, request, self.now, self.h.ctx)
        )
        assert isinstance(response, BrokerRegistrationResponse)
        return response

    def epoch(self, broker_id: int) -> int:
        return self.h.state.image.cluster.brokers[broker_id].epoch

    def heartbeat(
        self,
        broker_id: int,
        *,
        offset: int | None = None,
        epoch: int | None = None,
        want_fence: bool = False,
        want_shut_down: bool = False,
    ) -> BrokerHeartbeatResponse:
        """By default the broker reports having read everything committed so far."""
        request = BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=self.epoch(broker_id) if epoch is None else epoch,
            current_metadata_offset=self.h.state.last_applied_offset if offset is None else offset,
            want_fence=want_fence,
            want_shut_down=want_shut_down,
        )
        return self._commit(
            self.control.process_heartbeat(self.h.state, request, self.now, self.h.ctx)
        )

    def fence_stale(self) -> tuple[int, ...]:
        return self._commit(self.control.fence_stale_brokers(self.h.state, self.now, self.h.ctx))

    def fenced(self, broker_id: int) -> bool:
        return self.h.state.image.cluster.brokers[broker_id].fenced

    def start(self, *ids: int) -> None:
        """Register and heartbeat until unfenced."""
        for i in ids:
            self.register(i)
        for i in ids:
            assert not self.heartbeat(i).is_fenced


@pytest.fixture
def c(make_harness: Callable[..., Harness]) -> Cluster:
    return Cluster(make_harness({}))


@pytest.fixture
def c3(c: Cluster) -> Cluster:
    c.start(1, 2, 3)
    return c


def lia(p: PartitionRegistration) -> tuple[int, tuple[int, ...]]:
    return p.leader, p.isr


# -- registration ---------------------------------------------------------------------------


def test_register_writes_a_fenced_record_whose_offset_is_the_epoch(c: Cluster) -> None:
    first = c.h.state.next_offset
    response = c.register(1, rack="r1")
    assert response.error_code == 0 and response.broker_epoch == first
    (record,) = c.last_records
    assert isinstance(record, RegisterBrokerRecord)
    assert (record.broker_epoch, record.fenced, record.rack) == (first, True, "r1")
    assert c.h.state.last_applied_offset == first  # the record landed at that offset
    reg = c.h.state.image.cluster.brokers[1]
    assert reg.fenced and reg.endpoints[0].port == 9001
    assert c.register(2).broker_epoch == first + 1


@pytest.mark.parametrize(
    ("offset_delta", "want_fence", "fenced", "caught_up", "unfence_record"),
    [
        (-1, False, True, False, False),  # behind its own registration record
        (0, False, False, True, True),  # at it: unfenced
        (5, False, False, True, True),
        (0, True, True, True, False),  # caught up but wants to stay fenced
    ],
)
def test_fenced_broker_unfenced_once_caught_up(
    c: Cluster,
    offset_delta: int,
    want_fence: bool,
    fenced: bool,
    caught_up: bool,
    unfence_record: bool,
) -> None:
    epoch = c.register(1).broker_epoch
    response = c.heartbeat(1, offset=epoch + offset_delta, want_fence=want_fence)
    assert (response.error_code, response.is_fenced, response.is_caught_up) == (
        0,
        fenced,
        caught_up,
    )
    assert not response.should_shut_down
    assert c.last_records == ([UnfenceBrokerRecord(id=1, epoch=epoch)] if unfence_record else [])
    assert c.fenced(1) is fenced


def test_heartbeats_until_caught_up_then_unfenced(c: Cluster) -> None:
    epoch = c.register(1).broker_epoch
    for behind in (epoch - 3, epoch - 1):
        assert c.heartbeat(1, offset=behind).is_fenced
        assert c.last_records == []
    response = c.heartbeat(1, offset=epoch)
    assert not response.is_fenced and response.is_caught_up
    assert not c.fenced(1)
    # Unfenced stays unfenced without new records.
    assert not c.heartbeat(1).is_fenced and c.last_records == []


def test_unfencing_elects_leaderless_partitions(c3: Cluster) -> None:
    c = c3
    create(c.h, "solo", (1,))
    c.now += SESSION_MS + 1
    c.heartbeat(2)
    c.heartbeat(3)
    assert c.fence_stale() == (1,)
    assert lia(part(c.h, "solo")) == (NO_LEADER, (1,))  # never an empty ISR
    response = c.heartbeat(1)  # back, caught up: unfenced and leads again
    assert not response.is_fenced
    assert isinstance(c.last_records[0], UnfenceBrokerRecord)
    assert lia(part(c.h, "solo")) == (1, (1,))


@pytest.mark.parametrize(
    ("kwargs", "code", "words"),
    [
        ({"cluster_id": "other"}, ErrorCode.INCONSISTENT_CLUSTER_ID, "Expected cluster ID"),
        (
            {
                "listeners": (
                    BrokerRegistrationListener(name="A", host="h", port=1),
                    BrokerRegistrationListener(name="A", host="h", port=2),
                )
            },
            ErrorCode.INVALID_REQUEST,
            "'A' twice",
        ),
        (
            {"listeners": (BrokerRegistrationListener(name="A", host="h", port=0),)},
            ErrorCode.INVALID_REQUEST,
            "port 0",
        ),
    ],
)
def test_bad_registrations_are_refused_with_a_reason(
    c: Cluster, kwargs: dict, code: ErrorCode, words: str
) -> None:
    c.control.cluster_id = "the-cluster"
    response = c.register(1, **{"cluster_id": "the-cluster", **kwargs})
    assert response.error_code == code and words in response.error_message
    assert c.last_records == [] and 1 not in c.h.state.image.cluster.brokers


def test_negative_broker_id_refused(c: Cluster) -> None:
    request = BrokerRegistrationRequest(
        broker_id=-1, cluster_id="", incarnation_id="x", listeners=()
    )
    result = c.control.register_broker(c.h.state, request, c.now, c.h.ctx)
    assert result.response.error_code == ErrorCode.INVALID_REQUEST
    assert "non-negative" in result.response.error_message and not result.records


# -- duplicates and re-registration ----------------------------------------------------------


def test_duplicate_registration_while_the_session_is_live(c3: Cluster) -> None:
    c = c3
    epoch = c.epoch(1)
    c.now += SESSION_MS  # exactly the timeout: still valid (KRaft's >=)
    response = c.register(1, "incarnation-1-b")
    assert response.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert "Another broker is registered with that broker id" in response.error_message
    # Neither the live incarnation nor its epoch: what a forged registration would need.
    registered = c.h.state.image.cluster.brokers[1]
    assert registered.incarnation_id not in response.error_message
    assert f"epoch {epoch}" not in response.error_message
    assert c.last_records == [] and c.epoch(1) == epoch


def test_same_incarnation_amends_and_keeps_epoch_and_fencing(c3: Cluster) -> None:
    c = c3
    epoch = c.epoch(1)
    response = c.register(
        1, listeners=(BrokerRegistrationListener(name="PLAINTEXT", host="h2", port=7001),)
    )
    assert response.error_code == 0 and response.broker_epoch == epoch
    reg = c.h.state.image.cluster.brokers[1]
    assert (reg.epoch, reg.fenced, reg.endpoints[0].host) == (epoch, False, "h2")


def test_new_incarnation_after_session_expiry_fences_the_old_one_first(c3: Cluster) -> None:
    c = c3
    create(c.h, "t", (1, 2, 3))
    old_epoch = c.epoch(1)
    c.now += SESSION_MS + 1  # broker 1 silent; nobody ran the periodic check yet
    c.heartbeat(2)
    c.heartbeat(3)
    response = c.register(1, "incarnation-1-b")
    assert response.error_code == 0
    kinds = [type(r) for r in c.last_records]
    assert kinds == [FenceBrokerRecord, PartitionChangeRecord, RegisterBrokerRecord]
    assert c.last_records[0] == FenceBrokerRecord(id=1, epoch=old_epoch)
    # The new epoch is the registration record's own offset.
    assert response.broker_epoch == c.h.state.last_applied_offset == c.epoch(1)
    assert lia(part(c.h, "t")) == (2, (2, 3))
    assert c.fenced(1)
    # The old incarnation's heartbeats are stale now.
    stale = c.heartbeat(1, epoch=old_epoch)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    # The new one unfences once caught up; it rejoins no ISR by itself (AlterPartition does).
    assert not c.heartbeat(1).is_fenced
    assert lia(part(c.h, "t")) == (2, (2, 3))


def test_new_incarnation_of_a_fenced_broker_gets_a_new_epoch(c3: Cluster) -> None:
    c = c3
    old_epoch = c.epoch(1)
    assert c.heartbeat(1, want_shut_down=True).should_shut_down  # leads nothing: goes now
    response = c.register(1, "incarnation-1-b")
    assert response.error_code == 0 and response.broker_epoch > old_epoch
    assert [type(r) for r in c.last_records] == [RegisterBrokerRecord]
    reg = c.h.state.image.cluster.brokers[1]
    assert (reg.fenced, reg.in_controlled_shutdown, reg.incarnation_id) == (
        True,
        False,
        "incarnation-1-b",
    )


# -- stale epochs -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("broker_id", "epoch_delta", "words"),
    [
        (1, -1, "is not the current registration of broker 1"),
        (1, 1, "is not the current registration of broker 1"),
        (7, 0, "before its registration"),
    ],
)
def test_stale_broker_epoch(c3: Cluster, broker_id: int, epoch_delta: int, words: str) -> None:
    c = c3
    request = BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=c.epoch(1) + epoch_delta,
        current_metadata_offset=100,
        want_fence=False,
        want_shut_down=True,
    )
    result = c.control.process_heartbeat(c.h.state, request, c.now, c.h.ctx)
    assert result.response.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert words in result.response.error_message
    # Never the current epoch: it is what a forged heartbeat would need.
    assert f"epoch {c.epoch(1)} " not in result.response.error_message
    assert not result.records
    # A stale heartbeat keeps no session alive.
    c.now += SESSION_MS + 1
    c.heartbeat(2)
    c.heartbeat(3)
    assert c.fence_stale() == (1,)


# -- session expiry ---------------------------------------------------------------------------


def test_missed_heartbeats_fence_and_reelect(c3: Cluster) -> None:
    c = c3
    for name, assignment in (("a", (1, 2, 3)), ("b", (2, 1, 3)), ("s", (1,)), ("d", (1, 2))):
        create(c.h, name, assignment)
    assert c.control.next_check_time_ms() == c.now + SESSION_MS
    start = c.now
    c.now = start + SESSION_MS  # not yet: the session ends strictly after the timeout
    assert c.fence_stale() == () and c.last_records == []
    c.heartbeat(2)
    c.heartbeat(3)
    c.now = start + SESSION_MS + 1
    b_before = part(c.h, "b")
    assert c.fence_stale() == (1,)
    assert c.last_records[0] == FenceBrokerRecord(id=1, epoch=c.epoch(1))  # fenced first
    assert c.fenced(1)
    assert lia(part(c.h, "a")) == (2, (2, 3))  # led: re-elected, out of the ISR
    assert lia(part(c.h, "b")) == (2, (2, 3))  # followed: out of the ISR
    # A shrink keeps the leader epoch (KAFKA-15021: the followers keep fetching); the
    # partition epoch orders it.
    assert part(c.h, "b").leader_epoch == b_before.leader_epoch
    assert part(c.h, "b").partition_epoch == b_before.partition_epoch + 1
    assert lia(part(c.h, "s")) == (NO_LEADER, (1,))  # sole replica: leaderless, ISR kept
    assert lia(part(c.h, "d")) == (2, (2,))
    # Fenced brokers are not checked again; the others' sessions run from their heartbeats.
    assert c.fence_stale() == ()
    assert c.control.next_check_time_ms() == start + 2 * SESSION_MS


def test_fencing_writes_the_new_leaders_before_the_isr_shrinks(c3: Cluster) -> None:
    """Brokers apply a large change in steps (broker.metadata_publisher.publish_steps): the
    fencing comes first, then the partitions left without a leader, the ISR-only shrinks
    last."""
    c = c3
    for i in range(6):
        # Topics in image order alternate: led by 2 (followed by 1), then led by 1.
        create(c.h, f"t{i}", (2, 1, 3) if i % 2 == 0 else (1, 2, 3))
    c.now += SESSION_MS + 1
    c.heartbeat(2)
    c.heartbeat(3)
    assert c.fence_stale() == (1,)
    changes = [r for r in c.last_records if isinstance(r, PartitionChangeRecord)]
    topics = c.h.state.image.topics.by_id
    assert [topics[r.topic_id].name for r in changes] == ["t1", "t3", "t5", "t0", "t2", "t4"]
    assert {r.leader for r in changes[:3]} == {2}
    assert isinstance(c.last_records[0], FenceBrokerRecord)


def test_two_stale_brokers_fenced_together_isr_never_empty(c3: Cluster) -> None:
    c = c3
    create(c.h, "a", (1, 2, 3))
    create(c.h, "b", (2, 1))
    c.now += SESSION_MS + 1
    c.heartbeat(3)
    assert c.fence_stale() == (1, 2)
    assert lia(part(c.h, "a")) == (3, (3,))
    assert lia(part(c.h, "b")) == (NO_LEADER, (2,))  # ISR keeps a member, leaderless
    assert c.fenced(1) and c.fenced(2) and not c.fenced(3)


def test_a_heartbeat_tracked_on_arrival_keeps_the_session_while_it_waits_in_the_queue(
    c3: Cluster,
) -> None:
    """KRaft's trackBrokerHeartbeat: a heartbeat counts as contact when it arrives, so a
    controller backlogged past the session (a 25,000-partition creation, a slow fsync) does
    not fence the brokers whose heartbeats wait behind it (a broker was fenced mid-creation
    in a 25,000-partition benchmark). Only the registered epoch counts."""
    c = c3
    c.now += SESSION_MS - 1
    assert c.control.track_heartbeat(c.h.state.image, 1, c.epoch(1), c.now)
    assert not c.control.track_heartbeat(c.h.state.image, 2, c.epoch(2) - 1, c.now)  # stale
    assert not c.control.track_heartbeat(c.h.state.image, 9, 0, c.now)  # not registered
    c.now += 2
    assert c.fence_stale() == (2, 3)  # broker 1's queued heartbeat has not run yet
    assert not c.fenced(1) and c.fenced(2) and c.fenced(3)


def test_unclean_topic_elects_an_out_of_sync_replica_when_fencing(c3: Cluster) -> None:
    c = c3
    create(c.h, "u", (1, 2))
    c.heartbeat(1)
    c.heartbeat(2)
    c.h.commit(
        [PartitionChangeRecord(partition_id=0, topic_id=c.h.state.topic("u").topic_id, isr=(1,))]
    )
    set_unclean(c.h, "u")
    c.now += SESSION_MS + 1
    c.heartbeat(2)
    c.heartbeat(3)
    assert c.fence_stale() == (1,)
    p = part(c.h, "u")
    assert lia(p) == (2, (2,)) and p.leader_recovery_state == 1  # RECOVERING


# -- controlled shutdown through heartbeats (KIP-841) -----------------------------------------


def test_controlled_shutdown_moves_leaders_then_shuts_down(c3: Cluster) -> None:
    c = c3
    for name, assignment in (("a", (1, 2, 3)), ("s", (1,)), ("b", (2, 1, 3)), ("u", (3, 2))):
        create(c.h, name, assignment)
    epoch = c.epoch(1)
    response = c.heartbeat(1, want_shut_down=True)
    assert (response.is_fenced, response.should_shut_down) == (False, False)
    assert c.last_records[0] == BrokerRegistrationChangeRecord(
        broker_id=1, broker_epoch=epoch, in_controlled_shutdown=1
    )
    assert c.h.state.image.cluster.brokers[1].in_controlled_shutdown
    assert lia(part(c.h, "a")) == (2, (2, 3))  # moved, out of the ISR
    assert lia(part(c.h, "s")) == (NO_LEADER, (1,))  # nobody else: offline, ISR kept
    assert lia(part(c.h, "b")) == (2, (2, 3))  # followed: out of the ISR
    assert lia(part(c.h, "u")) == (3, (3, 2))  # untouched
    shutdown_offset = c.h.state.last_applied_offset
    assert c.control.heartbeats.controlled_shutdown_offset(1) == shutdown_offset
    # It leads nothing, but the active brokers have not read past the shutdown's records.
    c.heartbeat(2, offset=shutdown_offset - 1)
    c.heartbeat(3, offset=shutdown_offset)
    response = c.heartbeat(1, want_shut_down=True)
    assert (response.is_fenced, response.should_shut_down) == (False, False)
    assert c.last_records == []
    c.heartbeat(2, offset=shutdown_offset)
    response = c.heartbeat(1, want_shut_down=True)
    assert (response.is_fenced, response.should_shut_down) == (True, True)
    assert c.last_records == [FenceBrokerRecord(id=1, epoch=epoch)]
    assert c.fenced(1)
    assert c.control.heartbeats.controlled_shutdown_offset(1) is None


def test_controlled_shutdown_waits_while_it_still_leads(c3: Cluster) -> None:
    c = c3
    tid = create(c.h, "t", (1, 2), (2, 1))
    c.heartbeat(1, want_shut_down=True)
    assert part(c.h, "t", 0).leader == 2
    # A record committed meanwhile (written before the shutdown began) makes 1 lead t-1.
    c.h.commit([PartitionChangeRecord(partition_id=1, topic_id=tid, isr=(2, 1), leader=1)])
    c.heartbeat(2)
    c.heartbeat(3)
    response = c.heartbeat(1, want_shut_down=True)
    assert (response.is_fenced, response.should_shut_down) == (False, False)
    assert c.last_records == []  # KRaft moves leaderships only on entering the state
    assert c.control.heartbeats.current_state(1) is BrokerControlState.CONTROLLED_SHUTDOWN


def test_controlled_shutdown_without_leaderships_is_immediate(c3: Cluster) -> None:
    c = c3
    create(c.h, "t", (2, 1))
    response = c.heartbeat(1, want_shut_down=True)
    assert (response.is_fenced, response.should_shut_down) == (True, True)
    kinds = [type(r) for r in c.last_records]
    assert kinds == [FenceBrokerRecord, PartitionChangeRecord]  # fenced, leaves the ISR
    assert lia(part(c.h, "t")) == (2, (2,))


@pytest.mark.parametrize(
    ("start", "want_fence", "want_shut_down", "expected"),
    [
        ("fenced", False, False, BrokerControlState.UNFENCED),
        ("fenced", True, False, BrokerControlState.FENCED),
        ("fenced", False, True, BrokerControlState.SHUTDOWN_NOW),
        ("fenced", True, True, BrokerControlState.SHUTDOWN_NOW),
        ("unfenced", False, False, BrokerControlState.UNFENCED),
        ("unfenced", True, False, BrokerControlState.FENCED),
        ("unfenced", True, True, BrokerControlState.SHUTDOWN_NOW),
        ("unfenced", False, True, BrokerControlState.CONTROLLED_SHUTDOWN),
    ],
)
def test_next_state_table(
    start: str, want_fence: bool, want_shut_down: bool, expected: BrokerControlState
) -> None:
    """KRaft's calculateNextBrokerState; the broker leads something and is caught up."""
    m = BrokerHeartbeatManager(SESSION_MS)
    m.register(1, start == "fenced", 0)
    states = m.calculate_next_state(
        1,
        want_fence=want_fence,
        want_shut_down=want_shut_down,
        current_metadata_offset=10,
        registration_offset=10,
        has_leaderships=lambda: True,
    )
    assert states.next is expected
    assert states.next.fenced == (
        expected in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW)
    )


def test_want_fence_fences_an_unfenced_broker_and_moves_its_leaders(c3: Cluster) -> None:
    c = c3
    create(c.h, "t", (1, 2))
    response = c.heartbeat(1, want_fence=True)
    assert (response.is_fenced, response.should_shut_down) == (True, False)
    assert lia(part(c.h, "t")) == (2, (2,))
    assert c.fenced(1)
    assert c.fence_stale() == ()  # fenced brokers have no session to expire


# -- unregistration and the manager itself ----------------------------------------------------


def test_unregister_leaves_isrs_and_removes_the_registration(c3: Cluster) -> None:
    c = c3
    create(c.h, "t", (1, 2))
    result = c.control.unregister_broker(c.h.state, UnregisterBrokerRequest(broker_id=1), c.h.ctx)
    c._commit(result)
    assert isinstance(c.last_records[-1], UnregisterBrokerRecord)
    assert 1 not in c.h.state.image.cluster.brokers
    assert lia(part(c.h, "t")) == (2, (2,))
    missing = c.control.unregister_broker(c.h.state, UnregisterBrokerRequest(broker_id=1), c.h.ctx)
    assert missing.response.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_activation_gives_every_registered_broker_a_fresh_session(c3: Cluster) -> None:
    c = c3
    c.heartbeat(2, want_fence=True)
    c.now += 60_000  # a failover long after the last heartbeats
    standby = ClusterControl.activate(c.h.state.image, c.now, session_timeout_ms=SESSION_MS)
    assert standby.next_check_time_ms() == c.now + SESSION_MS
    assert standby.fence_stale_brokers(c.h.state, c.now + SESSION_MS, c.h.ctx).records == []
    late = standby.fence_stale_brokers(c.h.state, c.now + SESSION_MS + 1, c.h.ctx)
    assert late.response == (1, 3)  # 2 was fenced: no session to lose


def test_manager_bookkeeping() -> None:
    m = BrokerHeartbeatManager(100)
    assert m.next_check_time_ms() == NEVER and m.lowest_active_offset() == NEVER
    m.register(1, False, 10)
    m.register(2, False, 5)
    m.register(3, True, 0)
    m.touch(1, False, 40, 10)
    m.touch(2, False, 30, 5)
    assert m.next_check_time_ms() == 105
    assert m.lowest_active_offset() == 30
    m.maybe_update_controlled_shutdown_offset(2, 50)
    m.maybe_update_controlled_shutdown_offset(2, 70)  # only the first one counts
    assert m.controlled_shutdown_offset(2) == 50
    assert m.lowest_active_offset() == 40  # shutting-down brokers are not active
    assert m.stale_brokers(106) == [2] and m.find_one_stale_broker(111) == 2
    assert m.stale_brokers(111) == [2, 1]
    with pytest.raises(ValueError, match="fenced broker 3"):
        m.maybe_update_controlled_shutdown_offset(3, 1)
    with pytest.raises(ValueError, match=r"broker\.session\.timeout\.ms"):
        BrokerHeartbeatManager(0)


async def test_kraft_mode_tracks_a_heartbeat_before_the_queue_runs_it(c3: Cluster) -> None:
    """The wiring: KRaftMode.submit records the contact before the driver (here blocked, as
    behind a long event) gets to the heartbeat."""
    c = c3
    mode = KRaftMode(None, session_timeout_ms=SESSION_MS, clock_ms=lambda: c.now)  # type: ignore[arg-type]
    term = types.SimpleNamespace(mode_state=_Sessions(c.control))
    release = trio.Event()

    class BlockedDriver:
        state = c.h.state

        async def submit(self, request: object) -> object:
            await release.wait()
            return BrokerHeartbeatResponse()

    c.now += SESSION_MS - 1
    request = BrokerHeartbeatRequest(
        broker_id=1,
        broker_epoch=c.epoch(1),
        current_metadata_offset=0,
        want_fence=False,
        want_shut_down=False,
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(mode.submit, term, BlockedDriver(), request)
        await trio.testing.wait_all_tasks_blocked()
        c.now += 2
        assert c.control.heartbeats.has_valid_session(1, c.now)
        assert not c.control.heartbeats.has_valid_session(2, c.now)
        release.set()
