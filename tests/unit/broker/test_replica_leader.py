"""broker.replica leader side: caught-up timing, HW rules (min ISR, maximal ISR), ISR
shrink/expand with pending AlterPartition states, acks=all checks, follower-fetch checks."""

from __future__ import annotations

import pytest

from broker.replica.epochs import EpochHistory
from broker.replica.leader import (
    NEVER_MS,
    DivergingEpoch,
    FollowerState,
    PendingExpandIsr,
    PendingShrinkIsr,
    SessionClock,
    check_current_leader_epoch,
    diverging_epoch,
)
from broker.replica.partition_state import (
    AlterPartitionAction,
    PartitionChange,
    PartitionState,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.names import TopicPartition

TP = TopicPartition("t", 0)
T0 = 1_000_000  # the injected clock's start
LAG = 30_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def leader_state(
    isr: tuple[int, ...] = (1, 2, 3),
    replicas: tuple[int, ...] = (1, 2, 3),
    *,
    min_isr: int = 1,
    leo: int = 0,
    epoch: int = 5,
    clock: Clock | None = None,
) -> PartitionState:
    s = PartitionState(
        TP,
        1,
        min_insync_replicas=min_isr,
        replica_lag_time_max_ms=LAG,
        clock_ms=clock or Clock(),
    )
    s.apply(PartitionChange(TP, "tid", 1, epoch, isr, replicas, partition_epoch=10), leo)
    return s


# -- caught-up rule --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fetch_offset", "leader_leo", "expected_caught_up"),
    [
        (100, 100, T0 + 500),  # at the leader's LEO now: caught up at this fetch
        (120, 100, T0 + 500),  # beyond it (the leader's LEO moved during the read)
        (90, 100, T0),  # behind now, but has all the leader had at the previous fetch
        (79, 100, T0 - 7),  # behind both: unchanged
    ],
)
def test_caught_up_time_rule(fetch_offset: int, leader_leo: int, expected_caught_up: int) -> None:
    f = FollowerState(2)
    f.update_fetch(80, 0, T0 - 7, leader_leo=80)  # caught up at T0-7
    f.update_fetch(80, 0, T0, leader_leo=90)  # behind the new LEO 90; last fetch at T0
    assert f.last_caught_up_time_ms == T0 - 7
    f.update_fetch(fetch_offset, 0, T0 + 500, leader_leo=leader_leo)
    assert f.last_caught_up_time_ms == expected_caught_up
    assert f.log_end_offset == fetch_offset
    assert f.last_fetch_time_ms == T0 + 500


def test_caught_up_time_never_moves_back_and_leader_leo_remembered_as_max() -> None:
    f = FollowerState(2)
    f.update_fetch(50, 0, T0, leader_leo=50)
    f.update_fetch(50, 0, T0 - 100, leader_leo=50)  # an older fetch time arriving late
    assert f.last_caught_up_time_ms == T0
    f.update_fetch(50, 0, T0 + 1, leader_leo=40)
    assert f.last_fetch_leader_log_end_offset == 50


@pytest.mark.parametrize(
    ("leo", "now", "caught_up"),
    [
        (100, T0 + LAG + 1, True),  # at the leader's LEO: always
        (99, T0 + LAG, True),  # within replica.lag.time.max.ms
        (99, T0 + LAG + 1, False),
    ],
)
def test_is_caught_up(leo: int, now: int, caught_up: bool) -> None:
    f = FollowerState(2, log_end_offset=leo, last_caught_up_time_ms=T0)
    assert f.is_caught_up(100, now, LAG) is caught_up


def test_reset_on_new_leader_and_on_new_epoch() -> None:
    f = FollowerState(2, log_end_offset=40, last_fetch_time_ms=T0, last_caught_up_time_ms=T0)
    f.reset(T0 + 10, 50, new_leader=False, in_sync=True)
    assert (f.log_end_offset, f.last_fetch_leader_log_end_offset) == (40, 50)
    assert f.last_caught_up_time_ms == f.last_fetch_time_ms == T0 + 10
    f.reset(T0 + 20, 50, new_leader=False, in_sync=False)
    assert f.last_caught_up_time_ms == f.last_fetch_time_ms == NEVER_MS
    f.reset(T0 + 30, 50, new_leader=True, in_sync=True)
    assert f.log_end_offset == -1 and f.last_caught_up_time_ms == T0 + 30


# -- high watermark --------------------------------------------------------------------------


def fetch(s: PartitionState, replica: int, offset: int, now: int | None = None):
    return s.update_follower_fetch(replica, offset, now or T0, s.log_end_offset)


def test_hw_min_over_isr_forward_only() -> None:
    s = leader_state(leo=0)
    s.update_local_leo(10, now_ms=T0)
    assert s.high_watermark == 0  # followers' LEO unknown after becoming leader
    fetch(s, 2, 7)
    assert s.high_watermark == 0
    assert fetch(s, 3, 4).high_watermark_changed
    assert s.high_watermark == 4
    fetch(s, 3, 3)  # a follower going back never moves the HW back
    assert s.high_watermark == 4
    fetch(s, 3, 10)
    assert s.high_watermark == 7


@pytest.mark.parametrize(
    ("isr", "replicas", "min_isr", "advances"),
    [
        ((1, 2), (1, 2, 3), 2, True),  # at min ISR
        ((1,), (1, 2, 3), 2, False),  # below min ISR: frozen (Kafka >= 3.7)
        ((1,), (1, 2), 3, False),  # min(min.insync=3, RF=2) = 2 > 1
        ((1, 2), (1, 2), 3, True),  # effective min ISR is RF
        ((1,), (1,), 2, True),  # RF 1: effective min 1
    ],
)
def test_hw_frozen_below_min_isr(
    isr: tuple[int, ...], replicas: tuple[int, ...], min_isr: int, advances: bool
) -> None:
    s = leader_state(isr, replicas, min_isr=min_isr)
    for r in s.followers:
        fetch(s, r, 0)
    s.update_local_leo(5, now_ms=T0)
    for r in s.followers:
        fetch(s, r, 5)
    assert (s.high_watermark == 5) is advances
    assert s.is_under_min_isr is (not advances)


def test_hw_resumes_when_isr_back_at_min() -> None:
    s = leader_state((1,), (1, 2), min_isr=2)
    s.update_local_leo(5, now_ms=T0)
    update = fetch(s, 2, 5)
    assert s.high_watermark == 0
    # 2 is caught up: the leader proposes it; the maximal ISR counts it, the min-ISR rule
    # looks at the committed ISR, so the HW still waits for the controller.
    assert update.proposal is not None and update.proposal.new_isr == (1, 2)
    assert s.high_watermark == 0
    out = s.on_alter_partition_response(
        update.proposal, error_code=0, isr=(1, 2), leader_epoch=5, partition_epoch=11
    )
    assert out.action is AlterPartitionAction.COMMITTED and out.high_watermark_changed
    assert s.high_watermark == 5


def test_hw_waits_for_caught_up_follower_outside_isr() -> None:
    """Kafka's shouldWaitForReplicaToJoinIsr: a caught-up follower about to join (here it
    cannot yet: a shrink is in flight) holds the HW back; a lagging one does not."""
    s = leader_state((1, 2), (1, 2, 3))
    s.update_local_leo(10, now_ms=T0)
    fetch(s, 2, 10, now=T0)
    s.update_local_leo(20, now_ms=T0)
    late = T0 + LAG + 1
    shrink = s.maybe_shrink_isr(late)  # 2 has been behind LEO 20 for too long
    assert shrink is not None and shrink.new_isr == (1,)
    assert s.update_follower_fetch(3, 20, late, 20).proposal is None  # in flight: no expand
    s.update_local_leo(30, now_ms=late)
    out = s.on_alter_partition_response(
        shrink, error_code=0, isr=(1,), leader_epoch=5, partition_epoch=11, now_ms=late
    )
    assert out.action is AlterPartitionAction.COMMITTED
    assert s.high_watermark == 20  # 3 (caught up, LEO 20) is waited for; 2 (LEO 10) is not
    s.ineligible_replicas = frozenset({3})  # e.g. fenced: no longer waited for
    assert s.maybe_advance_high_watermark(late)
    assert s.high_watermark == 30


def test_hw_counts_pending_shrink_members() -> None:
    """While a shrink is in flight the removed members still hold the HW (maximal ISR)."""
    s = leader_state((1, 2, 3))
    s.update_local_leo(10, now_ms=T0)
    fetch(s, 2, 10)
    fetch(s, 3, 4)
    assert s.high_watermark == 4
    proposal = s.maybe_shrink_isr(T0 + LAG + 1)
    assert proposal is not None and proposal.new_isr == (1, 2)
    assert isinstance(s.isr_state, PendingShrinkIsr)
    assert not s.maybe_advance_high_watermark(T0 + LAG + 1)
    assert s.high_watermark == 4
    out = s.on_alter_partition_response(
        proposal, error_code=0, isr=(1, 2), leader_epoch=5, partition_epoch=11, now_ms=T0 + LAG + 1
    )
    assert out.high_watermark_changed and s.high_watermark == 10


def test_apply_as_follower_clamps_hw_and_drops_follower_state() -> None:
    s = leader_state(leo=10)
    s.high_watermark = 10
    s.apply(PartitionChange(TP, "tid", 2, 6, (2, 3), (1, 2, 3), 11), local_leo=8)
    assert not s.is_leader and s.high_watermark == 8 and s.followers == {}
    assert s.leader_epoch_start_offset is None
    assert not s.update_high_watermark_from_leader(20) and s.high_watermark == 8
    assert s.update_high_watermark_from_leader(3) and s.high_watermark == 3


# -- ISR shrink / expand ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fetch_at", "follower_leo", "now", "out"),
    [
        (T0, 10, T0 + LAG, frozenset()),  # within the lag time
        (T0, 9, T0 + LAG + 1, frozenset({2})),  # behind for longer than the lag time
        (T0, 10, T0 + LAG + 1, frozenset()),  # at the leader's LEO: never out of sync
        (None, -1, T0 + LAG + 1, frozenset({2})),  # never fetched since we became leader
    ],
)
def test_shrink_candidates(
    fetch_at: int | None, follower_leo: int, now: int, out: frozenset
) -> None:
    s = leader_state((1, 2, 3))
    s.update_local_leo(10, now_ms=T0)
    if fetch_at is not None:
        s.update_follower_fetch(2, follower_leo, fetch_at, 9 if follower_leo < 10 else 10)
    s.update_follower_fetch(3, 10, now, 10)
    assert s.out_of_sync_replicas(now) == out


def test_leader_never_a_shrink_candidate_and_nothing_while_inflight() -> None:
    s = leader_state((1, 2, 3))
    s.update_local_leo(10, now_ms=T0)
    assert s.out_of_sync_replicas(T0 + 2 * LAG) == {2, 3}
    first = s.maybe_shrink_isr(T0 + 2 * LAG)
    assert first is not None and first.new_isr == (1,)
    assert first.partition_epoch == 10 and first.leader_epoch == 5 and first.topic_id == "tid"
    assert s.maybe_shrink_isr(T0 + 2 * LAG) is None  # one proposal in flight at most
    assert s.out_of_sync_replicas(T0 + 2 * LAG) == frozenset()
    assert s.isr == (1, 2, 3)  # still the committed one


@pytest.mark.parametrize(
    ("follower_leo", "hw", "epoch_start", "expands"),
    [
        (10, 10, 8, True),
        (9, 10, 8, False),  # below the HW
        (10, 10, 12, False),  # below the start of the current leader epoch
        (12, 10, 12, True),
    ],
)
def test_expand_rule(follower_leo: int, hw: int, epoch_start: int, expands: bool) -> None:
    s = leader_state((1, 2), (1, 2, 3), leo=epoch_start)
    s.update_local_leo(max(hw, epoch_start, follower_leo), now_ms=T0)
    s.high_watermark = hw
    update = s.update_follower_fetch(3, follower_leo, T0, s.log_end_offset)
    assert (update.proposal is not None) is expands
    if expands:
        assert update.proposal.new_isr == (1, 2, 3)
        assert isinstance(s.isr_state, PendingExpandIsr)
        assert s.isr == (1, 2) and s.maximal_isr == (1, 2, 3)


def test_expand_only_assigned_eligible_non_members() -> None:
    s = leader_state((1, 2), (1, 2, 3), leo=0)
    with pytest.raises(KafkaError) as err:
        s.update_follower_fetch(4, 0, T0, 0)  # not in the assignment
    assert err.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert s.update_follower_fetch(2, 0, T0, 0).proposal is None  # already a member
    s.ineligible_replicas = frozenset({3})
    assert s.update_follower_fetch(3, 0, T0, 0).proposal is None
    assert s.isr_expand_candidates() == []
    s.ineligible_replicas = frozenset()
    assert s.isr_expand_candidates() == [3]


def test_no_expand_while_shrink_inflight_then_after_commit() -> None:
    s = leader_state((1, 2, 3), (1, 2, 3, 4))
    shrink = s.maybe_shrink_isr(T0 + 2 * LAG)
    assert shrink is not None
    assert s.update_follower_fetch(4, 0, T0 + 2 * LAG, 0).proposal is None
    s.on_alter_partition_response(
        shrink, error_code=0, isr=(1,), leader_epoch=5, partition_epoch=11
    )
    assert s.isr == (1,) and s.partition_epoch == 11 and not s.is_isr_inflight
    expand = s.update_follower_fetch(4, 0, T0 + 2 * LAG, 0).proposal
    assert expand is not None and expand.new_isr == (1, 4) and expand.partition_epoch == 11


@pytest.mark.parametrize(
    ("error", "action", "isr_after", "inflight"),
    [
        (ErrorCode.NONE, AlterPartitionAction.COMMITTED, (1, 2, 3), False),
        (ErrorCode.OPERATION_NOT_ATTEMPTED, AlterPartitionAction.ROLLED_BACK, (1, 2), False),
        (ErrorCode.INELIGIBLE_REPLICA, AlterPartitionAction.ROLLED_BACK, (1, 2), False),
        (ErrorCode.FENCED_LEADER_EPOCH, AlterPartitionAction.AWAIT_METADATA, (1, 2), True),
        (ErrorCode.INVALID_UPDATE_VERSION, AlterPartitionAction.AWAIT_METADATA, (1, 2), True),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, AlterPartitionAction.AWAIT_METADATA, (1, 2), True),
        (ErrorCode.NOT_CONTROLLER, AlterPartitionAction.RETRY, (1, 2), True),
        (ErrorCode.REQUEST_TIMED_OUT, AlterPartitionAction.RETRY, (1, 2), True),
    ],
)
def test_alter_partition_answers(
    error: ErrorCode, action: AlterPartitionAction, isr_after: tuple, inflight: bool
) -> None:
    s = leader_state((1, 2), (1, 2, 3))
    proposal = s.update_follower_fetch(3, 0, T0, 0).proposal
    assert proposal is not None
    out = s.on_alter_partition_response(
        proposal, error_code=int(error), isr=(1, 2, 3), leader_epoch=5, partition_epoch=11
    )
    assert out.action is action
    assert s.isr == isr_after and s.is_isr_inflight is inflight
    assert s.partition_epoch == (11 if action is AlterPartitionAction.COMMITTED else 10)


@pytest.mark.parametrize(
    ("leader_epoch", "partition_epoch", "action"),
    [
        (5, 10, AlterPartitionAction.COMMITTED),  # same version: nothing needed applying
        (5, 9, AlterPartitionAction.AWAIT_METADATA),  # older partition epoch than ours
        (4, 11, AlterPartitionAction.AWAIT_METADATA),  # another leader epoch
    ],
)
def test_alter_partition_answer_versions(
    leader_epoch: int, partition_epoch: int, action: AlterPartitionAction
) -> None:
    s = leader_state((1, 2), (1, 2, 3))
    proposal = s.update_follower_fetch(3, 0, T0, 0).proposal
    assert proposal is not None
    out = s.on_alter_partition_response(
        proposal,
        error_code=0,
        isr=(1, 2, 3),
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
    )
    assert out.action is action


def test_late_answer_after_leader_and_isr_is_ignored() -> None:
    s = leader_state((1, 2), (1, 2, 3))
    proposal = s.update_follower_fetch(3, 0, T0, 0).proposal
    assert proposal is not None
    s.apply(PartitionChange(TP, "tid", 1, 6, (1, 2), (1, 2, 3), 12), s.log_end_offset)
    assert not s.is_isr_inflight
    out = s.on_alter_partition_response(
        proposal, error_code=0, isr=(1, 2, 3), leader_epoch=5, partition_epoch=11
    )
    assert out.action is AlterPartitionAction.IGNORED and s.isr == (1, 2)


def test_rollback_then_new_proposal() -> None:
    s = leader_state((1, 2), (1, 2, 3))
    first = s.update_follower_fetch(3, 0, T0, 0).proposal
    assert first is not None
    s.on_alter_partition_response(first, error_code=int(ErrorCode.OPERATION_NOT_ATTEMPTED))
    second = s.update_follower_fetch(3, 0, T0 + 1, 0).proposal
    assert second is not None and second is not first


def test_reelected_leader_keeps_follower_leos_new_leader_forgets() -> None:
    clock = Clock()
    s = leader_state((1, 2, 3), clock=clock)
    s.update_local_leo(10, now_ms=T0)
    fetch(s, 2, 10)
    s.apply(PartitionChange(TP, "tid", 1, 6, (1, 2), (1, 2, 3), 11), 10)
    assert s.followers[2].log_end_offset == 10 and s.leader_epoch_start_offset == 10
    assert s.followers[3].last_caught_up_time_ms == NEVER_MS  # not in the ISR
    # A new partition epoch with the same leader epoch: not a new leader epoch.
    s.apply(PartitionChange(TP, "tid", 1, 6, (1, 2, 3), (1, 2, 3), 12), 15)
    assert s.leader_epoch_start_offset == 10
    s.apply(PartitionChange(TP, "tid", 2, 7, (2, 3), (1, 2, 3), 13), 15)
    s.apply(PartitionChange(TP, "tid", 1, 8, (1, 2, 3), (1, 2, 3), 14), 15)
    assert s.followers[2].log_end_offset == -1 and s.leader_epoch_start_offset == 15


# -- acks=all --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("isr", "min_isr", "acks", "error"),
    [
        ((1, 2), 2, -1, None),
        ((1,), 2, -1, ErrorCode.NOT_ENOUGH_REPLICAS),
        ((1,), 2, 1, None),  # only acks=all cares
        ((1,), 2, 0, None),
        ((1,), 5, -1, ErrorCode.NOT_ENOUGH_REPLICAS),  # min(5, RF 3) = 3
    ],
)
def test_check_append(isr: tuple, min_isr: int, acks: int, error: ErrorCode | None) -> None:
    s = leader_state(isr, (1, 2, 3), min_isr=min_isr)
    if error is None:
        s.check_append(acks)
    else:
        with pytest.raises(KafkaError) as err:
            s.check_append(acks)
        assert err.value.code == error
        assert "min.insync.replicas" in err.value.message


def test_check_append_not_leader() -> None:
    s = PartitionState(TP, 1)
    s.apply(PartitionChange(TP, "tid", 2, 1, (2,), (1, 2)), 0)
    with pytest.raises(KafkaError) as err:
        s.check_append(-1)
    assert err.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert s.check_enough_replicas_reach_offset(1) == (True, ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_acks_all_completion_and_after_append_error() -> None:
    s = leader_state((1, 2, 3), min_isr=2)
    s.update_local_leo(10, now_ms=T0)
    assert s.check_enough_replicas_reach_offset(10) == (False, ErrorCode.NONE)
    fetch(s, 2, 10)
    fetch(s, 3, 10)
    assert s.check_enough_replicas_reach_offset(10) == (True, ErrorCode.NONE)
    # The HW passed the offset, then the ISR shrank below the minimum (a produce still
    # waiting in the purgatory when that happened completes with the after-append error).
    shrink = s.maybe_shrink_isr(T0 + 2 * LAG)
    assert shrink is None  # both at the LEO: caught up
    s.apply(PartitionChange(TP, "tid", 1, 5, (1,), (1, 2, 3), 11), 10)
    assert s.check_enough_replicas_reach_offset(10) == (
        True,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    )


# -- follower fetch checks -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("local", "requested", "error"),
    [
        (5, -1, ErrorCode.NONE),
        (5, 5, ErrorCode.NONE),
        (5, 4, ErrorCode.FENCED_LEADER_EPOCH),
        (5, 6, ErrorCode.UNKNOWN_LEADER_EPOCH),
    ],
)
def test_check_current_leader_epoch(local: int, requested: int, error: ErrorCode) -> None:
    assert check_current_leader_epoch(local, requested) == error


@pytest.mark.parametrize(
    ("replica", "epoch", "error"),
    [
        (2, 5, None),
        (2, -1, None),
        (2, 4, ErrorCode.FENCED_LEADER_EPOCH),
        (2, 6, ErrorCode.UNKNOWN_LEADER_EPOCH),
        (9, 5, ErrorCode.UNKNOWN_LEADER_EPOCH),  # not (yet) a replica in this epoch
        (9, -1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    ],
)
def test_validate_follower_fetch(replica: int, epoch: int, error: ErrorCode | None) -> None:
    s = leader_state()
    if error is None:
        s.validate_follower_fetch(replica, epoch)
    else:
        with pytest.raises(KafkaError) as err:
            s.validate_follower_fetch(replica, epoch)
        assert err.value.code == error


def test_validate_follower_fetch_on_a_follower() -> None:
    s = PartitionState(TP, 1)
    s.apply(PartitionChange(TP, "tid", 2, 5, (2, 1), (1, 2)), 0)
    with pytest.raises(KafkaError) as err:
        s.validate_follower_fetch(3, 5)
    assert err.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


# Leader log: epoch 0 at 0, epoch 2 at 10, epoch 4 at 20, LEO 30.
LEADER = EpochHistory([(0, 0), (2, 10), (4, 20)], 30)


@pytest.mark.parametrize(
    ("last_fetched_epoch", "fetch_offset", "expected"),
    [
        (-1, 25, None),  # no epoch sent: no check
        (4, 30, None),  # latest epoch, at the LEO
        (4, 25, None),
        (2, 10, None),  # at the end of epoch 2
        (2, 12, None),  # inside epoch 2
        (2, 21, DivergingEpoch(2, 20)),  # past the end of epoch 2 here
        (3, 15, DivergingEpoch(2, 20)),  # epoch 3 never happened here: largest below is 2
        (1, 5, DivergingEpoch(0, 10)),
        (0, 11, DivergingEpoch(0, 10)),
        (4, 31, DivergingEpoch(4, 30)),  # beyond the LEO in the same epoch
    ],
)
def test_diverging_epoch_table(last_fetched_epoch: int, fetch_offset: int, expected) -> None:
    assert diverging_epoch(last_fetched_epoch, fetch_offset, LEADER) == expected


def test_diverging_epoch_out_of_range() -> None:
    with pytest.raises(KafkaError) as err:
        diverging_epoch(5, 30, LEADER)  # newer than anything we have
    assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    with pytest.raises(KafkaError) as err:
        diverging_epoch(4, 3, LEADER, log_start_offset=5)
    assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


@pytest.mark.parametrize(
    ("last_fetched_epoch", "fetch_offset", "expected"),
    [
        (5, 30, DivergingEpoch(4, 30)),  # a deposed leader's epoch: ours below it ends at 30
        (6, 30, None),  # our own epoch, not yet in the log
        (4, 30, None),
        (5, 33, DivergingEpoch(4, 30)),
    ],
)
def test_diverging_epoch_with_current_epoch_not_yet_in_log(
    last_fetched_epoch: int, fetch_offset: int, expected
) -> None:
    s = leader_state(epoch=6, leo=30)
    assert s.leader_epoch_start_offset == 30
    assert s.diverging_epoch_for(last_fetched_epoch, fetch_offset, LEADER, 0) == expected
    with pytest.raises(KafkaError):
        s.diverging_epoch_for(7, 30, LEADER, 0)


def test_epoch_history_from_records() -> None:
    h = EpochHistory.from_record_epochs([0, 0, 1, 1, 1, 3])
    assert h.entries == [(0, 0), (1, 2), (3, 5)] and h.log_end_offset == 6
    assert h.end_offset_for_epoch(2) == (5, 1)
    assert h.end_offset_for_epoch(3) == (6, 3)
    assert EpochHistory().end_offset_for_epoch(0) is None
    with pytest.raises(ValueError):
        EpochHistory.from_record_epochs([1, 0])


# -- the idle follower fast path ---------------------------------------------------------------


def test_idle_follower_fetch_only_for_an_isr_member_at_leo_with_everything_committed() -> None:
    clock = Clock()
    s = leader_state(leo=10, clock=clock)
    for r in (2, 3):
        s.update_follower_fetch(r, 10, clock.now, 10)
    assert s.high_watermark == 10
    clock.now += LAG
    assert s.record_idle_follower_fetch(2, 10, clock.now)
    assert s.followers[2].last_caught_up_time_ms == clock.now
    assert s.followers[2].last_fetch_time_ms == clock.now
    # Caught up by the fast path: after an append, 2 is in sync for a lag more, 3 (silent)
    # is not (a follower at the leader's LEO is in sync whatever the time, as Kafka's).
    s.update_local_leo(11)
    assert s.out_of_sync_replicas(clock.now + LAG - 1) == frozenset({3})
    # Not at the leader's LEO (an append since), or asking from elsewhere: the full path.
    s.update_local_leo(11)
    assert not s.record_idle_follower_fetch(2, 10, clock.now)
    assert not s.record_idle_follower_fetch(2, 11, clock.now)  # its LEO is still 10
    s.update_follower_fetch(2, 11, clock.now, 11)
    assert s.high_watermark == 10  # 3 (in the ISR) is at 10
    assert not s.record_idle_follower_fetch(2, 11, clock.now)  # HW < LEO: not everything committed
    # Not in the ISR: it may have to join, so always the full path.
    t = leader_state(isr=(1, 2), leo=4, clock=clock)
    for r in (2, 3):
        t.update_follower_fetch(r, 4, clock.now, 4)
    assert not t.record_idle_follower_fetch(3, 4, clock.now)
    assert not t.record_idle_follower_fetch(9, 4, clock.now)  # not a replica at all


def test_a_quiet_partition_counts_its_sessions_fetches_as_fetches_at_our_leo() -> None:
    """A follower's session stops reading a partition that gave the idle answer (the leader's
    broker.handlers.fetch); each later fetch of that session is one at our LEO at the
    session's clock, without touching the partition. After an append, the follower is caught
    up as of the session's last fetch, not as of the idle read long before (which would shrink
    it out of the ISR within a lag of going quiet: a false shrink)."""
    clock = Clock()
    s = leader_state(leo=10, clock=clock)
    for r in (2, 3):
        s.update_follower_fetch(r, 10, clock.now, 10)
    session = SessionClock(clock.now)
    assert s.record_idle_follower_fetch(2, 10, clock.now, session)
    assert s.followers[2].quiet is session
    clock.now += 5 * LAG
    session.ms = clock.now  # the session fetched, the partition was not read
    s.update_local_leo(11)  # an append: neither follower is at our LEO any more
    assert s.out_of_sync_replicas(clock.now + LAG - 1) == frozenset({3})
    # The session reads it again: the quiet stretch is folded into the times first.
    s.followers[2].fold_quiet()
    assert s.followers[2].quiet is None
    assert s.followers[2].last_caught_up_time_ms == clock.now
    s.update_follower_fetch(2, 10, clock.now + 1, 11)  # from the LEO it had at that fetch
    assert s.out_of_sync_replicas(clock.now + LAG) == frozenset({3})
    assert s.out_of_sync_replicas(clock.now + LAG + 1) == frozenset({2, 3})


def test_a_new_leader_epoch_forgets_the_quiet_session() -> None:
    f = FollowerState(2, log_end_offset=5, quiet=SessionClock(1_000))
    f.reset(2_000, 5, new_leader=False, in_sync=True)
    assert f.quiet is None and f.last_caught_up_time_ms == 2_000
