"""broker.replica.partition_state: HW = min LEO over the ISR, forward only, min ISR rule."""

from __future__ import annotations

from broker.replica.partition_state import PartitionChange, PartitionState
from protocol.names import TopicPartition

TP = TopicPartition("t", 0)


def change(leader: int, epoch: int, isr: tuple[int, ...], replicas: tuple[int, ...], pe: int = 0):
    return PartitionChange(TP, "id", leader, epoch, isr, replicas, pe)


def test_single_replica_hw_follows_leo() -> None:
    s = PartitionState(TP, 1)
    s.apply(change(1, 0, (1,), (1,)), local_leo=0)
    assert s.is_leader and s.high_watermark == 0
    assert s.update_local_leo(5)
    assert s.high_watermark == 5
    assert not s.update_local_leo(5)


def test_hw_is_min_leo_over_isr_and_only_moves_forward() -> None:
    s = PartitionState(TP, 1)
    s.apply(change(1, 0, (1, 2), (1, 2)), local_leo=0)
    s.update_local_leo(10)
    assert s.high_watermark == 0  # follower 2 unknown
    assert s.update_follower_leo(2, 4)
    assert s.high_watermark == 4
    s.update_follower_leo(2, 3)
    assert s.high_watermark == 4


def test_hw_frozen_below_min_isr() -> None:
    s = PartitionState(TP, 1, min_insync_replicas=2)
    s.apply(change(1, 0, (1,), (1, 2)), local_leo=0)
    assert not s.update_local_leo(7)
    assert s.high_watermark == 0


def test_stale_changes_are_not_newer() -> None:
    s = PartitionState(TP, 1)
    s.apply(change(1, 3, (1,), (1,), pe=5), local_leo=0)
    assert not s.is_newer(change(1, 2, (1,), (1,), pe=9))
    assert not s.is_newer(change(1, 3, (1,), (1,), pe=5))
    assert s.is_newer(change(1, 3, (1,), (1,), pe=6))
    assert s.is_newer(change(2, 4, (2,), (1, 2)))


def test_restored_hw_never_past_leo() -> None:
    s = PartitionState(TP, 1)
    s.restore_high_watermark(100, local_leo=40)
    assert s.high_watermark == 40
