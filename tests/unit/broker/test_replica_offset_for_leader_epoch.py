"""The leader's OffsetForLeaderEpoch answer (PartitionState.end_offset_for_epoch), which a
consumer uses to detect truncation (KIP-320): as Kafka's, the leader's own epoch counts from
where it started even before the log has a batch of it."""

from __future__ import annotations

import pytest

from broker.replica.epochs import EpochHistory, OffsetAndEpoch
from broker.replica.partition_state import PartitionChange, PartitionState
from protocol.names import TopicPartition

TP = TopicPartition("t", 0)


def leader(epoch: int, leo: int) -> PartitionState:
    s = PartitionState(TP, 1)
    s.apply(PartitionChange(TP, "id", 1, epoch, (1,), (1, 2)), local_leo=leo)
    return s


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        # The log has epochs 0 (from 0) and 2 (from 10), LEO 12; we lead epoch 5 since 12.
        (0, OffsetAndEpoch(10, 0)),
        (1, OffsetAndEpoch(10, 0)),
        (2, OffsetAndEpoch(12, 2)),  # epoch 2 ends where our epoch 5 starts
        (3, OffsetAndEpoch(12, 2)),  # an epoch we never saw (a deposed leader's): same end
        (4, OffsetAndEpoch(12, 2)),
        (5, OffsetAndEpoch(12, 5)),  # our own epoch: the log end
        (6, None),
    ],
)
def test_epochs_before_ours_end_where_ours_started_before_any_append(
    requested: int, expected: OffsetAndEpoch | None
) -> None:
    log = EpochHistory([(0, 0), (2, 10)], 12)
    assert leader(5, 12).end_offset_for_epoch(requested, log) == expected


def test_once_the_log_has_our_epoch_it_answers_alone() -> None:
    log = EpochHistory([(0, 0), (2, 10), (5, 12)], 20)
    s = leader(5, 12)
    assert s.end_offset_for_epoch(3, log) == OffsetAndEpoch(12, 2)
    assert s.end_offset_for_epoch(5, log) == OffsetAndEpoch(20, 5)


def test_an_empty_log_places_older_epochs_at_our_start() -> None:
    log = EpochHistory([], 0)
    assert leader(3, 0).end_offset_for_epoch(1, log) == OffsetAndEpoch(0, 1)
