"""The simulated state machine: a deterministic fold over the committed entries it is handed.

Its state after applying every entry below offset `n` is `(n, digest)`, the digest chaining
each entry's offset and data, so two state machines that agree on the state at `n` applied
the same committed prefix. A snapshot is that state serialized; the checkers fold the same
way over what nodes applied, to check every snapshot and every node's state against it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

INITIAL_DIGEST = bytes(8)
"""The state before any entry (offset 0)."""

_SNAPSHOT = re.compile(rb"next_offset=(\d+);digest=([0-9a-f]{16})")


def fold(digest: bytes, offset: int, data: bytes) -> bytes:
    """The digest after applying (offset, data) to a state with `digest`. The offset is in it
    so that a state one entry off differs even when entries repeat (control entries are b"")."""
    h = hashlib.blake2b(digest, digest_size=8)
    h.update(offset.to_bytes(8, "big"))
    h.update(data)
    return h.digest()


def encode_snapshot(next_offset: int, digest: bytes) -> bytes:
    return b"next_offset=%d;digest=%s" % (next_offset, digest.hex().encode())


def decode_snapshot(data: bytes) -> tuple[int, bytes]:
    """(next_offset, digest) of a snapshot; ValueError naming the problem if it is not one."""
    m = _SNAPSHOT.fullmatch(data)
    if m is None:
        raise ValueError(f"not a simulated state-machine snapshot: {data[:60]!r}")
    return int(m.group(1)), bytes.fromhex(m.group(2).decode())


@dataclass
class StateMachine:
    """One node's state machine (in memory: a crash loses it; a restart loads the latest
    snapshot and applies the log above it). `history` keeps the digest at every offset
    applied since the log start, so the node can snapshot any applied offset."""

    next_offset: int = 0
    digest: bytes = INITIAL_DIGEST
    history: dict[int, bytes] = field(default_factory=lambda: {0: INITIAL_DIGEST})

    def apply(self, offset: int, data: bytes) -> bytes:
        if offset != self.next_offset:
            raise ValueError(f"state machine at offset {self.next_offset} handed offset {offset}")
        self.digest = fold(self.digest, offset, data)
        self.next_offset = offset + 1
        self.history[self.next_offset] = self.digest
        return self.digest

    def load(self, data: bytes) -> None:
        self.next_offset, self.digest = decode_snapshot(data)
        self.history = {self.next_offset: self.digest}

    def forget_below(self, offset: int) -> None:
        """The log below `offset` is gone: snapshots below it can no longer be taken."""
        for o in [o for o in self.history if o < offset]:
            del self.history[o]
