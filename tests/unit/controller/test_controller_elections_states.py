"""Kafka's election algorithms, every branch; the builder's elections; the state machines."""

from __future__ import annotations

import pytest

from controller.election import (
    ElectionResult,
    controlled_shutdown_leader,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
    elect_reassign,
    offline_partition_leader,
    preferred_replica_leader,
    reassign_partition_leader,
)
from controller.partition_change import Election, PartitionChangeBuilder
from controller.state_machines import (
    IllegalStateTransition,
    Liveness,
    PartitionState,
    ReplicaState,
    TopicDeletionReplicas,
    check_partition_transition,
    check_replica_transition,
    is_valid_partition_transition,
    is_valid_replica_transition,
    partition_state,
    replica_state,
)
from protocol.metadata.image import PartitionRegistration
from protocol.metadata.records import NO_LEADER, NO_LEADER_CHANGE, LeaderRecoveryState

A = "AAAAAAAAAAAAAAAAAAAAAg"
N = NO_LEADER


def reg(
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    leader: int,
    *,
    adding: tuple[int, ...] = (),
    removing: tuple[int, ...] = (),
    recovery: int = 0,
) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=replicas,
        isr=isr,
        leader=leader,
        leader_epoch=3,
        partition_epoch=7,
        adding_replicas=adding,
        removing_replicas=removing,
        leader_recovery_state=recovery,
    )


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "unclean", "leader"),
    [
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, False, 1),  # preferred in ISR and live
        ((1, 2, 3), (1, 2, 3), {2, 3}, False, 2),  # walks the assignment order
        ((1, 2, 3), (3, 2), {1, 2, 3}, False, 2),  # assignment order, not ISR order
        ((1, 2, 3), (1,), {2, 3}, False, N),  # no live ISR member, clean: none
        ((1, 2, 3), (1,), {2, 3}, True, 2),  # unclean: first live replica
        ((1, 2, 3), (1, 3), {2, 3}, True, 3),  # unclean allowed but a clean one exists
        ((1, 2, 3), (1,), set(), True, N),  # nobody live at all
        ((), (), {1}, True, N),
    ],
)
def test_offline_partition_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], unclean: bool, leader: int
) -> None:
    assert offline_partition_leader(assignment, isr, live.__contains__, unclean=unclean) == leader


@pytest.mark.parametrize(
    ("target", "isr", "live", "leader"),
    [
        ((4, 5, 6), (1, 4, 5, 6), {4, 5, 6}, 4),
        ((4, 5, 6), (1, 5, 6), {4, 5, 6}, 5),  # 4 not caught up yet
        ((4, 5, 6), (1, 4, 5), {5}, 5),  # 4 down
        ((4, 5, 6), (1,), {4, 5, 6}, N),  # never unclean
    ],
)
def test_reassign_partition_leader(
    target: tuple[int, ...], isr: tuple[int, ...], live: set[int], leader: int
) -> None:
    assert reassign_partition_leader(target, isr, live.__contains__) == leader


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "leader"),
    [
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, 1),
        ((1, 2, 3), (2, 3), {1, 2, 3}, N),  # preferred out of the ISR
        ((1, 2, 3), (1, 2, 3), {2, 3}, N),  # preferred down: nobody else
        ((), (), set(), N),
    ],
)
def test_preferred_replica_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], leader: int
) -> None:
    assert preferred_replica_leader(assignment, isr, live.__contains__) == leader


@pytest.mark.parametrize(
    ("assignment", "isr", "up", "shutting", "leader"),
    [
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1}, 2),
        ((1, 2, 3), (1, 3), {1, 2, 3}, {1}, 3),  # 2 not in ISR
        ((1, 2, 3), (1, 2, 3), {1, 3}, {1}, 3),  # 2 down
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1, 2}, 3),  # 2 also shutting down
        ((1, 2), (1,), {1, 2}, {1}, N),  # only the shutting-down broker is in sync
    ],
)
def test_controlled_shutdown_leader(
    assignment: tuple[int, ...],
    isr: tuple[int, ...],
    up: set[int],
    shutting: set[int],
    leader: int,
) -> None:
    assert controlled_shutdown_leader(assignment, isr, up.__contains__, shutting) == leader


def test_election_results_carry_kafkas_isr() -> None:
    live = {2, 3}.__contains__
    assert elect_offline(reg((1, 2, 3), (1, 2, 3), 1), live, unclean=False) == ElectionResult(
        2, (2, 3)
    )
    assert elect_offline(reg((1, 2, 3), (1,), 1), live, unclean=True) == ElectionResult(
        2, (2,), unclean=True
    )
    assert elect_offline(reg((1, 2, 3), (1,), 1), live, unclean=False) is None
    assert elect_reassign(reg((1, 2, 3), (1, 2, 3), 1), (3, 2), live) == ElectionResult(
        3, (1, 2, 3)
    )
    assert elect_reassign(reg((1, 2, 3), (1,), 1), (3, 2), live) is None
    assert elect_preferred(reg((1, 2, 3), (1, 2, 3), 2), {1, 2}.__contains__) == ElectionResult(
        1, (1, 2, 3)
    )
    assert elect_preferred(reg((1, 2, 3), (1, 2, 3), 2), live) is None
    assert elect_controlled_shutdown(
        reg((1, 2, 3), (1, 2, 3), 1), {1, 2, 3}.__contains__, {1}
    ) == ElectionResult(2, (2, 3))
    assert elect_controlled_shutdown(reg((1, 2), (1,), 1), {1, 2}.__contains__, {1}) is None


def build(
    partition: PartitionRegistration,
    live: set[int],
    *,
    election: Election = Election.ONLINE,
    isr: tuple[int, ...] | None = None,
    replicas: tuple[int, ...] | None = None,
    adding: tuple[int, ...] | None = None,
    removing: tuple[int, ...] | None = None,
    recovery: LeaderRecoveryState | None = None,
    bump: bool = True,
) -> tuple | None:
    builder = PartitionChangeBuilder(
        partition, A, 0, live.__contains__, bump_leader_epoch_on_isr_shrink=bump
    ).set_election(election)
    if isr is not None:
        builder.set_target_isr(isr)
    if replicas is not None:
        builder.set_target_replicas(replicas)
    if adding is not None:
        builder.set_target_adding(adding)
    if removing is not None:
        builder.set_target_removing(removing)
    if recovery is not None:
        builder.set_target_leader_recovery_state(recovery)
    r = builder.build()
    if r is None:
        return None
    return (
        r.leader,
        r.isr,
        r.replicas,
        r.adding_replicas,
        r.removing_replicas,
        r.leader_recovery_state,
    )


P = Election.PREFERRED
U = Election.UNCLEAN
KEEP = NO_LEADER_CHANGE


@pytest.mark.parametrize(
    ("partition", "live", "kwargs", "expected"),
    [
        # PREFERRED: preferred valid -> it; already preferred -> nothing.
        (reg((1, 2, 3), (1, 2, 3), 2), {1, 2, 3}, {"election": P}, (1, None, None, None, None, -1)),
        (reg((1, 2, 3), (1, 2, 3), 1), {1, 2, 3}, {"election": P}, None),
        # PREFERRED: preferred not valid, current leader valid -> no change.
        (reg((1, 2, 3), (2, 3), 2), {1, 2, 3}, {"election": P}, None),
        # PREFERRED: neither valid -> next valid in assignment order.
        (reg((1, 2, 3), (1, 2, 3), 2), {3}, {"election": P}, (3, None, None, None, None, -1)),
        # ONLINE with a dead leader, nobody in sync: the ISR stays, leaderless.
        (reg((1, 2, 3), (1,), 1), {2, 3}, {"isr": ()}, (N, None, None, None, None, -1)),
        # Several ISR members all gone at once: the ISR stays as it was.
        (reg((1, 2, 3), (1, 2), 1), {3}, {"isr": ()}, (N, None, None, None, None, -1)),
        # UNCLEAN: out-of-sync live replica, ISR reset to it, RECOVERING.
        (reg((1, 2, 3), (1,), N), {3}, {"election": U}, (3, (3,), None, None, None, 1)),
        # UNCLEAN prefers a clean leader when there is one.
        (reg((1, 2, 3), (1, 3), N), {2, 3}, {"election": U}, (3, None, None, None, None, -1)),
        # UNCLEAN with nobody live: nothing.
        (reg((1, 2, 3), (1,), N), set(), {"election": U}, None),
        # A leader that is not acceptable (fenced / shutting down) is replaced.
        (reg((1, 2, 3), (1, 2, 3), 1), {2, 3}, {}, (2, None, None, None, None, -1)),
        # AlterPartition-style shrink: no leader epoch bump.
        (
            reg((1, 2, 3), (1, 2, 3), 1),
            {1, 2, 3},
            {"isr": (1, 2), "bump": False},
            (KEEP, (1, 2), None, None, None, -1),
        ),
        # Leader recovered.
        (
            reg((1, 2, 3), (1,), 1, recovery=1),
            {1, 2, 3},
            {"recovery": LeaderRecoveryState.RECOVERED},
            (KEEP, None, None, None, None, 0),
        ),
        # Reassignment started: replicas grow, adding/removing set, epoch bump not needed.
        (
            reg((1, 2, 3), (1, 2, 3), 1),
            {1, 2, 3, 4},
            {"replicas": (4, 2, 3, 1), "adding": (4,), "removing": (1,)},
            (KEEP, None, (4, 2, 3, 1), (4,), (1,), -1),
        ),
        # Adding replica joins the ISR: the reassignment completes, 1 leaves, leadership goes
        # to the first target replica in sync (Kafka's reassign election).
        (
            reg((4, 2, 3, 1), (1, 2, 3), 1, adding=(4,), removing=(1,)),
            {1, 2, 3, 4},
            {"isr": (1, 2, 3, 4)},
            (4, (2, 3, 4), (4, 2, 3), (), (), -1),
        ),
        # Adding replica not in the ISR yet: nothing completes.
        (
            reg((4, 2, 3, 1), (1, 2, 3), 1, adding=(4,), removing=(1,)),
            {1, 2, 3, 4},
            {"isr": (1, 2, 3)},
            None,
        ),
    ],
)
def test_builder_branches(
    partition: PartitionRegistration, live: set[int], kwargs: dict, expected: tuple | None
) -> None:
    assert build(partition, live, **kwargs) == expected


def test_builder_bumps_leader_epoch_when_replicas_leave() -> None:
    part = reg((1, 2, 3), (1, 2, 3), 1)
    record = PartitionChangeBuilder(part, A, 0, lambda r: True).set_target_replicas((1, 2)).build()
    assert record is not None and record.leader == 1 and record.isr == (1, 2)
    merged = part.merge(record)
    assert (merged.leader_epoch, merged.partition_epoch) == (4, 8)


# State machines.

LIVE = Liveness(frozenset({1, 2, 3}), frozenset({3}))


def test_liveness() -> None:
    assert LIVE.live == {1, 2}
    assert LIVE.is_live(1) and not LIVE.is_live(3) and LIVE.is_live_or_shutting_down(3)
    assert not LIVE.is_live(9)


@pytest.mark.parametrize(
    ("partition", "state"),
    [
        (None, PartitionState.NON_EXISTENT),
        (reg((4, 5), (), N), PartitionState.NEW),
        (reg((1, 2), (1, 2), 1), PartitionState.ONLINE),
        (reg((3, 2), (3, 2), 3), PartitionState.ONLINE),  # shutting-down leader still leads
        (reg((4, 2), (4,), 4), PartitionState.OFFLINE),
        (reg((4, 2), (4,), N), PartitionState.OFFLINE),
    ],
)
def test_partition_state(partition: PartitionRegistration | None, state: PartitionState) -> None:
    assert partition_state(partition, LIVE) is state


@pytest.mark.parametrize(
    ("partition", "broker", "state"),
    [
        (None, 1, ReplicaState.NON_EXISTENT),
        (reg((1, 2), (1, 2), 1), 5, ReplicaState.NON_EXISTENT),
        (reg((1, 2), (1, 2), 1), 2, ReplicaState.ONLINE),
        (reg((1, 3), (1, 3), 1), 3, ReplicaState.ONLINE),
        (reg((1, 4), (1,), 1), 4, ReplicaState.OFFLINE),
        (reg((1, 2), (1,), 1, adding=(2,)), 2, ReplicaState.NEW),
        (reg((1, 2), (1, 2), 1, adding=(2,)), 2, ReplicaState.ONLINE),
    ],
)
def test_replica_state(
    partition: PartitionRegistration | None, broker: int, state: ReplicaState
) -> None:
    assert replica_state(partition, broker, LIVE) is state


PS = PartitionState
RS = ReplicaState
VALID_PARTITION = {
    (PS.NON_EXISTENT, PS.NEW),
    (PS.NEW, PS.ONLINE),
    (PS.ONLINE, PS.ONLINE),
    (PS.OFFLINE, PS.ONLINE),
    (PS.NEW, PS.OFFLINE),
    (PS.ONLINE, PS.OFFLINE),
    (PS.OFFLINE, PS.OFFLINE),
    (PS.OFFLINE, PS.NON_EXISTENT),
}
VALID_REPLICA = {
    (RS.NON_EXISTENT, RS.NEW),
    *((s, RS.ONLINE) for s in (RS.NEW, RS.ONLINE, RS.OFFLINE, RS.DELETION_INELIGIBLE)),
    *((s, RS.OFFLINE) for s in (RS.NEW, RS.ONLINE, RS.OFFLINE, RS.DELETION_INELIGIBLE)),
    (RS.OFFLINE, RS.DELETION_STARTED),
    (RS.DELETION_STARTED, RS.DELETION_SUCCESSFUL),
    (RS.OFFLINE, RS.DELETION_INELIGIBLE),
    (RS.DELETION_STARTED, RS.DELETION_INELIGIBLE),
    (RS.DELETION_SUCCESSFUL, RS.NON_EXISTENT),
}


@pytest.mark.parametrize("current", list(PS))
@pytest.mark.parametrize("target", list(PS))
def test_partition_transitions(current: PartitionState, target: PartitionState) -> None:
    valid = (current, target) in VALID_PARTITION
    assert is_valid_partition_transition(current, target) is valid
    if valid:
        check_partition_transition("t-0", current, target)
    else:
        with pytest.raises(IllegalStateTransition, match=f"Instead it is in {current.value}"):
            check_partition_transition("t-0", current, target)


@pytest.mark.parametrize("current", list(RS))
@pytest.mark.parametrize("target", list(RS))
def test_replica_transitions(current: ReplicaState, target: ReplicaState) -> None:
    valid = (current, target) in VALID_REPLICA
    assert is_valid_replica_transition(current, target) is valid
    if not valid:
        with pytest.raises(IllegalStateTransition, match=target.value):
            check_replica_transition("r", current, target)


def test_topic_deletion_replicas() -> None:
    deletion = TopicDeletionReplicas([(0, 1), (0, 2)])
    deletion.transition(0, 1, RS.DELETION_STARTED)
    deletion.transition(0, 2, RS.DELETION_STARTED)
    deletion.transition(0, 1, RS.DELETION_SUCCESSFUL)
    deletion.transition(0, 2, RS.DELETION_INELIGIBLE)  # its broker failed the StopReplica
    assert not deletion.all_successful()
    with pytest.raises(IllegalStateTransition):
        deletion.transition(0, 2, RS.DELETION_SUCCESSFUL)
    deletion.transition(0, 2, RS.OFFLINE)
    deletion.transition(0, 2, RS.DELETION_STARTED)
    deletion.transition(0, 2, RS.DELETION_SUCCESSFUL)
    assert deletion.all_successful()
    deletion.transition(0, 1, RS.NON_EXISTENT)
    assert deletion.state(0, 1) is RS.NON_EXISTENT
    assert deletion.in_state(RS.DELETION_SUCCESSFUL) == [(0, 2)]
