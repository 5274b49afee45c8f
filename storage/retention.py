"""Which of a partition's oldest segments retention deletes (Kafka's deleteOldSegments rules):
those wholly below the log start offset, then (delete policy) those past retention.ms by their
largest record timestamp and those beyond retention.bytes; never the active segment, and only
segments wholly below the high watermark when one is given.

    count = segments_past_retention(segments, config, log_start, now_ms, high_watermark)

storage.log.Log deletes them (`delete_old_segments`) and moves its log start offset up.
"""

from __future__ import annotations

from collections.abc import Sequence

from storage.config import LogConfig
from storage.segment import LogSegment


def segments_past_retention(
    segs: Sequence[LogSegment],
    cfg: LogConfig,
    log_start: int,
    now_ms: int,
    high_watermark: int | None,
) -> int:
    """How many of the oldest `segs` retention deletes (reads their largest timestamps: may
    raise OSError)."""

    def allowed(k: int) -> bool:
        # Segment k may go if it is not the active one (and is below the high watermark).
        return k + 1 < len(segs) and (
            high_watermark is None or segs[k + 1].base_offset <= high_watermark
        )

    count = 0
    while allowed(count) and segs[count + 1].base_offset <= log_start:
        count += 1
    # Size and time retention belong to the delete policy; a compact-only log loses
    # segments only below its log start offset (Kafka's deleteOldSegments).
    deleting = "delete" in cfg.cleanup_policy
    if deleting and cfg.retention_ms >= 0:
        while allowed(count) and now_ms - segs[count].largest_timestamp() > cfg.retention_ms:
            count += 1
    if deleting and cfg.retention_bytes >= 0:
        excess = sum(s.size for s in segs[count:]) - cfg.retention_bytes
        while allowed(count) and excess - segs[count].size >= 0:
            excess -= segs[count].size
            count += 1
    return count
