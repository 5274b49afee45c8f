"""What the replication core reads of a log's leader-epoch history: a small port, and a list form.

`EpochLookup` is the port: `storage.Log` satisfies it as it is (`end_offset_for_epoch(epoch) ->
OffsetAndEpoch(offset, epoch) | None`, `latest_epoch() -> int | None`), so the trio drivers
pass their `Log` straight in. Note the order of that answer: `(offset, epoch)`, read by name.

`EpochHistory` is the same history as plain numbers ((epoch, start offset) pairs and the log
end offset), for the deterministic tests and simulations that have no files; its
`end_offset_for_epoch` answers as Kafka's LeaderEpochFileCache.endOffsetFor does.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEndOffset(Protocol):
    """The end offset (exclusive) of the largest epoch <= the one asked for, and that epoch."""

    @property
    def offset(self) -> int: ...

    @property
    def epoch(self) -> int: ...


class EpochLookup(Protocol):
    def end_offset_for_epoch(self, leader_epoch: int) -> EpochEndOffset | None: ...

    def latest_epoch(self) -> int | None: ...


class OffsetAndEpoch(NamedTuple):
    offset: int
    epoch: int


@dataclass(slots=True)
class EpochHistory:
    """A leader-epoch history as plain numbers; satisfies `EpochLookup`."""

    entries: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start offset)
    log_end_offset: int = 0

    @classmethod
    def from_record_epochs(cls, epochs: Sequence[int]) -> EpochHistory:
        """The history of a log whose record at offset i was written in epoch `epochs[i]`."""
        entries: list[tuple[int, int]] = []
        for offset, epoch in enumerate(epochs):
            if not entries or entries[-1][0] != epoch:
                if entries and epoch < entries[-1][0]:
                    raise ValueError(f"epoch {epoch} at offset {offset} goes back")
                entries.append((epoch, offset))
        return cls(entries, len(epochs))

    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def end_offset_for_epoch(self, leader_epoch: int) -> OffsetAndEpoch | None:
        if leader_epoch == UNDEFINED_EPOCH or not self.entries:
            return None
        if self.entries[-1][0] == leader_epoch:
            return OffsetAndEpoch(self.log_end_offset, leader_epoch)
        epochs = [e for e, _ in self.entries]
        higher = bisect.bisect_right(epochs, leader_epoch)
        if higher == len(epochs):
            return None
        if higher == 0:
            # Older than anything we hold: it ended where our history starts.
            return OffsetAndEpoch(self.entries[0][1], leader_epoch)
        return OffsetAndEpoch(self.entries[higher][1], self.entries[higher - 1][0])
