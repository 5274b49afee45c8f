"""The broker's log cleaner (Kafka's LogCleaner + LogCleanerManager): trio tasks that compact
cleanup.policy=compact logs, the reading and writing done in worker threads.

Each of `log.cleaner.threads` tasks repeatedly takes the filthiest compacted log not being
cleaned (dirty ratio >= min.cleanable.dirty.ratio, or max.compaction.lag.ms due), plans the
cleaning in the trio thread, runs `storage.cleaner.clean` with `trio.to_thread.run_sync` while
appends go on, and swaps the result in back in the trio thread (storage aborts the swap if the
log was truncated, deleted or had segments deleted meanwhile). Nothing to clean: it sleeps
log.cleaner.backoff.ms. A corrupt segment stops the cleaning of that log (Kafka's uncleanable
partitions) with an error naming the file; the broker and the log stay as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import structlog
import trio

from broker.config import BrokerConfig
from protocol.names import TopicPartition
from storage.cleaner import (
    CleanerCheckpoints,
    CleanerCorruptionError,
    CleaningPlan,
    CleaningResult,
    clean,
    discard,
    max_compaction_lag_due,
    plan_cleaning,
    swap_in,
)
from storage.log import Log
from storage.log_manager import LogManager
from storage.swap import Failpoints

log = structlog.get_logger("broker.log_cleaner")


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """Kafka's log.cleaner.* broker configs."""

    enable: bool = True
    threads: int = 1
    backoff_ms: int = 15_000
    dedupe_buffer_size: int = 128 << 20

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> CleanerConfig:
        return cls(
            enable=bool(config["log.cleaner.enable"]),
            threads=int(config["log.cleaner.threads"]),
            backoff_ms=int(config["log.cleaner.backoff.ms"]),
            dedupe_buffer_size=int(config["log.cleaner.dedupe.buffer.size"]),
        )


class LogCleaner:
    def __init__(
        self,
        config: CleanerConfig,
        log_manager: LogManager,
        high_watermarks: Callable[[], Mapping[TopicPartition, int]],
        now_ms: Callable[[], int],
        failpoints: Failpoints | None = None,
    ) -> None:
        self.config = config
        self.log_manager = log_manager
        self._high_watermarks = high_watermarks
        self._now_ms = now_ms
        self._failpoints = failpoints
        self.checkpoints = CleanerCheckpoints(list(log_manager.log_dirs))
        for d, problem in self.checkpoints.problems.items():
            log.warning("cleaner checkpoint unreadable", log_dir=d, problem=problem)
        self.in_progress: set[TopicPartition] = set()
        self.uncleanable: dict[TopicPartition, str] = {}
        """Logs whose cleaning stopped on a corrupt segment, with the error (until restart)."""
        self.passes = 0

    async def run(self) -> None:
        if not self.config.enable or self.config.threads <= 0:
            return
        async with trio.open_nursery() as nursery:
            for n in range(self.config.threads):
                nursery.start_soon(self._thread_loop, n)

    async def _thread_loop(self, n: int) -> None:
        while True:
            try:
                cleaned = await self.clean_filthiest()
            except Exception:  # a bug must not take the broker down, nor spin
                log.exception("log cleaner pass failed", cleaner_thread=n)
                cleaned = False
            if not cleaned:
                await trio.sleep(self.config.backoff_ms / 1000)

    def _first_dirty(self, tp: TopicPartition, the_log: Log) -> int:
        d = self.log_manager.log_dir_of(tp)
        offset = self.checkpoints.get(d, tp) if d is not None else 0
        # A checkpoint outside the log (its log was deleted and created again, or truncated
        # below it) means: clean from the start.
        if not the_log.log_start_offset <= offset <= the_log.log_end_offset:
            return the_log.log_start_offset
        return offset

    def filthiest(self) -> tuple[Log, CleaningPlan] | None:
        """Kafka's grabFilthiestCompactedLog: the compacted log with the highest dirty ratio
        at or over its min.cleanable.dirty.ratio, or one whose max.compaction.lag.ms is due."""
        now = self._now_ms()
        hws = self._high_watermarks()
        best: tuple[float, Log, CleaningPlan] | None = None
        for the_log in self.log_manager.logs():
            tp = the_log.topic_partition
            if (
                "compact" not in the_log.config.cleanup_policy
                or tp in self.in_progress
                or tp in self.uncleanable
                or tp not in hws
                or the_log.closed
            ):
                continue
            first_dirty = self._first_dirty(tp, the_log)
            plan = plan_cleaning(
                the_log, first_dirty=first_dirty, now_ms=now, high_watermark=hws[tp]
            )
            if plan is None:
                continue
            ratio = plan.dirty_ratio
            due = max_compaction_lag_due(the_log, first_dirty, now)
            if ratio < the_log.config.min_cleanable_dirty_ratio and not due:
                continue
            score = 2.0 if due else ratio  # overdue logs first, as Kafka
            if best is None or score > best[0]:
                best = (score, the_log, plan)
        return None if best is None else (best[1], best[2])

    async def clean_filthiest(self) -> bool:
        """One cleaning, if any log needs one; True when a log was cleaned."""
        self.passes += 1
        found = self.filthiest()
        if found is None:
            return False
        the_log, plan = found
        tp = the_log.topic_partition
        self.in_progress.add(tp)
        try:
            return await self._clean(the_log, plan)
        finally:
            self.in_progress.discard(tp)

    async def _clean(self, the_log: Log, plan: CleaningPlan) -> bool:
        tp = the_log.topic_partition
        buffer = self.config.dedupe_buffer_size // max(1, self.config.threads)
        try:
            result: CleaningResult = await trio.to_thread.run_sync(
                clean, plan, buffer, self._failpoints, abandon_on_cancel=True
            )
        except CleanerCorruptionError as exc:
            if self._log_changed(the_log, plan):
                return False  # a truncation or deletion raced the read: not corruption
            self.uncleanable[tp] = str(exc)
            log.error(
                "log cleaning stopped: corrupt segment", topic_partition=str(tp), error=str(exc)
            )
            return False
        except OSError as exc:
            if self._log_changed(the_log, plan):
                return False
            raise exc
        if self.log_manager.get_log(tp) is not the_log or not swap_in(
            the_log, result, self._failpoints
        ):
            discard(result)
            log.info("log cleaning aborted: the log changed meanwhile", topic_partition=str(tp))
            return False
        d = self.log_manager.log_dir_of(tp)
        if d is not None:
            self.checkpoints.update(d, tp, result.next_dirty)
        # Entries of deleted logs go, so a topic created again under the same name starts over.
        hosted = {g.topic_partition for g in self.log_manager.logs()}
        stale = {t for dd in self.log_manager.log_dirs for t in self.checkpoints.offsets(dd)}
        if stale - hosted:
            self.checkpoints.remove(stale - hosted)
        s = result.stats
        mb = s.bytes_read / 1e6
        log.info(
            "log cleaned",
            topic_partition=str(tp),
            next_dirty_offset=result.next_dirty,
            segments_in=len(plan.segments),
            segments_out=len(result.groups),
            bytes_read=s.bytes_read,
            bytes_written=s.bytes_written,
            records_read=s.records_read,
            records_kept=s.records_kept,
            elapsed_s=round(s.elapsed_s, 3),
            mb_per_s=round(mb / s.elapsed_s, 1) if s.elapsed_s > 0 else None,
        )
        return True

    def _log_changed(self, the_log: Log, plan: CleaningPlan) -> bool:
        return (
            self.log_manager.get_log(the_log.topic_partition) is not the_log
            or the_log.closed
            or the_log.layout_version != plan.layout_version
        )
