"""Leader epoch cache: (epoch, start offset) pairs in `leader-epoch-checkpoint`, as Kafka's
LeaderEpochFileCache. Followers use it to find where their log diverges from the leader's.

Durability (as Kafka since KAFKA-15046): a new epoch is written to the file at once but not
fsynced; Log.flush fsyncs it together with the data, and truncations are fsynced at once. A
process kill therefore never loses an entry (the page cache survives it).
"""

from __future__ import annotations

import bisect
import itertools
import os
from typing import NamedTuple

from storage.checkpoints import LEADER_EPOCH_CHECKPOINT, EpochEntry, read_epochs, write_epochs
from storage.errors import CheckpointError

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class OffsetAndEpoch(NamedTuple):
    """Answer of end_offset_for_epoch: the end offset of `epoch` (exclusive)."""

    offset: int
    epoch: int


class LeaderEpochFileCache:
    def __init__(self, directory: str, *, load: bool = True) -> None:
        self.path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        self._entries: list[EpochEntry] = []
        self.needs_fsync = False
        self.load_problem: str | None = None
        if load:
            try:
                entries = read_epochs(self.path)
            except CheckpointError as exc:
                # Recovery rebuilds what it can from the batches' epochs.
                self.load_problem = str(exc)
                entries = None
            if entries is not None and _monotonic(entries):
                self._entries = entries
            elif entries is not None:
                self.load_problem = f"{self.path}: epochs or offsets not increasing"

    # -- queries -----------------------------------------------------------------------------

    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the batch at `offset` was written in, or None if before every entry."""
        i = bisect.bisect_right([e.start_offset for e in self._entries], offset) - 1
        return self._entries[i].epoch if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> OffsetAndEpoch:
        """Kafka's LeaderEpochFileCache.endOffsetFor: the largest epoch <= `requested_epoch`
        and the start offset of the first epoch after it (the log end offset when it is the
        latest). (UNDEFINED_EPOCH_OFFSET, UNDEFINED_EPOCH) when unknown."""
        undefined = OffsetAndEpoch(UNDEFINED_EPOCH_OFFSET, UNDEFINED_EPOCH)
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return undefined
        if self._entries[-1].epoch == requested_epoch:
            return OffsetAndEpoch(log_end_offset, requested_epoch)
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return undefined
        if higher == 0:
            return OffsetAndEpoch(self._entries[0].start_offset, requested_epoch)
        return OffsetAndEpoch(self._entries[higher].start_offset, self._entries[higher - 1].epoch)

    # -- changes -----------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True when the cache changed.

        As Kafka: a repeat of the latest epoch is a no-op; entries that would no longer be
        monotonic (epoch >= `epoch` or start >= `start_offset`) are removed first.
        """
        if epoch < 0 or start_offset < 0:
            return False
        latest = self._entries[-1] if self._entries else None
        if latest is not None and epoch == latest.epoch and start_offset >= latest.start_offset:
            return False
        self._entries = [
            e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset
        ]
        self._entries.append(EpochEntry(epoch, start_offset))
        self._write(fsync=False)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after `end_offset` (the log was truncated there)."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._write(fsync=True)

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop older entries, keeping the one that
        covers `start_offset` (moved up to start there)."""
        older = [e for e in self._entries if e.start_offset <= start_offset]
        if not older or (len(older) == 1 and older[0].start_offset == start_offset):
            return
        covering = older[-1]
        rest = self._entries[len(older) :]
        self._entries = [EpochEntry(covering.epoch, start_offset), *rest]
        self._write(fsync=True)

    def clear(self) -> None:
        self._entries = []
        self._write(fsync=True)

    def restore(self, entries: list[EpochEntry]) -> None:
        """Put back a snapshot taken with entries() (undo of a failed append)."""
        if entries != self._entries:
            self._entries = list(entries)
            self._write(fsync=False)

    def flush(self) -> bool:
        """fsync what assign() wrote without fsync. True when the directory needs an fsync too
        (for the rename that put the file in place); the caller does that once for all."""
        if not self.needs_fsync:
            return False
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._write(fsync=True)
            return False
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.needs_fsync = False
        return True

    def _write(self, *, fsync: bool) -> None:
        try:
            write_epochs(self.path, self._entries, fsync=fsync)
        except OSError:
            self.needs_fsync = True
            raise
        self.needs_fsync = not fsync


def _monotonic(entries: list[EpochEntry]) -> bool:
    return all(
        a.epoch < b.epoch and a.start_offset <= b.start_offset
        for a, b in itertools.pairwise(entries)
    )
