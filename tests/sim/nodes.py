"""One simulated node: a core plus its durable parts, driven by the persist-before-send rule.

`SimNode` is what the simulation needs from a node, whatever core is inside; `ToyNode` wraps
the reference core in `toy_raft` over raft.log_store.MemoryLogStore. Applying a Ready (`drain`): persist the entries and the quorum state, flush,
then hand the messages to the network and the committed entries to the state machine, then
`advance`. A torn Ready (the process dies inside it) persists the entries but never flushes,
sends or advances: the crash that follows drops the un-flushed tail.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol

from raft.log_store import Entry, MemoryLogStore
from tests.sim.checkers import NodeView
from tests.sim.toy_raft import ToyConfig, ToyRaft


@dataclass
class Output:
    messages: list[tuple[int, object]] = field(default_factory=list)
    applied: list[tuple[int, bytes]] = field(default_factory=list)
    next_deadline_ms: int | None = None
    died: bool = False
    """The node died inside the Ready (torn): the simulation crashes it now."""


class SimNode(Protocol):
    node_id: int
    up: bool

    def start(self, now_ms: int) -> None: ...
    def crash(self) -> int:
        """Drop the un-flushed tail; return the flushed log end (committed entries below it
        must survive)."""
        ...

    def step(self, message: object, now_ms: int) -> None: ...
    def tick(self, now_ms: int) -> None: ...
    def propose(self, data: bytes, now_ms: int) -> bool: ...
    def drain(self, *, torn: bool = False) -> Output: ...
    def view(self) -> NodeView: ...
    def is_leader(self) -> bool: ...


class ToyNode:
    def __init__(
        self, node_id: int, voters: tuple[int, ...], rng: random.Random, config: ToyConfig
    ) -> None:
        self.node_id = node_id
        self.up = False
        self._voters = voters
        self._rng = rng
        self._config = config
        self.store = MemoryLogStore()
        self._log: list[Entry] = []
        """The store's entries, kept beside it: `MemoryLogStore.read` walks entries in Python,
        too slow to call after every event."""
        self.quorum_state: tuple[int, int | None] = (0, None)
        """Written atomically (write, fsync, rename): never torn, never lost."""
        self.core: ToyRaft | None = None

    def start(self, now_ms: int) -> None:
        if self._log != (self.store.read(0) if self.store.end_offset else []):
            raise AssertionError(f"node {self.node_id}: the simulator's copy of the log drifted")
        epoch, voted_for = self.quorum_state
        self.core = ToyRaft(
            self.node_id, self._voters, self._rng, self._config, epoch=epoch,
            voted_for=voted_for, log=[(e.epoch, e.data) for e in self._log], now_ms=now_ms,
        )  # fmt: skip
        self.up = True

    def crash(self) -> int:
        self.store.crash()
        del self._log[self.store.end_offset :]
        self.up = False
        self.core = None
        return self.store.flushed_end_offset

    def _core(self) -> ToyRaft:
        if self.core is None:
            raise RuntimeError(f"node {self.node_id} is down")
        return self.core

    def step(self, message: object, now_ms: int) -> None:
        self._core().step(message, now_ms)

    def tick(self, now_ms: int) -> None:
        self._core().tick(now_ms)

    def propose(self, data: bytes, now_ms: int) -> bool:
        return self._core().propose(data, now_ms)

    def drain(self, *, torn: bool = False) -> Output:
        core = self._core()
        out = Output()
        while True:
            ready = core.ready()
            if ready.empty():
                break
            if ready.truncate_to is not None:
                at = ready.truncate_to
                self.store.truncate_to(at)
                entries = [Entry(at + i, e, d) for i, (e, d) in enumerate(ready.entries)]
                self.store.append(entries)
                del self._log[at:]
                self._log.extend(entries)
            if torn:
                out.died = True
                return out
            if ready.quorum_state is not None:
                self.quorum_state = ready.quorum_state
            self.store.flush()
            out.messages.extend(ready.messages)
            out.applied.extend((offset, data) for offset, (_, data) in ready.committed)
            core.advance(ready)
        out.next_deadline_ms = core.ready().next_deadline_ms
        return out

    def view(self) -> NodeView:
        core = self.core
        if core is None:
            return NodeView(self.node_id, "down", -1, [], 0, up=False)
        # The store is what survives and what a real core serves from: check that.
        return NodeView(self.node_id, core.role, core.epoch, self._log, core.high_watermark)

    def is_leader(self) -> bool:
        return self.core is not None and self.core.role == "leader"

    def epoch(self) -> int:
        return self.core.epoch if self.core is not None else -1
