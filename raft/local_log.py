"""LocalMetadataLog: the single-node metadata log of a standalone broker.

Records live in a storage `Log` at `<metadata.log.dir>/__cluster_metadata-0/`, one record
batch per append (each record's value is `encode_record(record)`), as KRaft keeps them. There
is no quorum: an append is committed once it is written and fsynced. Committed records go to
the listeners in offset order, as `(offset, record)` pairs, before `wait_committed` returns, so
once the controller answers a request every listener (the broker's metadata publisher, the
controller's own state) has seen its records. At start-up `open()` replays the whole log to the
listeners: the broker and the controller rebuild their state by replay, nothing else.

It implements controller.ports.MetadataLog structurally (raft does not import controller).
Storage calls run in a worker thread, one at a time; a write and the delivery of what it
committed are shielded from cancellation, so listeners never miss a committed record.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence

import structlog
import trio

from protocol.clock import SYSTEM_CLOCK
from protocol.errors import ErrorCode, KafkaError
from protocol.metadata.records import MetadataRecord, OffsetRecord, decode_record, encode_record
from protocol.metadata.topic_ids import METADATA_TOPIC_ID
from protocol.names import METADATA_PARTITION
from protocol.record_batch import Record, build_batch, decode_records, iter_batches
from storage.config import LogConfig
from storage.files import FileHandleCache
from storage.log import Log

log = structlog.get_logger("raft.local_log")

METADATA_PARTITION_DIR = METADATA_PARTITION.dir_name
MAX_BATCH_BYTES = 8 * 1024 * 1024
"""Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the largest append (one batch)."""
_READ_CHUNK = 1024 * 1024

Listener = Callable[[Sequence[OffsetRecord]], Awaitable[None]]
"""Gets committed records in offset order, a batch at a time."""


def metadata_log_config() -> LogConfig:
    """Metadata is never deleted by retention (no snapshots yet); batches up to 8 MiB."""
    return LogConfig(retention_ms=-1, retention_bytes=-1, max_message_bytes=MAX_BATCH_BYTES)


class MetadataLogError(KafkaError):
    """The metadata log cannot be used (not open, closed, or offline after an I/O error)."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.KAFKA_STORAGE_ERROR) -> None:
        super().__init__(code, message)


class LocalMetadataLog:
    """The metadata log of one standalone node. Add listeners, `await open()`, then append."""

    def __init__(
        self,
        metadata_log_dir: str | os.PathLike[str],
        *,
        leader_epoch: int = 0,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.directory = os.path.join(os.fspath(metadata_log_dir), METADATA_PARTITION_DIR)
        self._epoch = leader_epoch
        self._clock = clock_ms or SYSTEM_CLOCK.wall_ms
        self._listeners: list[Listener] = []
        self._log: Log | None = None
        self._lock = trio.Lock()
        self._committed = -1
        self._progress = trio.Event()
        self._offline: str | None = None
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        """Listeners must be added before `open()`, so each sees every record from offset 0."""
        if self._log is not None:
            raise RuntimeError("add listeners before LocalMetadataLog.open()")
        self._listeners.append(listener)

    async def open(self) -> None:
        """Open (creating if needed) and recover the log, then replay it to the listeners."""
        if self._log is not None or self._closed:
            raise RuntimeError("LocalMetadataLog.open() called twice")
        async with self._lock:
            self._log = await trio.to_thread.run_sync(self._open_log)
            batches = await trio.to_thread.run_sync(self._read_all, self._log)
            with trio.CancelScope(shield=True):
                for batch in batches:
                    await self._deliver(batch)
        log.info(
            "metadata_log_opened",
            directory=self.directory,
            records=self._committed + 1,
            batches=len(batches),
        )

    def _open_log(self) -> Log:
        os.makedirs(os.path.dirname(self.directory) or ".", exist_ok=True)
        log_ = Log.open(
            self.directory,
            metadata_log_config(),
            handles=FileHandleCache(16),
            clock_ms=self._clock,
            recovery_point=0,
            clean_shutdown=False,
            topic_id=METADATA_TOPIC_ID,
            producer_state=False,  # metadata batches carry no producer ids
        )
        log_.flush()  # what recovery kept is replayed as committed: make it durable first
        return log_

    async def aclose(self) -> None:
        """Flush and close; later calls raise MetadataLogError. Idempotent."""
        if self._closed:
            return
        self._closed = True
        async with self._lock:
            if self._log is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(self._log.close)
        self._progress.set()

    # -- MetadataLog port --------------------------------------------------------------------

    @property
    def committed_offset(self) -> int:
        """Offset of the last committed record, -1 when the log is empty."""
        return self._committed

    @property
    def end_offset(self) -> int:
        """The offset the next record will get."""
        return self._committed + 1

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        """Write `records` as one batch, fsync, deliver them to the listeners; returns the
        offset of the last. On a storage error nothing is committed and KafkaError
        (KAFKA_STORAGE_ERROR, MESSAGE_TOO_LARGE, ...) is raised."""
        if not records:
            raise ValueError("append needs at least one record")
        now = self._clock()
        batch = build_batch(
            [Record(value=encode_record(r), timestamp=now) for r in records],
            base_timestamp=now,
        )
        async with self._lock:
            log_ = self._usable_log()
            with trio.CancelScope(shield=True):
                first, last = await trio.to_thread.run_sync(self._write, log_, batch)
                if last - first + 1 != len(records):
                    raise MetadataLogError(
                        f"metadata append of {len(records)} records got offsets {first}..{last}"
                    )
                await self._deliver(
                    [
                        OffsetRecord(o, r)
                        for o, r in zip(range(first, last + 1), records, strict=True)
                    ]
                )
        return last

    async def wait_committed(self, offset: int) -> None:
        while self._committed < offset:
            if self._closed:
                raise MetadataLogError("the metadata log is closed", ErrorCode.NOT_CONTROLLER)
            await self._progress.wait()

    async def read(self, from_offset: int = 0) -> list[OffsetRecord]:
        """Committed records from `from_offset` on (tools and tests)."""
        async with self._lock:
            log_ = self._usable_log()
            batches = await trio.to_thread.run_sync(self._read_all, log_, from_offset)
        return [r for batch in batches for r in batch if r.offset >= from_offset]

    # -- internals ---------------------------------------------------------------------------

    def _usable_log(self) -> Log:
        if self._closed:
            raise MetadataLogError("the metadata log is closed", ErrorCode.NOT_CONTROLLER)
        if self._offline is not None:
            raise MetadataLogError(f"the metadata log is offline: {self._offline}")
        if self._log is None:
            raise MetadataLogError("the metadata log is not open", ErrorCode.NOT_CONTROLLER)
        return self._log

    def _write(self, log_: Log, batch: bytes) -> tuple[int, int]:
        info = log_.append_as_leader(batch, self._epoch)
        try:
            log_.flush()
        except KafkaError as exc:
            # Not durable, so not committed: take it back, or stop using the log.
            try:
                log_.truncate_to(info.first_offset)
            except Exception as undo:  # whatever went wrong, the log can no longer be trusted
                self._offline = f"{exc.message}; truncating the unsynced append failed: {undo}"
            raise
        return info.first_offset, info.last_offset

    def _read_all(self, log_: Log, from_offset: int = 0) -> list[list[OffsetRecord]]:
        offset = max(from_offset, log_.log_start_offset)
        batches: list[list[OffsetRecord]] = []
        while offset < log_.log_end_offset:
            data = log_.read(offset, _READ_CHUNK).data
            if not data:
                break
            for pos, header in iter_batches(data):
                records = []
                for rec in decode_records(data, pos):
                    if rec.value is None:
                        raise MetadataLogError(
                            f"metadata log {self.directory}: record at offset {rec.offset} "
                            "has no value"
                        )
                    try:
                        records.append(OffsetRecord(rec.offset, decode_record(rec.value)))
                    except Exception as exc:
                        raise MetadataLogError(
                            f"metadata log {self.directory}: record at offset {rec.offset} "
                            f"cannot be read: {exc}"
                        ) from exc
                batches.append(records)
                offset = header.next_offset
        return batches

    async def _deliver(self, batch: list[OffsetRecord]) -> None:
        if not batch:
            return
        try:
            for listener in self._listeners:
                await listener(batch)
        finally:
            self._committed = batch[-1].offset
            self._progress.set()
            self._progress = trio.Event()
