"""One simulated node: a core plus its durable parts, driven by the persist-before-send rule.

`SimNode` is what the simulation needs from a node, whatever core is inside: `RaftNode` wraps
raft.core.RaftCore, `ToyNode` the reference core in `toy_raft`, both over a
raft.log_store.MemoryLogStore. Applying a Ready (`drain`): persist the entries and the quorum
state, flush, then hand the messages to the network and the committed entries to the state
machine (`tests.sim.state_machine.StateMachine`, loading `Ready.snapshot` first), then
`advance`. A torn Ready (the process dies inside it) never flushes, sends or advances: the
crash that follows drops the un-flushed tail (and the in-memory state machine).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from protocol.errors import ErrorCode
from raft.core import AbandonedProposals, QuorumStateData, RaftConfig, RaftCore, Role
from raft.log_store import Entry, MemoryLogStore, SnapshotId
from tests.sim.checkers import NodeView
from tests.sim.state_machine import StateMachine, encode_snapshot, fold
from tests.sim.toy_raft import ToyConfig, ToyRaft


@dataclass(frozen=True, slots=True)
class Applied:
    """The state machine applied the committed entry at `offset`; `digest` is its state after."""

    offset: int
    data: bytes
    digest: bytes


@dataclass(frozen=True, slots=True)
class Loaded:
    """The state machine was reset to a snapshot (`Ready.snapshot`)."""

    snapshot_id: SnapshotId
    data: bytes


@dataclass
class Output:
    messages: list[tuple[int, object]] = field(default_factory=list)
    applied: list[Applied | Loaded] = field(default_factory=list)
    """What the state machine did, in order."""
    abandoned: list[AbandonedProposals] = field(default_factory=list)
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
    def propose(self, data: bytes, now_ms: int) -> tuple[int, int] | None:
        """(epoch, offset) the leader promised the entry, or None when refused."""
        ...

    def resign(self, now_ms: int) -> bool:
        """A graceful resignation (EndQuorumEpoch); False when the core cannot."""
        ...

    def drain(self, *, torn: bool = False) -> Output: ...
    def view(self) -> NodeView: ...
    def is_leader(self) -> bool: ...


class SimLogStore(MemoryLogStore):
    """raft.log_store.MemoryLogStore, keeping `entries` (the log as a list, `start_offset`
    first) and `start_epoch` (the epoch of the snapshot the log starts at) up to date beside
    it for the checkers: `read` walks entries in Python, too slow after every event."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[Entry] = []
        self.start_epoch = 0
        self.snapshots_deleted = 0

    def append(self, entries: Sequence[Entry]) -> None:
        super().append(entries)
        self.entries.extend(entries)

    def truncate_to(self, offset: int) -> None:
        super().truncate_to(offset)
        del self.entries[offset - self.start_offset :]

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> None:
        before = self.start_offset
        super().delete_before_snapshot(snapshot_id)
        if self.start_offset > before:
            del self.entries[: self.start_offset - before]
            self.start_epoch = snapshot_id.epoch
        # Snapshots below the new start go, as raft.disk_log_store.DiskLogStore's (and
        # Kafka's) do: a follower fetching one of them gets SNAPSHOT_NOT_FOUND.
        for old in [s for s in self._snapshots if s.end_offset < self.start_offset]:
            del self._snapshots[old]
            self.snapshots_deleted += 1

    def truncate_to_snapshot(self, snapshot_id: SnapshotId) -> None:
        super().truncate_to_snapshot(snapshot_id)
        self.entries.clear()
        self.start_epoch = snapshot_id.epoch


class ToyNode:
    def __init__(
        self, node_id: int, voters: tuple[int, ...], rng: random.Random, config: ToyConfig
    ) -> None:
        self.node_id = node_id
        self.up = False
        self._voters = voters
        self._rng = rng
        self._config = config
        self.store = SimLogStore()
        self.quorum_state: tuple[int, int | None] = (0, None)
        """Written atomically (write, fsync, rename): never torn, never lost."""
        self.core: ToyRaft | None = None
        self.state_machine = StateMachine()

    def start(self, now_ms: int) -> None:
        self.state_machine = StateMachine()
        epoch, voted_for = self.quorum_state
        self.core = ToyRaft(
            self.node_id, self._voters, self._rng, self._config, epoch=epoch,
            voted_for=voted_for, log=[(e.epoch, e.data) for e in self.store.entries], now_ms=now_ms,
        )  # fmt: skip
        self.up = True

    def crash(self) -> int:
        self.store.crash()
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

    def propose(self, data: bytes, now_ms: int) -> tuple[int, int] | None:
        core = self._core()
        return (core.epoch, len(core.log) - 1) if core.propose(data, now_ms) else None

    def resign(self, now_ms: int) -> bool:
        return False  # the reference core has no graceful resignation

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
            if torn:
                out.died = True
                return out
            if ready.quorum_state is not None:
                self.quorum_state = ready.quorum_state
            self.store.flush()
            out.messages.extend(ready.messages)
            out.applied.extend(
                Applied(offset, data, self.state_machine.apply(offset, data))
                for offset, (_, data) in ready.committed
            )
            core.advance(ready)
        out.next_deadline_ms = core.ready().next_deadline_ms
        return out

    def view(self) -> NodeView:
        core = self.core
        if core is None:
            return NodeView(self.node_id, "down", -1, [], 0, up=False)
        # The store is what survives and what a real core serves from: check that.
        return NodeView(
            self.node_id, core.role, core.epoch, self.store.entries, core.high_watermark
        )

    def is_leader(self) -> bool:
        return self.core is not None and self.core.role == "leader"

    def epoch(self) -> int:
        return self.core.epoch if self.core is not None else -1


def _snapshot_the_log(sm: StateMachine, store: SimLogStore, end: int) -> tuple[SnapshotId, bytes]:
    """The planted bug: fold the log's entries up to `end` (some not committed) into a
    snapshot, through the store (the core would refuse). A restart starts from it."""
    digest = sm.digest
    for entry in store.entries[sm.next_offset - store.start_offset : end - store.start_offset]:
        digest = fold(digest, entry.offset, entry.data)
    snapshot_id = SnapshotId(end, store.entries[end - 1 - store.start_offset].epoch)
    data = encode_snapshot(end, digest)
    store.create_snapshot(snapshot_id, data)
    return snapshot_id, data


class RaftNode:
    """raft.core.RaftCore over a SimLogStore, driven as the real driver will be (the order
    `raft.core.Ready` prescribes): write the quorum state atomically, flush if told to, send,
    load `Ready.snapshot` into the state machine, apply, advance. The core appends to the
    store itself (page cache); only the flush makes it survive a crash. A node whose
    `RaftConfig.voters` leaves it out is an observer (fetches and applies, never votes)."""

    def __init__(
        self,
        node_id: int,
        voters: tuple[int, ...],
        rng: random.Random,
        config: RaftConfig,
        *,
        send_before_flush: bool = False,
        snapshot_off_by_one: bool = False,
        snapshot_above_hw: bool = False,
    ) -> None:
        self.node_id = node_id
        self.up = False
        self._rng = rng
        self._config = config
        self._send_before_flush = send_before_flush
        """A planted driver bug: a torn Ready has sent its messages before dying."""
        self._snapshot_off_by_one = snapshot_off_by_one
        """A planted state-machine bug: a snapshot holds the state one entry past its offset."""
        self._snapshot_above_hw = snapshot_above_hw
        """A planted driver bug: snapshots of the log (applying what is not committed yet),
        stored behind the core's back."""
        self.store = SimLogStore()
        self.quorum_state = QuorumStateData()
        """The quorum-state file: written whole (write, fsync, rename), so never torn."""
        self.core: RaftCore | None = None
        self.state_machine = StateMachine()
        """In memory: a crash loses it, a restart loads the latest snapshot (Ready.snapshot)."""

    def start(self, now_ms: int) -> None:
        self.state_machine = StateMachine()
        self.core = RaftCore(self._config, self.store, self._rng, self.quorum_state, now_ms)
        self.up = True

    def crash(self) -> int:
        self.store.crash()
        self.up = False
        self.core = None
        return self.store.flushed_end_offset

    def _core(self) -> RaftCore:
        if self.core is None:
            raise RuntimeError(f"node {self.node_id} is down")
        return self.core

    def step(self, message: object, now_ms: int) -> None:
        self._core().step(message, now_ms)  # type: ignore[arg-type]

    def tick(self, now_ms: int) -> None:
        self._core().tick(now_ms)

    def propose(self, data: bytes, now_ms: int) -> tuple[int, int] | None:
        result = self._core().propose([data], now_ms)
        return (result.epoch, result.last_offset) if result.error == ErrorCode.NONE else None

    def resign(self, now_ms: int) -> bool:
        core = self._core()
        was_leader = core.role is Role.LEADER
        core.resign(now_ms)
        return was_leader

    def take_snapshot(
        self, rng: random.Random, delete_log: bool
    ) -> tuple[SnapshotId, bytes] | None:
        """Snapshot the state machine at a random applied offset above the log start (what a
        controller does every N bytes, at a seeded offset here), then maybe drop the log below
        the latest snapshot. None when nothing was applied above the log start."""
        core, sm = self._core(), self.state_machine
        lo = self.store.start_offset + 1
        # The planted bug reads the state one entry later: it needs one more applied entry.
        hi = sm.next_offset - (1 if self._snapshot_off_by_one else 0)
        if hi < lo:
            return None
        if self._snapshot_above_hw and self.store.end_offset > hi:
            end = rng.randint(lo, self.store.end_offset)
            if end > hi:
                return _snapshot_the_log(self.state_machine, self.store, end)
        end = rng.randint(lo, hi)
        data = encode_snapshot(end, sm.history[end + 1 if self._snapshot_off_by_one else end])
        snapshot_id = core.create_snapshot(end, data)
        if delete_log:
            sm.forget_below(core.delete_before_snapshot())
        return snapshot_id, data

    def drain(self, *, torn: bool = False) -> Output:
        core = self._core()
        out = Output()
        sm = self.state_machine
        while True:
            ready = core.ready()
            if ready.quorum_state is not None:
                self.quorum_state = ready.quorum_state
            if torn:
                # Died after the quorum-state rename, before the fsync of the log: nothing
                # sent, nothing applied, and the crash drops the un-flushed entries.
                if self._send_before_flush:
                    out.messages.extend(ready.messages)
                out.died = True
                return out
            if ready.must_flush:
                self.store.flush()
            out.messages.extend(ready.messages)
            if ready.snapshot is not None:
                data = self.store.read_snapshot(ready.snapshot)
                sm.load(data)
                out.applied.append(Loaded(ready.snapshot, data))
            out.applied.extend(Applied(e.offset, e.data, sm.apply(e.offset, e.data))
                               for e in ready.committed)  # fmt: skip
            out.abandoned.extend(ready.abandoned)
            core.advance(ready)
            if ready.is_empty:
                out.next_deadline_ms = ready.next_deadline_ms
                return out

    def view(self) -> NodeView:
        core = self.core
        if core is None:
            return NodeView(self.node_id, "down", -1, [], 0, up=False)
        store = self.store
        return NodeView(
            self.node_id, core.role.value, core.epoch, store.entries, core.high_watermark,
            log_start=store.start_offset, start_epoch=store.start_epoch,
        )  # fmt: skip

    def is_leader(self) -> bool:
        return self.core is not None and self.core.role is Role.LEADER
