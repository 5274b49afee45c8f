"""KIP-320 in the consumer, the pure part (client.positions): positions carry the leader epoch
of the last consumed batch, a leader change makes them await validation, and the leader's
OffsetForLeaderEpoch answer decides between valid, back to the divergence point, reset, or
LogTruncationError (Kafka's SubscriptionState rules). The consumer's wiring is exercised on real
brokers in tests/integration/cluster/test_cluster_truncation.py."""

from __future__ import annotations

import pytest

from client import TopicPartition
from client.errors import DivergentOffset, LogTruncationError
from client.fetched_records import CompletedFetch
from client.metadata import ClusterMetadata
from client.positions import (
    NO_LEADER,
    EpochEndOffset,
    FetchPosition,
    LeaderAndEpoch,
    PartitionState,
    Validation,
    leader_and_epoch,
    log_truncation_error,
)
from protocol.errors import ErrorCode
from protocol.messages.metadata import (
    MetadataBroker,
    MetadataPartition,
    MetadataResponse,
    MetadataTopic,
)
from protocol.record_batch import HEADER_SIZE, Record, build_batch

TP = TopicPartition("t", 0)
L1 = LeaderAndEpoch(1, 0)
L2 = LeaderAndEpoch(2, 1)


def consumed(offset: int = 15, epoch: int = 0, leader: LeaderAndEpoch = L1) -> PartitionState:
    """A position reached by consuming records of leader epoch `epoch` from `leader`."""
    state = PartitionState()
    state.seek(0)
    assert state.maybe_validate(leader) is False  # no epoch yet: nothing to validate
    state.position, state.offset_epoch = offset, epoch
    return state


def awaiting(offset: int = 15, epoch: int = 0) -> tuple[PartitionState, FetchPosition]:
    state = consumed(offset, epoch)
    assert state.maybe_validate(L2) is True
    position = state.fetch_position()
    assert position == FetchPosition(offset, epoch, L2)
    return state, position


# -- entering validation -------------------------------------------------------------------


def test_a_new_leader_epoch_makes_a_position_with_an_epoch_await_validation() -> None:
    state = consumed()
    assert state.fetchable
    assert state.maybe_validate(L1) is False  # same leader and epoch: nothing happens
    assert state.maybe_validate(L2) is True
    assert not state.fetchable and state.current_leader == L2
    assert state.maybe_validate(L2) is True  # still awaiting until the answer comes


def test_same_leader_with_a_new_epoch_also_validates() -> None:
    state = consumed()
    assert state.maybe_validate(LeaderAndEpoch(1, 3)) is True


@pytest.mark.parametrize(
    ("offset_epoch", "metadata", "why"),
    [
        (-1, L2, "the position has no epoch (after a seek, or no record consumed yet)"),
        (0, LeaderAndEpoch(2, -1), "metadata gives no leader epoch"),
    ],
)
def test_without_both_epochs_the_new_leader_is_taken_without_validation(
    offset_epoch: int, metadata: LeaderAndEpoch, why: str
) -> None:
    state = consumed(epoch=offset_epoch)
    assert state.maybe_validate(metadata) is False, why
    assert state.fetchable and state.current_leader == metadata


def test_unknown_leader_or_no_position_changes_nothing() -> None:
    state = consumed()
    assert state.maybe_validate(NO_LEADER) is False
    assert state.current_leader == L1
    fresh = PartitionState()
    assert fresh.maybe_validate(L2) is False
    assert fresh.current_leader == NO_LEADER


def test_stale_metadata_with_an_older_leader_epoch_is_ignored() -> None:
    state = consumed(leader=L2)
    assert state.maybe_validate(L1) is False  # a broker that has not heard of epoch 1 yet
    assert state.current_leader == L2 and state.fetchable


def test_seek_clears_the_epoch_and_seek_with_an_epoch_validates() -> None:
    state, _ = awaiting()
    state.seek(7)
    assert state.offset_epoch == -1 and state.fetchable and state.current_leader == NO_LEADER
    assert state.maybe_validate(L2) is False
    state.seek(7, leader_epoch=0)  # Kafka's seek to an OffsetAndMetadata with an epoch
    assert state.maybe_validate(L2) is True


def test_reset_positions_take_no_epoch() -> None:
    state, _ = awaiting()
    state.request_reset("earliest")
    assert state.position is None and state.reset == "earliest" and not state.awaiting_validation
    state.reset_to(3)
    assert (state.position, state.offset_epoch, state.reset) == (3, -1, None)
    assert state.maybe_validate(L2) is False


# -- completing validation (Kafka's maybeCompleteValidation) -------------------------------


@pytest.mark.parametrize("policy", ["earliest", "latest", "none"])
@pytest.mark.parametrize("end", [15, 20])
def test_an_end_offset_at_or_after_the_position_is_valid(policy: str, end: int) -> None:
    state, position = awaiting(15)
    outcome, truncation = state.complete_validation(TP, position, EpochEndOffset(0, end), policy)
    assert (outcome, truncation) == (Validation.VALID, None)
    assert state.fetchable and (state.position, state.offset_epoch) == (15, 0)


@pytest.mark.parametrize("policy", ["earliest", "latest"])
def test_truncation_with_a_reset_policy_goes_back_to_the_first_offset_known_to_diverge(
    policy: str,
) -> None:
    state, position = awaiting(15, epoch=2)
    # the leader's log has epoch 1 as the largest <= 2, ending at 10
    outcome, truncation = state.complete_validation(TP, position, EpochEndOffset(1, 10), policy)
    assert (outcome, truncation) == (Validation.DIVERGED, None)
    assert (state.position, state.offset_epoch) == (10, 1)
    assert state.fetchable and state.current_leader == L2 and state.reset is None


def test_truncation_with_policy_none_reports_the_divergent_offset_and_keeps_waiting() -> None:
    state, position = awaiting(15)
    outcome, truncation = state.complete_validation(TP, position, EpochEndOffset(0, 10), "none")
    assert outcome is Validation.TRUNCATED
    assert truncation is not None
    assert truncation.tp == TP and truncation.position == position
    assert truncation.divergent == DivergentOffset(10, 0)
    # as Kafka: the position is left as it was, still not fetchable, until the user seeks
    assert state.position == 15 and state.awaiting_validation


@pytest.mark.parametrize(
    "end", [EpochEndOffset(-1, -1), EpochEndOffset(0, -1), EpochEndOffset(-1, 4)]
)
def test_an_undefined_answer_resets_by_policy(end: EpochEndOffset) -> None:
    state, position = awaiting(15)
    outcome, truncation = state.complete_validation(TP, position, end, "latest")
    assert (outcome, truncation) == (Validation.RESET, None)
    assert state.position is None and state.reset == "latest"

    state, position = awaiting(15)
    outcome, truncation = state.complete_validation(TP, position, end, "none")
    assert outcome is Validation.TRUNCATED
    assert truncation is not None and truncation.divergent is None
    assert state.position == 15


def test_an_answer_for_a_position_that_moved_meanwhile_is_ignored() -> None:
    state, position = awaiting(15)
    state.seek(3, leader_epoch=0)
    state.maybe_validate(L2)
    outcome, _ = state.complete_validation(TP, position, EpochEndOffset(0, 10), "earliest")
    assert outcome is Validation.SKIPPED
    assert state.position == 3 and state.awaiting_validation

    valid = consumed()
    outcome, _ = valid.complete_validation(
        TP, valid.fetch_position() or position, EpochEndOffset(0, 10), "earliest"
    )
    assert outcome is Validation.SKIPPED  # not awaiting validation at all
    assert valid.position == 15


# -- the error ------------------------------------------------------------------------------


def test_log_truncation_error_names_partitions_and_offsets() -> None:
    other = TopicPartition("u", 3)
    a, pa = awaiting(15)
    _, ta = a.complete_validation(TP, pa, EpochEndOffset(0, 10), "none")
    b, pb = awaiting(8, epoch=1)
    _, tb = b.complete_validation(other, pb, EpochEndOffset(-1, -1), "none")
    assert ta is not None and tb is not None
    error = log_truncation_error([ta, tb])
    assert isinstance(error, LogTruncationError)
    assert error.code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert error.fetch_offsets == {TP: 15, other: 8}
    assert error.divergent_offsets == {TP: DivergentOffset(10, 0)}
    text = str(error)
    assert "t-0: fetch offset 15 (leader epoch 0)" in text
    assert "diverges at offset 10" in text
    assert "u-3: fetch offset 8 (leader epoch 1)" in text
    assert "auto.offset.reset is none" in text


# -- where the epochs come from --------------------------------------------------------------


def test_leader_and_epoch_from_metadata() -> None:
    metadata = ClusterMetadata()
    metadata.update(
        MetadataResponse(
            brokers=(MetadataBroker(node_id=2, host="h", port=1),),
            topics=(
                MetadataTopic(
                    error_code=0,
                    name="t",
                    partitions=(
                        MetadataPartition(error_code=0, index=0, leader_id=2, leader_epoch=4),
                        MetadataPartition(error_code=0, index=1, leader_id=-1, leader_epoch=5),
                    ),
                ),
            ),
        ),
        0.0,
        all_topics=True,
    )
    assert leader_and_epoch(metadata, TP) == LeaderAndEpoch(2, 4)
    assert leader_and_epoch(metadata, TopicPartition("t", 1)) == NO_LEADER
    assert leader_and_epoch(metadata, TopicPartition("x", 0)) == NO_LEADER


def test_completed_fetch_reports_the_epoch_of_the_batch_of_the_last_record_taken() -> None:
    a = build_batch([Record(b"%d" % i) for i in range(3)], base_offset=0, partition_leader_epoch=0)
    b = build_batch([Record(b"%d" % i) for i in range(3)], base_offset=3, partition_leader_epoch=2)
    torn = build_batch([Record(b"x" * 50)], base_offset=6, partition_leader_epoch=5)
    torn = torn[: HEADER_SIZE + 5]  # its header is complete, its records are not
    cf = CompletedFetch(TP, 0, a + b + torn)
    out: list = []
    cf.take(2, out)
    assert (cf.next_offset, cf.last_epoch) == (2, 0)
    cf.take(2, out)  # offsets 2 and 3: the last one is from the epoch 2 batch
    assert (cf.next_offset, cf.last_epoch) == (4, 2)
    assert cf.take(100, out) is True
    # the torn batch of epoch 5 was not consumed: it must not lend its epoch to the position
    assert (cf.next_offset, cf.last_epoch) == (6, 2)
