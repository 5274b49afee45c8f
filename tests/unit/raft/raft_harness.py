"""A tiny synchronous network for raft.core scenario tests (no trio, no sleeps): every node
has a MemoryLogStore and a persisted quorum state; `run` plays the driver loop (persist,
flush, then send) until nothing is in flight, advancing a virtual clock to each deadline."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from raft.core import (
    AbandonedProposals,
    Message,
    QuorumStateData,
    RaftConfig,
    RaftCore,
    Ready,
    Role,
)
from raft.log_store import Entry, MemoryLogStore, SnapshotId


@dataclass
class Node:
    core: RaftCore
    store: MemoryLogStore
    persisted: QuorumStateData = field(default_factory=QuorumStateData)
    applied: list[Entry] = field(default_factory=list)
    readies: list[Ready] = field(default_factory=list)
    loaded: list[SnapshotId] = field(default_factory=list)
    abandoned: list[AbandonedProposals] = field(default_factory=list)

    def data(self) -> list[bytes]:
        """The state machine: the applied records' data (control entries skipped)."""
        return [e.data for e in self.applied if e.data]

    def snapshot(self) -> bytes:
        """The state machine serialized, as a controller would hand it to create_snapshot."""
        return b",".join(self.data())


class Net:
    def __init__(
        self, voters: list[int], observers: tuple[int, ...] = (), seed: int = 1, **cfg: object
    ) -> None:
        self.now = 0
        self.voters = frozenset(voters)
        self.cfg = cfg
        self.seed = seed
        self.nodes: dict[int, Node] = {}
        self.queue: list[tuple[int, int, Message]] = []  # (from, to, message)
        self.cut: set[int] = set()  # isolated nodes: their messages both ways are dropped
        self.drop: Callable[[int, int, Message], bool] = lambda src, dst, msg: False
        for node_id in [*voters, *observers]:
            self.start(node_id)

    def config(self, node_id: int) -> RaftConfig:
        return RaftConfig(node_id=node_id, voters=self.voters, **self.cfg)  # type: ignore[arg-type]

    def start(self, node_id: int, store: MemoryLogStore | None = None) -> Node:
        old = self.nodes.get(node_id)
        store = store if store is not None else (old.store if old else MemoryLogStore())
        persisted = old.persisted if old else QuorumStateData()
        core = RaftCore(
            self.config(node_id),
            store,
            random.Random(self.seed * 1000 + node_id),
            persisted,
            self.now,
        )
        node = Node(core, store, persisted)
        self.nodes[node_id] = node
        self.pump(node_id)
        return node

    def pump(self, node_id: int) -> Ready:
        """One driver iteration: persist, flush, send, apply, advance."""
        node = self.nodes[node_id]
        rd = node.core.ready()
        node.readies.append(rd)
        if rd.quorum_state is not None:
            node.persisted = rd.quorum_state
        if rd.must_flush:
            node.store.flush()
        for to, msg in rd.messages:
            self.queue.append((node_id, to, msg))
        if rd.snapshot is not None:
            # Load the snapshot first: it replaces the whole state machine.
            data = node.store.read_snapshot(rd.snapshot)
            node.applied = [Entry(-1, 0, d) for d in data.split(b",") if d]
            node.loaded.append(rd.snapshot)
        node.applied.extend(rd.committed)
        node.abandoned.extend(rd.abandoned)
        node.core.advance(rd)
        return rd

    def deliver_one(self) -> bool:
        while self.queue:
            src, dst, msg = self.queue.pop(0)
            if src in self.cut or dst in self.cut or self.drop(src, dst, msg):
                continue
            if dst not in self.nodes:
                continue
            self.nodes[dst].core.step(msg, self.now)
            self.pump(dst)
            return True
        return False

    def deliver_all(self, limit: int = 10_000) -> None:
        for _ in range(limit):
            if not self.deliver_one():
                return
        raise AssertionError("messages never stopped flowing")

    def next_deadline(self) -> int | None:
        times = [
            n.readies[-1].next_deadline_ms
            for n in self.nodes.values()
            if n.readies and n.readies[-1].next_deadline_ms is not None
        ]
        return min(times) if times else None

    def advance_to(self, t: int) -> None:
        """Move the clock to t, firing every deadline on the way in order."""
        while True:
            self.deliver_all()
            nxt = self.next_deadline()
            if nxt is None or nxt > t:
                break
            self.now = max(self.now, nxt)
            for node_id, node in sorted(self.nodes.items()):
                dl = node.readies[-1].next_deadline_ms if node.readies else None
                if dl is not None and dl <= self.now:
                    node.core.tick(self.now)
                    self.pump(node_id)
        self.now = max(self.now, t)
        for node_id, node in sorted(self.nodes.items()):
            node.core.tick(self.now)
            self.pump(node_id)
        self.deliver_all()

    def run_until(self, cond: Callable[[], bool], max_ms: int = 60_000, step_ms: int = 10) -> None:
        end = self.now + max_ms
        while not cond():
            if self.now >= end:
                raise AssertionError(f"condition not reached within {max_ms} ms (virtual)")
            self.advance_to(self.now + step_ms)

    def leaders(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n.core.role is Role.LEADER]

    def leader(self) -> int:
        self.run_until(lambda: len(self.leaders()) == 1)
        return self.leaders()[0]

    def propose(self, node_id: int, *records: bytes) -> int:
        res = self.nodes[node_id].core.propose(list(records), self.now)
        self.pump(node_id)
        assert res.error == 0, res
        return res.last_offset
