"""The leader's high watermark (KRaft's LeaderState.maybeUpdateHighWatermark)."""

from __future__ import annotations

from collections.abc import Mapping


def majority_end_offset(voter_end_offsets: Mapping[int, int], majority: int) -> int:
    """The largest offset that at least `majority` voters have reached (end offsets are
    exclusive, so every entry below the answer is on a majority)."""
    ends = sorted(voter_end_offsets.values(), reverse=True)
    return ends[majority - 1] if len(ends) >= majority else 0


def next_high_watermark(
    voter_end_offsets: Mapping[int, int], majority: int, epoch_start_offset: int, current_hw: int
) -> int:
    """Raft's commit rule: an offset commits once a majority holds it AND it is above the
    leader's epoch start (the leader's own epoch-start entry is replicated), so entries of
    older epochs only commit indirectly. The high watermark never goes back."""
    candidate = majority_end_offset(voter_end_offsets, majority)
    if candidate > epoch_start_offset and candidate > current_hw:
        return candidate
    return current_hw
