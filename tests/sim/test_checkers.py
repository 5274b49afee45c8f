"""The checkers against hand-made histories: each planted violation must be caught (a checker
that misses one is useless) and each legal history must pass."""

from __future__ import annotations

import pytest

from tests.sim.checkers import Checkers, InvariantViolation, NodeView
from tests.sim.state_machine import INITIAL_DIGEST, encode_snapshot, fold


def v(node: int, role: str, epoch: int, log: list[tuple[int, bytes]], hw: int = 0) -> NodeView:
    """A view from (epoch, data) pairs: the offsets are their positions."""
    entries = [(offset, e, data) for offset, (e, data) in enumerate(log)]
    return NodeView(node_id=node, role=role, epoch=epoch, log=entries, high_watermark=hw)


A, B, C = (1, b"a"), (1, b"b"), (2, b"c")


def test_a_legal_history_passes() -> None:
    c = Checkers()
    c.observe(v(1, "leader", 1, [A]))
    c.observe(v(2, "follower", 1, [A]))
    c.observe(v(1, "leader", 1, [A, B], hw=1))
    c.apply(1, 0, b"a")
    c.observe(v(2, "follower", 1, [A, B], hw=1))
    c.apply(2, 0, b"a")
    # node 3 had an uncommitted entry of epoch 1 at offset 1 that it truncates: fine
    c.observe(v(3, "follower", 1, [A, (1, b"b")]))
    c.observe(v(2, "leader", 2, [A, B, C], hw=2))
    c.observe(v(3, "follower", 2, [A, B, C], hw=3))
    # a stale leader of epoch 1 may still think it leads, without the epoch-2 commit
    c.observe(v(1, "leader", 1, [A, B], hw=2))
    assert c.leaders == {1: 1, 2: 2}
    assert c.committed == [(0, *A), (1, *B), (2, *C)]


def test_two_leaders_in_one_epoch() -> None:
    c = Checkers()
    c.observe(v(1, "leader", 3, []))
    c.observe(v(1, "follower", 4, []))
    # a leader of epoch 3 seen long ago still counts
    with pytest.raises(InvariantViolation, match=r"election safety: nodes 1 and 2 .* epoch 3"):
        c.observe(v(2, "leader", 3, []))


def test_same_offset_and_epoch_different_data() -> None:
    c = Checkers()
    c.observe(v(1, "leader", 1, [A, B]))
    with pytest.raises(InvariantViolation, match="log matching: offset 1 epoch 1 holds b'x'"):
        c.observe(v(2, "follower", 1, [A, (1, b"x")]))


def test_same_entry_different_prefix() -> None:
    c = Checkers()
    c.observe(v(1, "follower", 2, [(1, b"p"), C]))
    with pytest.raises(InvariantViolation, match="logs before it differ"):
        c.observe(v(2, "follower", 2, [(2, b"q"), C]))


def test_log_matching_is_checked_after_a_truncation_too() -> None:
    c = Checkers()
    c.observe(v(1, "follower", 1, [A, B]))
    c.observe(v(2, "follower", 2, [A, C]))
    c.observe(v(1, "follower", 2, [A]))  # truncated: legal
    with pytest.raises(InvariantViolation, match="log matching"):
        c.observe(v(1, "follower", 2, [A, (2, b"other")]))


def test_two_nodes_commit_different_entries() -> None:
    c = Checkers()
    c.observe(v(1, "follower", 2, [A, B], hw=2))
    with pytest.raises(InvariantViolation, match="state-machine safety: node 2 committed"):
        c.observe(v(2, "follower", 2, [A, C], hw=2))


def test_two_nodes_apply_different_data() -> None:
    c = Checkers()
    c.apply(1, 0, b"a")
    with pytest.raises(InvariantViolation, match="state-machine safety: node 2 applied b'z'"):
        c.apply(2, 0, b"z")


def test_a_node_skips_an_offset_when_applying() -> None:
    c = Checkers()
    c.apply(1, 0, b"a")
    with pytest.raises(InvariantViolation, match="applied offset 2 but its next is 1"):
        c.apply(1, 2, b"c")


def test_new_leader_without_a_committed_entry() -> None:
    c = Checkers()
    c.observe(v(1, "leader", 1, [A, B], hw=2))
    with pytest.raises(InvariantViolation, match="leader completeness: node 2 leads epoch 2"):
        c.observe(v(2, "leader", 2, [A]))


def test_a_later_commit_missing_from_a_current_leader() -> None:
    c = Checkers()
    c.observe(v(2, "leader", 2, [A]))
    # node 3 learns that offset 1 was committed in epoch 2, but leader 2 does not have it
    with pytest.raises(InvariantViolation, match="leader completeness: node 2"):
        c.observe(v(3, "follower", 2, [A, B], hw=2))


def test_high_watermark_goes_back() -> None:
    c = Checkers()
    c.observe(v(1, "follower", 1, [A, B], hw=2))
    with pytest.raises(InvariantViolation, match="high watermark went from 2 to 1"):
        c.observe(v(1, "follower", 1, [A, B], hw=1))


def test_a_committed_entry_is_truncated() -> None:
    c = Checkers()
    c.observe(v(1, "follower", 1, [A, B], hw=2))
    with pytest.raises(InvariantViolation, match="commit never goes back: node 1 lost"):
        c.observe(v(1, "follower", 1, [A], hw=2))


def test_a_crash_may_lose_only_the_unflushed_committed_tail() -> None:
    c = Checkers()
    c.observe(v(1, "follower", 1, [A, B, C], hw=3))
    c.crashed(1, flushed_end=2)
    c.observe(v(1, "follower", 1, [A, B], hw=0))  # restarted: HW unknown again, tail lost
    c.crashed(1, flushed_end=2)
    with pytest.raises(InvariantViolation, match="had 2 committed and flushed entries"):
        c.observe(v(1, "follower", 1, [A], hw=0))


# -- logs that start above 0, snapshots, state machines ----------------------------------------


def tail(node: int, role: str, epoch: int, start: int, start_epoch: int,
         log: list[tuple[int, bytes]], hw: int = 0) -> NodeView:  # fmt: skip
    """A view of a log starting at `start` (the entries below are in a snapshot)."""
    entries = [(start + i, e, data) for i, (e, data) in enumerate(log)]
    return NodeView(node, role, epoch, entries, hw, log_start=start, start_epoch=start_epoch)


def applied_prefix(c: Checkers, node: int, entries: list[bytes]) -> bytes:
    """Apply `entries` from offset 0 on `node`; returns the state digest after them."""
    digest = INITIAL_DIGEST
    for offset, data in enumerate(entries):
        digest = fold(digest, offset, data)
        c.apply(node, offset, data, digest)
    return digest


def test_a_legal_history_with_snapshots_passes() -> None:
    c = Checkers()
    c.observe(v(1, "leader", 1, [A, B, C], hw=3))
    digest = applied_prefix(c, 1, [b"a", b"b"])
    c.snapshot_created(1, 2, 1, encode_snapshot(2, digest))
    c.observe(tail(1, "leader", 1, 2, 1, [C], hw=3))  # the log below the snapshot dropped
    # node 2 fetched the snapshot: its log restarts at 2, its state machine loads it
    c.observe(tail(2, "follower", 1, 2, 1, []))
    c.snapshot_loaded(2, 2, 1, encode_snapshot(2, digest))
    c.observe(tail(2, "follower", 1, 2, 1, [C], hw=3))
    c.apply(2, 2, b"c", fold(digest, 2, b"c"))
    c.observe(tail(2, "leader", 2, 2, 1, [C, (2, b"d")], hw=3))
    assert c.committed == [(0, *A), (1, *B), (2, *C)]


def test_snapshot_state_off_by_one_entry() -> None:
    c = Checkers()
    c.observe(v(1, "follower", 1, [A, B], hw=2))
    after_two = applied_prefix(c, 1, [b"a", b"b"])
    with pytest.raises(InvariantViolation, match=r"state-machine safety: node 1 created snapshot "
                       r"\(1, 1\) whose state .* is not the fold"):  # fmt: skip
        c.snapshot_created(1, 1, 1, encode_snapshot(1, after_two))


def test_snapshot_labelled_with_another_offset_or_epoch() -> None:
    c = Checkers()
    c.observe(v(1, "follower", 1, [A, B], hw=2))
    digest = applied_prefix(c, 1, [b"a", b"b"])
    with pytest.raises(
        InvariantViolation, match=r"snapshot \(1, 1\) holding the state at offset 2"
    ):
        c.snapshot_loaded(2, 1, 1, encode_snapshot(2, digest))
    with pytest.raises(InvariantViolation, match="entry committed at offset 1 has epoch 1"):
        c.snapshot_loaded(2, 2, 7, encode_snapshot(2, digest))
    with pytest.raises(InvariantViolation, match="not a simulated state-machine snapshot"):
        c.snapshot_loaded(2, 2, 1, b"garbage")


def test_a_loaded_snapshot_must_not_take_the_state_back() -> None:
    c = Checkers()
    c.observe(v(2, "follower", 1, [A, B], hw=2))
    applied_prefix(c, 1, [b"a"])
    digest = applied_prefix(c, 2, [b"a", b"b"])
    c.snapshot_created(2, 2, 1, encode_snapshot(2, digest))
    c.snapshot_loaded(1, 2, 1, encode_snapshot(2, digest))  # forward: fine
    c.apply(1, 2, b"c")
    with pytest.raises(InvariantViolation, match=r"commit never goes back: node 1 loaded snapshot"):
        c.snapshot_loaded(1, 2, 1, encode_snapshot(2, digest))
    c.crashed(1, flushed_end=0)
    c.snapshot_loaded(1, 2, 1, encode_snapshot(2, digest))  # a restart loads it again: fine


def test_a_snapshot_above_the_high_watermark() -> None:
    c = Checkers()
    c.observe(v(1, "leader", 1, [A, B], hw=1))
    digest = applied_prefix(c, 1, [b"a"])
    with pytest.raises(InvariantViolation, match=r"created snapshot \(2, 1\) above the high "
                       "watermark: no node was seen committing beyond offset 0"):  # fmt: skip
        c.snapshot_created(1, 2, 1, encode_snapshot(2, fold(digest, 1, b"b")))


def test_a_state_machine_that_diverges_from_the_fold() -> None:
    c = Checkers()
    applied_prefix(c, 1, [b"a"])
    with pytest.raises(InvariantViolation, match="node 2's state after offset 0 is"):
        c.apply(2, 0, b"a", fold(INITIAL_DIGEST, 1, b"a"))


def test_log_matching_over_the_overlap_of_logs_with_different_starts() -> None:
    c = Checkers()
    c.observe(v(1, "follower", 2, [A, B, C]))
    c.observe(tail(2, "follower", 2, 2, 1, [C]))  # same predecessor epoch: fine
    with pytest.raises(InvariantViolation, match=r"logs before it differ \(epoch 2 vs 1"):
        c.observe(tail(3, "follower", 2, 2, 2, [C]))


def test_a_leader_whose_log_starts_above_0_is_complete_over_its_log() -> None:
    c = Checkers()
    c.observe(v(1, "follower", 1, [A, B], hw=2))
    c.observe(tail(2, "leader", 2, 1, 1, [B, C]))  # offset 0 is in its snapshot: fine
    with pytest.raises(InvariantViolation, match="leader completeness: node 3 leads epoch 3 "
                       "without the entry committed at offset 1"):  # fmt: skip
        c.observe(tail(3, "leader", 3, 1, 1, [(3, b"x")]))


def test_a_committed_entry_lost_under_a_restarted_log() -> None:
    c = Checkers()
    c.observe(v(1, "follower", 1, [A, B, C], hw=3))
    c.observe(tail(1, "follower", 1, 3, 2, [], hw=3))  # all of it under a snapshot: fine
    c.observe(tail(2, "follower", 1, 0, 0, [A, B, C], hw=3))
    with pytest.raises(InvariantViolation, match=r"its log now holds \[1, 2\)"):
        c.observe(tail(2, "follower", 1, 1, 1, [B], hw=3))


# -- proposals -----------------------------------------------------------------------------------


def test_an_abandoned_proposal_shows_up_in_a_log() -> None:
    c = Checkers()
    c.observe(v(1, "leader", 1, [(1, b"")]))
    c.proposed(1, 1, b"p1")
    c.abandoned(1, 1, 1, 1)
    with pytest.raises(InvariantViolation, match="abandoned proposals: node 1 holds offset 1 of "
                       "epoch 1, whose leader abandoned"):  # fmt: skip
        c.observe(v(1, "leader", 1, [(1, b""), (1, b"other")]))
    c = Checkers()
    c.proposed(1, 1, b"p1")
    c.abandoned(1, 1, 1, 1)
    with pytest.raises(InvariantViolation, match=r"holds abandoned proposal b'p1' at offset 3"):
        c.observe(v(2, "leader", 2, [(1, b""), (2, b""), (2, b""), (2, b"p1")]))


def test_proposals_abandoned_after_being_appended() -> None:
    c = Checkers()
    c.observe(v(1, "leader", 1, [(1, b""), (1, b"p1")]))
    with pytest.raises(InvariantViolation, match="already holds an entry of epoch 1 at offset 1"):
        c.abandoned(1, 1, 1, 1)


def test_a_promised_offset_holds_other_data() -> None:
    c = Checkers()
    c.proposed(1, 1, b"p1")
    with pytest.raises(InvariantViolation, match="promised it to proposal b'p1'"):
        c.observe(v(1, "leader", 1, [(1, b""), (1, b"p2")]))


def test_a_node_abandons_an_epoch_it_did_not_lead() -> None:
    c = Checkers()
    c.observe(v(1, "leader", 1, []))
    with pytest.raises(InvariantViolation, match="node 2 abandoned proposals of epoch 1, led by"):
        c.abandoned(2, 1, 0, 0)
