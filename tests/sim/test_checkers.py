"""The checkers against hand-made histories: each planted violation must be caught (a checker
that misses one is useless) and each legal history must pass."""

from __future__ import annotations

import pytest

from tests.sim.checkers import Checkers, InvariantViolation, NodeView


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
