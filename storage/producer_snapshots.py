"""One log's producer state and its `<20-digit offset>.snapshot` files (the file side of Kafka's
ProducerStateManager). storage.log drives it: load at open, update after appends, snapshot at
roll and clean close, rebuild on truncation, delete snapshots with the segments they cover.

A snapshot named S holds the state of every batch below offset S. Loading takes the newest
readable snapshot at or below a limit and scans the batch headers after it; an unreadable one
is logged, deleted and the next older one (or the log start) is used instead.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable

import structlog

from protocol.errors import CorruptRecordBatchError
from protocol.record_batch import BatchHeader
from storage.files import atomic_write
from storage.producer_state import (
    ProducerStateManager,
    SnapshotError,
    decode_snapshot,
    encode_snapshot,
    last_sequence,
    snapshot_file_name,
    snapshot_offset,
)

logger = structlog.get_logger("storage.producer_snapshots")

HeaderScan = Callable[[int], Iterable[BatchHeader]]
"""The headers of the batches from an offset to the log end (the log's own reader)."""


class ProducerStateStore:
    def __init__(self, directory: str, partition: str, *, enabled: bool = True) -> None:
        self.directory = directory
        self.partition = partition
        self.enabled = enabled
        """False for logs that never carry producer ids (the Raft metadata log): no state,
        no scan, no snapshot file ever written, read or deleted."""
        self.state = ProducerStateManager(partition)
        self.snapshots: list[int] = []
        """Offsets of the snapshot files in the directory, ascending."""

    # -- loading ---------------------------------------------------------------------------

    def load(self, limit: int, log_start: int, log_end: int, scan: HeaderScan, clean: bool) -> None:
        """Rebuild the state as of `log_end` from the newest good snapshot <= `limit`."""
        if not self.enabled:
            return
        self.snapshots = sorted(self._list_dir())
        self._delete_where(lambda o: o > log_end)
        had_any = bool(self.snapshots)
        start = self._load_newest(min(limit, log_end), log_start)
        if start is None:
            if clean and not had_any:
                # A clean close writes a snapshot whenever there is state: none means none.
                self.state.clear(log_end)
                return
            self.state.clear(log_start)
            start = log_start
        self._scan(scan, start)
        self.state.map_end_offset = log_end

    def _list_dir(self) -> list[int]:
        offsets = []
        for name in os.listdir(self.directory):
            offset = snapshot_offset(name)
            if offset is not None:
                offsets.append(offset)
        return offsets

    def _load_newest(self, limit: int, log_start: int) -> int | None:
        for offset in reversed(self.snapshots):
            if offset > limit or offset < log_start:
                continue
            path = os.path.join(self.directory, snapshot_file_name(offset))
            try:
                with open(path, "rb") as f:
                    entries = decode_snapshot(f.read())
            except (OSError, SnapshotError) as exc:
                logger.warning(
                    "producer_snapshot_unreadable",
                    partition=self.partition,
                    file=path,
                    problem=str(exc),
                )
                self._delete_where(lambda o, bad=offset: o == bad)
                continue
            self.state.load(entries, offset)
            return offset
        return None

    def rebuild(self, log_start: int, log_end: int, scan: HeaderScan) -> None:
        """After truncation: drop snapshots beyond the new end, reload from the newest."""
        if not self.enabled:
            return
        self._delete_where(lambda o: o > log_end)
        start = self._load_newest(log_end, log_start)
        if start is None:
            self.state.clear(log_start)
            start = log_start
        self._scan(scan, start)
        self.state.map_end_offset = log_end

    def _scan(self, scan: HeaderScan, start: int) -> None:
        try:
            self.apply_headers(scan(start))
        except CorruptRecordBatchError as exc:
            # A log opened after a clean stop is not re-checked: damage found here is the
            # log's problem (reads report it); the state keeps what came before it.
            logger.warning(
                "producer_state_scan_stopped", partition=self.partition, problem=str(exc)
            )

    # -- updating --------------------------------------------------------------------------

    def apply_headers(self, headers: Iterable[BatchHeader]) -> None:
        """Record appended batches (stamped headers) with a producer id; no checks."""
        update = self.state.update
        for h in headers:
            if h.producer_id >= 0:
                update(
                    h.producer_id,
                    h.producer_epoch,
                    h.base_sequence,
                    last_sequence(h.base_sequence, h.last_offset_delta),
                    h.base_offset,
                    h.base_offset + h.last_offset_delta,
                    h.max_timestamp,
                )

    # -- snapshot files --------------------------------------------------------------------

    def take_snapshot(self, offset: int, *, fsync: bool) -> None:
        """Write the state as `<offset>.snapshot` unless there is nothing to say: no producer
        and no older snapshot a reader could mistake for the current state."""
        if not self.enabled or (not self.state.entries and not self.snapshots):
            return
        if self.snapshots and self.snapshots[-1] == offset and not fsync:
            return
        path = os.path.join(self.directory, snapshot_file_name(offset))
        try:
            atomic_write(path, encode_snapshot(self.state.entries.values()), fsync=fsync)
        except OSError as exc:
            # Only an optimisation: the state is rebuilt from an older snapshot and the log.
            logger.warning("producer_snapshot_failed", partition=self.partition, error=str(exc))
            return
        if offset not in self.snapshots:
            self.snapshots.append(offset)
            self.snapshots.sort()

    def delete_before(self, log_start: int) -> None:
        """The segments below `log_start` are gone: so are the snapshots they covered."""
        if self.enabled:
            self._delete_where(lambda o: o < log_start)

    def delete_all(self, new_start: int) -> None:
        if self.enabled:
            self._delete_where(lambda _o: True)
            self.state.clear(new_start)

    def _delete_where(self, doomed: Callable[[int], bool]) -> None:
        keep = []
        for offset in self.snapshots:
            if doomed(offset):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.directory, snapshot_file_name(offset)))
            else:
                keep.append(offset)
        self.snapshots = keep
