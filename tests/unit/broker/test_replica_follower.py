"""broker.replica.follower: fetch states, truncation decisions (KIP-101/279/595), out of range,
errors, follower HW."""

from __future__ import annotations

import pytest

from broker.replica.epochs import EpochHistory
from broker.replica.follower import (
    FetchPosition,
    FetchStatus,
    FollowerErrorAction,
    FollowerFetchState,
    OutOfRangeDecision,
    follower_high_watermark,
)
from broker.replica.leader import DivergingEpoch
from protocol.errors import ErrorCode


def log(entries: list[tuple[int, int]], leo: int) -> EpochHistory:
    return EpochHistory(list(entries), leo)


def start(history: EpochHistory, hw: int, **kw) -> FollowerFetchState:
    return FollowerFetchState.become_follower(
        topic_id="tid", leader_epoch=7, log=history, high_watermark=hw, **kw
    )


@pytest.mark.parametrize(
    ("history", "hw", "flag", "offset", "last_epoch", "status", "truncate_to"),
    [
        # Post-KIP-101: from the LEO with the latest epoch; never the local HW.
        (log([(0, 0), (3, 10)], 15), 12, False, 15, 3, FetchStatus.FETCHING, None),
        (log([], 0), 0, False, 0, None, FetchStatus.FETCHING, None),  # empty log
        (log([], 5), 3, False, 3, None, FetchStatus.TRUNCATING, 3),  # no epochs: the HW
        # Pre-KIP-101 (the flag): truncate to the local HW, fetch without epochs.
        (log([(0, 0), (3, 10)], 15), 12, True, 12, None, FetchStatus.TRUNCATING, 12),
        (log([(0, 0), (3, 10)], 15), 15, True, 15, None, FetchStatus.FETCHING, None),
        (log([(0, 0)], 4), 9, True, 4, None, FetchStatus.FETCHING, None),  # HW past LEO
    ],
)
def test_become_follower(
    history: EpochHistory,
    hw: int,
    flag: bool,
    offset: int,
    last_epoch: int | None,
    status: FetchStatus,
    truncate_to: int | None,
) -> None:
    s = start(history, hw, truncate_to_hw_on_become_follower=flag)
    assert (s.fetch_offset, s.last_fetched_epoch, s.status, s.truncate_to) == (
        offset,
        last_epoch,
        status,
        truncate_to,
    )
    assert s.epoch_checks is not flag
    assert not s.is_ready_for_fetch(0) or status is FetchStatus.FETCHING


def test_become_follower_same_epoch_keeps_state_unless_failed() -> None:
    history = log([(0, 0)], 10)
    s = start(history, 0)
    s.fetch_offset = 8
    assert start(history, 0, current=s) is s
    s.status = FetchStatus.FAILED
    fresh = start(history, 0, current=s)
    assert fresh is not s and fresh.status is FetchStatus.FETCHING
    newer = FollowerFetchState.become_follower(
        topic_id="tid", leader_epoch=8, log=history, high_watermark=0, current=s
    )
    assert newer.current_leader_epoch == 8


def test_position_and_records() -> None:
    history = log([(0, 0), (3, 10)], 15)
    s = start(history, 0)
    assert s.position() == FetchPosition(15, 3, 7)
    history.entries.append((7, 15))
    history.log_end_offset = 20
    s.on_records(history)
    assert s.position() == FetchPosition(20, 7, 7)
    pre101 = start(history, 20, truncate_to_hw_on_become_follower=True)
    pre101.on_records(history)
    assert pre101.position() == FetchPosition(20, -1, 7)


# Follower log: epoch 0 at 0, epoch 2 at 10, epoch 3 at 20; LEO 30.
FOLLOWER = [(0, 0), (2, 10), (3, 20)]


@pytest.mark.parametrize(
    ("diverging", "target"),
    [
        (DivergingEpoch(2, 15), 15),  # both know epoch 2: the smaller end
        (DivergingEpoch(2, 25), 20),  # our epoch 2 ends earlier
        (DivergingEpoch(3, 40), 30),  # never past our own LEO
        (DivergingEpoch(1, 12), 10),  # we never had epoch 1: end of our epoch 0, ask again
        (DivergingEpoch(0, 5), 5),
        (DivergingEpoch(-1, 7), 7),  # no epoch in the answer: the leader's offset
        (DivergingEpoch(2, -1), 30),  # no offset: the fetch offset
    ],
)
def test_truncation_on_diverging_epoch(diverging: DivergingEpoch, target: int) -> None:
    history = log(FOLLOWER, 30)
    s = start(history, 0)
    assert s.on_diverging_epoch(diverging, history) == target
    assert s.status is FetchStatus.TRUNCATING and s.truncate_to == target
    assert not s.is_ready_for_fetch(0)


def test_truncation_when_leader_epoch_older_than_all_ours() -> None:
    history = log([(4, 100)], 130)  # log starts at 100 in epoch 4: epoch 2 ended by 100
    s = start(history, 0)
    assert s.on_diverging_epoch(DivergingEpoch(2, 110), history) == 100
    # No history at all: the leader's offset, not past our LEO.
    assert s.on_diverging_epoch(DivergingEpoch(2, 110), log([], 130)) == 110
    assert s.on_diverging_epoch(DivergingEpoch(2, 110), log([], 90)) == 90


def test_truncation_done_resumes_fetching_with_new_latest_epoch() -> None:
    history = log(FOLLOWER, 30)
    s = start(history, 0)
    target = s.on_diverging_epoch(DivergingEpoch(1, 12), history)
    history.entries, history.log_end_offset = [(0, 0)], target  # the driver truncates
    s.truncation_done(history)
    assert s.status is FetchStatus.FETCHING and s.truncate_to is None
    assert s.position() == FetchPosition(10, 0, 7)


@pytest.mark.parametrize(
    ("leader_start", "leader_end", "own_leo", "decision"),
    [
        (0, 20, 30, OutOfRangeDecision(truncate_to=20, fetch_offset=20)),  # unclean election
        (50, 80, 30, OutOfRangeDecision(truncate_fully_and_start_at=50, fetch_offset=50)),
        (10, 80, 30, OutOfRangeDecision(fetch_offset=30)),  # just retry from our LEO
    ],
)
def test_offset_out_of_range(
    leader_start: int, leader_end: int, own_leo: int, decision: OutOfRangeDecision
) -> None:
    s = start(log(FOLLOWER, own_leo), 0)
    got = s.on_offset_out_of_range(
        leader_log_start_offset=leader_start,
        leader_log_end_offset=leader_end,
        log_end_offset=own_leo,
    )
    assert got == decision
    truncating = decision.truncate_to is not None or decision.truncate_fully_and_start_at
    assert (s.status is FetchStatus.TRUNCATING) is bool(truncating)


@pytest.mark.parametrize(
    ("code", "request_epoch", "action", "status", "delayed"),
    [
        (ErrorCode.OFFSET_OUT_OF_RANGE, 7, FollowerErrorAction.HANDLE_OUT_OF_RANGE, "F", False),
        (ErrorCode.FENCED_LEADER_EPOCH, 7, FollowerErrorAction.AWAIT_LEADER_AND_ISR, "X", False),
        # Fenced for an older request epoch: we already moved on, just retry.
        (ErrorCode.FENCED_LEADER_EPOCH, 6, FollowerErrorAction.RETRY_AFTER_BACKOFF, "F", True),
        (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            7,
            FollowerErrorAction.RETRY_AFTER_BACKOFF,
            "F",
            True,
        ),
        (ErrorCode.KAFKA_STORAGE_ERROR, 7, FollowerErrorAction.RETRY_AFTER_BACKOFF, "F", True),
    ],
)
def test_partition_errors(
    code: ErrorCode, request_epoch: int, action: FollowerErrorAction, status: str, delayed: bool
) -> None:
    s = start(log(FOLLOWER, 30), 0)
    got = s.on_error(int(code), request_leader_epoch=request_epoch, now_ms=1000, backoff_ms=1000)
    assert got is action
    expected = FetchStatus.FAILED if status == "X" else FetchStatus.FETCHING
    assert s.status is expected
    assert s.is_delayed(1999) is delayed
    assert not s.is_delayed(2000)
    assert s.is_ready_for_fetch(2000) is (expected is FetchStatus.FETCHING)


@pytest.mark.parametrize("code", [ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER])
def test_a_leader_behind_our_epoch_is_asked_again_soon(code: ErrorCode) -> None:
    """A follower told of its new leader before that leader applied the change (brokers apply
    a failover's steps each at its own pace) waited replica.fetch.backoff.ms (1 s) for half of
    the moved partitions. Now: 50 ms, doubling while it stays behind, up to that backoff; an
    answer without the error starts over."""
    s = start(log(FOLLOWER, 30), 0)
    waits = []
    for now in range(0, 8000, 1000):
        got = s.on_error(int(code), request_leader_epoch=7, now_ms=now, backoff_ms=1000)
        assert got is FollowerErrorAction.RETRY_AFTER_BACKOFF and s.status is FetchStatus.FETCHING
        assert s.delayed_until_ms is not None
        waits.append(s.delayed_until_ms - now)
    assert waits == [50, 100, 200, 400, 800, 1000, 1000, 1000]
    s.on_answer()
    s.on_error(int(code), request_leader_epoch=7, now_ms=9000, backoff_ms=1000)
    assert s.delayed_until_ms == 9050


@pytest.mark.parametrize(
    ("leader_hw", "leo", "log_start", "hw"),
    [(10, 20, 0, 10), (30, 20, 0, 20), (5, 20, 8, 8), (-1, 0, 0, 0)],
)
def test_follower_high_watermark(leader_hw: int, leo: int, log_start: int, hw: int) -> None:
    assert follower_high_watermark(leader_hw, leo, log_start) == hw
