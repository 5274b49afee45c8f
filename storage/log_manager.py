"""LogManager: every partition log on this node, across its log dirs (Kafka's LogManager).

Per log dir it owns `meta.properties`, the offset checkpoints and the clean-shutdown marker;
all logs share one FileHandleCache so the node's descriptor use stays bounded however many
partitions it holds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

import structlog

from protocol.clock import SYSTEM_CLOCK
from protocol.errors import ErrorCode, KafkaError
from protocol.names import METADATA_PARTITION, TopicPartition, validate_topic_name
from protocol.telemetry import SPOOL_DIR_NAME as TELEMETRY_SPOOL_DIR
from storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offsets,
    write_offsets,
)
from storage.config import LogConfig
from storage.errors import (
    CheckpointError,
    InconsistentTopicIdError,
    KafkaStorageError,
    MetaPropertiesError,
)
from storage.files import FileHandleCache, atomic_write, default_max_open_files, fsync_dir
from storage.log import Log
from storage.meta_properties import ensure_meta_properties

logger = structlog.get_logger("storage.log_manager")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
MAX_DIR_NAME_BYTES = 255
"""NAME_MAX of the file systems logs live on."""


def delete_dir_name(tp: TopicPartition, unique: str) -> str:
    """`<topic>-<partition>.<unique>-delete`, the topic cut short so that the name fits in
    NAME_MAX (Kafka's logDeleteDirName, KAFKA-4893): a 249-character topic's partition could
    not be renamed for deletion (ENAMETOOLONG)."""
    suffix = f"-{tp.partition}.{unique}{DELETE_DIR_SUFFIX}"
    return tp.topic[: MAX_DIR_NAME_BYTES - len(suffix)] + suffix


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
        *,
        node_id: int,
        cluster_id: str | None = None,
        max_open_files: int | None = None,
        clock_ms: Callable[[], int] | None = None,
        default_config: LogConfig | None = None,
    ) -> None:
        """`cluster_id=None`: not known yet; the one in meta.properties (if any) is adopted.
        `max_open_files=None`: half the soft RLIMIT_NOFILE. `default_config` is used for logs
        found at start-up whose topic has no config passed to startup()."""
        if isinstance(log_dirs, str | os.PathLike):
            log_dirs = [log_dirs]
        if not log_dirs:
            raise ValueError("log.dirs is empty: give at least one directory")
        self.log_dirs = [os.path.abspath(os.fspath(d)) for d in log_dirs]
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.default_config = default_config or LogConfig()
        self.handles = FileHandleCache(max_open_files or default_max_open_files())
        self._clock = clock_ms or SYSTEM_CLOCK.wall_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._high_watermarks: dict[TopicPartition, int] = {}
        self.offline_dirs: dict[str, str] = {}
        """Failed log dirs and why (Kafka's offline log dirs): their logs answer
        KAFKA_STORAGE_ERROR, nothing new is placed there, and shutdown writes nothing there."""
        self.on_dir_failed: Callable[[str, str], None] | None = None
        """Told (dir, reason) when a log dir goes offline (the broker halts when none is left,
        as Kafka's "all log dirs have failed")."""
        self._dirty: dict[TopicPartition, Log] = {}
        """Logs appended to, rolled or reconfigured since flush_dirty last found them clean:
        the only ones it visits (it visited all, 25,000 every second, 5-7% of a broker)."""
        self.had_clean_shutdown: dict[str, bool] = {}
        """Per log dir, whether the last start found the clean-shutdown marker."""
        self._started = False

    # -- start-up ----------------------------------------------------------------------------

    def startup(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Verify (or create) meta.properties in every log dir, then load every log, running
        recovery in dirs without the clean-shutdown marker. Raises MetaPropertiesError on a
        node or cluster id mismatch, KafkaStorageError when a dir cannot be read."""
        if self._started:
            raise RuntimeError("LogManager.startup() was already called")
        topic_configs = topic_configs or {}
        for d in self.log_dirs:
            try:
                os.makedirs(d, exist_ok=True)
            except OSError as exc:
                raise KafkaStorageError.from_os_error(f"creating log dir {d}", exc) from exc
            props = ensure_meta_properties(d, self.node_id, self.cluster_id)
            if props.cluster_id is not None:
                if self.cluster_id is None:
                    self.cluster_id = props.cluster_id
                elif props.cluster_id != self.cluster_id:
                    raise MetaPropertiesError(
                        f"log dir {d} belongs to cluster.id {props.cluster_id!r} while another "
                        f"log dir of this node belongs to {self.cluster_id!r}"
                    )
        for d in self.log_dirs:
            self._load_dir(d, topic_configs)
        self._started = True
        # A recovery point never moves past what is flushed; one cut below the checkpoint
        # (a log truncated by recovery) is recorded at once.
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()

    def _load_dir(self, d: str, topic_configs: Mapping[str, LogConfig]) -> None:
        marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        self.had_clean_shutdown[d] = clean
        recovery_points = self._read_checkpoint(d, RECOVERY_POINT_CHECKPOINT)
        log_starts = self._read_checkpoint(d, LOG_START_OFFSET_CHECKPOINT)
        for tp, hw in self._read_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT).items():
            self._high_watermarks[tp] = hw
        logger.info("loading_logs", log_dir=d, clean_shutdown=clean)
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                # A deletion that a crash interrupted: finish it.
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name == TELEMETRY_SPOOL_DIR:
                continue  # the telemetry shipper's default spool (deploy/telemetry)
            if name == METADATA_PARTITION.dir_name:
                # The metadata log shares metadata.log.dir with partitions by default (as in
                # Kafka); it belongs to the metadata log's owner, not to this manager.
                continue
            try:
                tp = TopicPartition.from_dir_name(name)
            except ValueError:
                logger.warning("not_a_log_dir", path=path)
                continue
            if tp in self._logs:
                raise KafkaStorageError(
                    f"partition {tp} has a log in both {self._dir_of[tp]} and {d}; remove one"
                )
            log = Log.open(
                path,
                topic_configs.get(tp.topic, self.default_config),
                handles=self.handles,
                clock_ms=self._clock,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp),
                clean_shutdown=clean,
            )
            self._logs[tp] = log
            self._dir_of[tp] = d
            self._track(log)
        if clean:
            # From now on a crash must be noticed: the marker goes before any write.
            try:
                os.unlink(marker)
                fsync_dir(d)
            except OSError as exc:
                raise KafkaStorageError.from_os_error(f"removing {marker}", exc) from exc

    def _read_checkpoint(self, d: str, name: str) -> dict[TopicPartition, int]:
        path = os.path.join(d, name)
        try:
            return read_offsets(path)
        except CheckpointError as exc:
            # Losing a checkpoint costs a longer recovery, never data: go on without it.
            logger.warning("checkpoint_unreadable", path=path, problem=str(exc))
            return {}
        except OSError as exc:
            raise KafkaStorageError.from_os_error(f"reading {path}", exc) from exc

    # -- logs --------------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def logs(self) -> list[Log]:
        return list(self._logs.values())

    def log_dir_of(self, tp: TopicPartition) -> str | None:
        return self._dir_of.get(tp)

    def get_or_create_log(
        self,
        tp: TopicPartition,
        config: LogConfig | None = None,
        topic_id: str | None = None,
    ) -> Log:
        """The log of `tp`, created in the log dir with the fewest partitions if missing.
        For an existing log a given `config` replaces its config; a different `topic_id`
        than the stored one raises InconsistentTopicIdError (KafkaError INCONSISTENT_TOPIC_ID).
        """
        self._check_started()
        log = self._logs.get(tp)
        if log is not None:
            if topic_id is not None and log.topic_id is not None and log.topic_id != topic_id:
                raise InconsistentTopicIdError(
                    f"the log of {tp} belongs to topic id {log.topic_id}, not {topic_id}"
                )
            if config is not None and config != log.config:
                log.update_config(config)
            return log
        validate_topic_name(tp.topic)
        if tp.topic == METADATA_PARTITION.topic:
            raise KafkaError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"{tp.topic} is the metadata log's name; no partition log takes its directory",
            )
        if tp.partition < 0:
            raise ValueError(f"partition must not be negative: {tp}")
        online = self.online_dirs
        if not online:
            raise KafkaStorageError(
                f"cannot create the log of {tp}: every log dir is offline "
                f"({'; '.join(self.offline_dirs.values())})"
            )
        counts = dict.fromkeys(online, 0)
        if len(counts) > 1:
            for v in self._dir_of.values():
                if v in counts:
                    counts[v] += 1
        d = min(online, key=counts.__getitem__)
        log = Log.open(
            os.path.join(d, tp.dir_name),
            config or self.default_config,
            handles=self.handles,
            clock_ms=self._clock,
            clean_shutdown=True,
            topic_id=topic_id,
        )
        self._logs[tp] = log
        self._dir_of[tp] = d
        self._track(log)
        return log

    def _track(self, log: Log) -> None:
        """Have `log` report appends, rolls and config changes to `_dirty` (it starts there:
        the next flush_dirty drops it if it has nothing to flush) and disk errors here."""
        log.on_dirty = self._mark_dirty
        log.on_storage_error = lambda err, tp=log.topic_partition: self._log_failed(tp, err)
        self._dirty[log.topic_partition] = log

    def _log_failed(self, tp: TopicPartition, err: KafkaStorageError) -> None:
        d = self._dir_of.get(tp)
        if d is not None:
            self.fail_dir(d, err.message)

    def fail_dir(self, d: str, reason: str) -> None:
        """Take log dir `d` offline (Kafka's LogDirFailureChannel): a disk error there (ENOSPC,
        EIO) is not retried append after append; its logs answer KAFKA_STORAGE_ERROR."""
        if d in self.offline_dirs:
            return
        self.offline_dirs[d] = reason
        for tp, log in self._logs.items():
            if self._dir_of[tp] == d:
                log.take_offline(reason)
                self._dirty.pop(tp, None)
        logger.error("log dir failed", log_dir=d, reason=reason, online=self.online_dirs)
        if self.on_dir_failed is not None:
            self.on_dir_failed(d, reason)

    @property
    def online_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def _mark_dirty(self, log: Log) -> None:
        self._dirty[log.topic_partition] = log

    def delete_log(self, tp: TopicPartition) -> bool:
        """Delete the log of `tp` and its files; False if there was none."""
        return self.delete_logs([tp]) > 0

    def delete_logs(self, tps: Iterable[TopicPartition]) -> int:
        """Delete several logs with one checkpoint rewrite per dir; returns how many existed.

        Each partition dir is first renamed to `<topic>-<partition>.<uuid>-delete` (as Kafka),
        so a crash mid-way leaves nothing that start-up would load as the partition.
        """
        self._check_started()
        dirs_touched: set[str] = set()
        count = 0
        for tp in tps:
            log = self._logs.pop(tp, None)
            if log is None:
                continue
            d = self._dir_of.pop(tp)
            self._high_watermarks.pop(tp, None)
            self._dirty.pop(tp, None)
            log.on_dirty = None
            log.close(flush=False)
            doomed = os.path.join(d, delete_dir_name(tp, uuid.uuid4().hex))
            try:
                os.rename(log.directory, doomed)
            except OSError as exc:
                raise KafkaStorageError.from_os_error(f"deleting the log of {tp}", exc) from exc
            shutil.rmtree(doomed, ignore_errors=True)
            dirs_touched.add(d)
            count += 1
        for d in dirs_touched:
            try:
                fsync_dir(d)
            except OSError as exc:
                raise KafkaStorageError.from_os_error(f"syncing log dir {d}", exc) from exc
            self._write_dir_checkpoints(d)
        return count

    # -- checkpoints -------------------------------------------------------------------------

    def _logs_in(self, d: str) -> dict[TopicPartition, Log]:
        return {tp: log for tp, log in self._logs.items() if self._dir_of[tp] == d}

    def _write(self, d: str, name: str, offsets: Mapping[TopicPartition, int]) -> None:
        path = os.path.join(d, name)
        if d in self.offline_dirs:
            return  # a failed disk is not written again
        try:
            write_offsets(path, offsets)
        except OSError as exc:
            err = KafkaStorageError.from_os_error(f"writing {path}", exc)
            self.fail_dir(d, err.message)
            raise err from exc

    def _write_dir_checkpoints(self, d: str) -> None:
        logs = self._logs_in(d)
        self._write(d, RECOVERY_POINT_CHECKPOINT, {tp: g.recovery_point for tp, g in logs.items()})
        self._write(
            d, LOG_START_OFFSET_CHECKPOINT, {tp: g.log_start_offset for tp, g in logs.items()}
        )
        self._write(
            d,
            REPLICATION_OFFSET_CHECKPOINT,
            {tp: hw for tp, hw in self._high_watermarks.items() if tp in logs},
        )

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        """Write `replication-offset-checkpoint` in every log dir: the given high watermarks of
        the partitions with a log there (others keep their last checkpointed value)."""
        self._check_started()
        for tp, hw in high_watermarks.items():
            if tp in self._logs:
                self._high_watermarks[tp] = hw
        for d in self.log_dirs:
            logs = self._logs_in(d)
            hws = {tp: hw for tp, hw in self._high_watermarks.items() if tp in logs}
            self._write(d, REPLICATION_OFFSET_CHECKPOINT, hws)

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        """The high watermarks in every dir's `replication-offset-checkpoint`."""
        out: dict[TopicPartition, int] = {}
        for d in self.log_dirs:
            out.update(self._read_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT))
        return out

    def checkpoint_recovery_points(self) -> None:
        for d in self.log_dirs:
            logs = self._logs_in(d)
            self._write(
                d, RECOVERY_POINT_CHECKPOINT, {tp: g.recovery_point for tp, g in logs.items()}
            )

    def checkpoint_log_start_offsets(self) -> None:
        for d in self.log_dirs:
            logs = self._logs_in(d)
            self._write(
                d, LOG_START_OFFSET_CHECKPOINT, {tp: g.log_start_offset for tp, g in logs.items()}
            )

    # -- background work ---------------------------------------------------------------------

    def run_retention(
        self,
        now_ms: int | None = None,
        high_watermarks: Mapping[TopicPartition, int] | None = None,
    ) -> int:
        """Kafka's cleanupLogs: delete old segments of every log by retention.ms and
        retention.bytes (bounded by the given high watermarks, when given). Returns how many
        segments were deleted; a failing log is logged and skipped."""
        self._check_started()
        now = self._clock() if now_ms is None else now_ms
        hws = high_watermarks or {}
        deleted = 0
        for tp, log in list(self._logs.items()):
            if log.offline:
                continue
            try:
                deleted += log.delete_old_segments(now, hws.get(tp))
            except KafkaStorageError as exc:
                logger.error("retention_failed", partition=str(tp), error=exc.message)
        if deleted:
            self.checkpoint_log_start_offsets()
        return deleted

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget idempotent producers idle for producer.id.expiration.ms in every log
        (Kafka's removeExpiredProducers); returns how many."""
        return sum(log.producers.state.remove_expired(now_ms, expiration_ms) for log in self.logs())

    def flush_dirty(self, now_ms: int | None = None) -> int:
        """Kafka's log flusher: flush every log whose unflushed data is older than flush.ms,
        and the rolled segments of every log (what Kafka does right after a roll). Call it
        periodically. Returns how many logs were flushed; a failing log is logged and skipped.
        Visits only the logs written, rolled or reconfigured since it last found them with
        nothing that could come due (`Log.may_need_flush`)."""
        self._check_started()
        now = self._clock() if now_ms is None else now_ms
        flushed = 0
        for tp, log in list(self._dirty.items()):
            if log.needs_flush(now):
                try:
                    if log.flush_ms_due(now):
                        log.flush()
                    else:
                        log.flush_rolled_segments()
                    flushed += 1
                except KafkaStorageError as exc:
                    logger.error("flush_failed", partition=str(tp), error=exc.message)
            if log.offline or not log.may_need_flush():
                self._dirty.pop(tp, None)
        return flushed

    @property
    def dirty_logs(self) -> int:
        """How many logs the next flush_dirty visits."""
        return len(self._dirty)

    def shutdown(self) -> None:
        """Flush and close every log, write all checkpoints and, in each dir where all of
        that worked, the clean-shutdown marker that lets the next start skip recovery."""
        failed_dirs: set[str] = set()
        first_error: KafkaStorageError | None = None
        for tp, log in self._logs.items():
            try:
                log.close()
            except KafkaStorageError as exc:
                failed_dirs.add(self._dir_of[tp])
                first_error = first_error or exc
                logger.error("close_failed", partition=str(tp), error=exc.message)
        if self._started:
            for d in self.online_dirs:
                try:
                    self._write_dir_checkpoints(d)
                    if d not in failed_dirs:
                        atomic_write(os.path.join(d, CLEAN_SHUTDOWN_FILE), b"")
                except (OSError, KafkaStorageError) as exc:
                    logger.error("shutdown_checkpoint_failed", log_dir=d, error=str(exc))
                    if first_error is None:
                        first_error = (
                            exc
                            if isinstance(exc, KafkaStorageError)
                            else KafkaStorageError.from_os_error(f"shutting down {d}", exc)
                        )
        self.handles.close_all()
        self._logs.clear()
        self._dir_of.clear()
        self._dirty.clear()
        self._started = False
        if first_error is not None:
            raise first_error

    def _check_started(self) -> None:
        if not self._started:
            raise RuntimeError("call LogManager.startup() first")

    def __enter__(self) -> LogManager:
        self.startup()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(KafkaStorageError):
            self.shutdown()
