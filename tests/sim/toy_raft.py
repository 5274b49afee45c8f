"""A small reference Raft core (classic push replication), used to test the simulator itself
while the real core (raft/core) is being written: it has the same shape (step, tick, propose,
ready, advance; deterministic, injected Random; a flag to disable the vote's log-up-to-date
check), so the simulator, its checkers and its bug-finding test run end to end on it.
It is not the product's Raft and has no pre-vote, fetch or snapshots.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

Entry = tuple[int, bytes]


@dataclass(frozen=True, slots=True)
class Vote:
    epoch: int
    candidate: int
    last_epoch: int
    log_end: int


@dataclass(frozen=True, slots=True)
class VoteResponse:
    epoch: int
    voter: int
    granted: bool


@dataclass(frozen=True, slots=True)
class Append:
    epoch: int
    leader: int
    prev_end: int
    prev_epoch: int
    entries: tuple[Entry, ...]
    high_watermark: int


@dataclass(frozen=True, slots=True)
class AppendResponse:
    epoch: int
    follower: int
    success: bool
    match_end: int


@dataclass
class ToyReady:
    truncate_to: int | None
    """Drop the stored log from this offset before appending `entries` (which start there)."""
    entries: list[Entry]
    quorum_state: tuple[int, int | None] | None
    """(epoch, voted_for) to persist, when it changed."""
    messages: list[tuple[int, object]]
    committed: list[tuple[int, Entry]]
    high_watermark: int
    next_deadline_ms: int

    def empty(self) -> bool:
        return not (self.entries or self.truncate_to is not None or self.quorum_state
                    or self.messages or self.committed)  # fmt: skip


@dataclass
class ToyConfig:
    election_timeout_ms: int = 150
    heartbeat_ms: int = 30
    check_log_up_to_date: bool = True
    """Off: a voter grants its vote whatever the candidate's log (the planted bug)."""


@dataclass
class ToyRaft:
    node_id: int
    voters: tuple[int, ...]
    rng: random.Random
    config: ToyConfig
    epoch: int = 0
    voted_for: int | None = None
    log: list[Entry] = field(default_factory=list)
    now_ms: int = 0
    role: str = "unattached"
    leader: int | None = None
    high_watermark: int = 0
    _applied: int = 0
    _deadline: int = 0
    _votes: set[int] = field(default_factory=set)
    _next: dict[int, int] = field(default_factory=dict)
    _match: dict[int, int] = field(default_factory=dict)
    _unstable_from: int | None = None
    _state_dirty: bool = False
    _outbox: list[tuple[int, object]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._reset_election_timer()

    # -- inputs ------------------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        self.now_ms = now_ms
        if now_ms < self._deadline:
            return
        if self.role == "leader":
            self._broadcast_append()
            self._deadline = now_ms + self.config.heartbeat_ms
        else:
            self._start_election()

    def propose(self, data: bytes, now_ms: int) -> bool:
        self.now_ms = now_ms
        if self.role != "leader":
            return False
        self._append_local([(self.epoch, data)], len(self.log))
        self._broadcast_append()
        return True

    def step(self, message: object, now_ms: int) -> None:
        self.now_ms = now_ms
        epoch = message.epoch  # type: ignore[attr-defined]
        if epoch > self.epoch:
            self._become_follower(epoch, None)
        if isinstance(message, Vote):
            self._on_vote(message)
        elif isinstance(message, VoteResponse):
            if message.epoch == self.epoch and self.role == "candidate" and message.granted:
                self._votes.add(message.voter)
                if len(self._votes) * 2 > len(self.voters):
                    self._become_leader()
        elif isinstance(message, Append):
            self._on_append(message)
        elif isinstance(message, AppendResponse):
            self._on_append_response(message)

    # -- Ready -------------------------------------------------------------------------------
    def ready(self) -> ToyReady:
        start = self._unstable_from
        committed = [(o, self.log[o]) for o in range(self._applied, self.high_watermark)]
        return ToyReady(
            truncate_to=start,
            entries=self.log[start:] if start is not None else [],
            quorum_state=(self.epoch, self.voted_for) if self._state_dirty else None,
            messages=list(self._outbox),
            committed=committed,
            high_watermark=self.high_watermark,
            next_deadline_ms=self._deadline,
        )

    def advance(self, ready: ToyReady) -> None:
        self._unstable_from = None
        self._state_dirty = False
        del self._outbox[: len(ready.messages)]
        self._applied += len(ready.committed)
        if self.role == "leader":
            self._match[self.node_id] = len(self.log)
            self._maybe_commit()

    # -- internals ---------------------------------------------------------------------------
    def _reset_election_timer(self) -> None:
        t = self.config.election_timeout_ms
        self._deadline = self.now_ms + self.rng.randrange(t, 2 * t)

    def _send(self, dst: int, message: object) -> None:
        self._outbox.append((dst, message))

    def _become_follower(self, epoch: int, leader: int | None) -> None:
        if epoch != self.epoch:
            self.epoch, self.voted_for = epoch, None
            self._state_dirty = True
        self.role = "follower" if leader is not None else "unattached"
        self.leader = leader
        self._reset_election_timer()

    def _start_election(self) -> None:
        self.epoch += 1
        self.voted_for = self.node_id
        self._state_dirty = True
        self.role, self.leader = "candidate", None
        self._votes = {self.node_id}
        self._reset_election_timer()
        last_epoch = self.log[-1][0] if self.log else 0
        for peer in self.voters:
            if peer != self.node_id:
                self._send(peer, Vote(self.epoch, self.node_id, last_epoch, len(self.log)))
        if len(self.voters) == 1:
            self._become_leader()

    def _become_leader(self) -> None:
        self.role, self.leader = "leader", self.node_id
        self._next = {p: len(self.log) for p in self.voters}
        self._match = {p: 0 for p in self.voters}
        # Commit an entry of this epoch so earlier ones commit (Raft's no-op on election).
        self._append_local([(self.epoch, b"")], len(self.log))
        self._broadcast_append()
        self._deadline = self.now_ms + self.config.heartbeat_ms

    def _on_vote(self, m: Vote) -> None:
        last_epoch = self.log[-1][0] if self.log else 0
        up_to_date = (m.last_epoch, m.log_end) >= (last_epoch, len(self.log))
        if not self.config.check_log_up_to_date:
            up_to_date = True
        grant = (
            m.epoch == self.epoch
            and self.voted_for in (None, m.candidate)
            and self.role != "leader"
            and up_to_date
        )
        if grant:
            self.voted_for = m.candidate
            self._state_dirty = True
            self._reset_election_timer()
        self._send(m.candidate, VoteResponse(self.epoch, self.node_id, grant))

    def _on_append(self, m: Append) -> None:
        if m.epoch < self.epoch:
            self._send(m.leader, AppendResponse(self.epoch, self.node_id, False, 0))
            return
        if self.role != "follower" or self.leader != m.leader:
            self._become_follower(m.epoch, m.leader)
        self._reset_election_timer()
        prev_ok = m.prev_end <= len(self.log) and (
            m.prev_end == 0 or self.log[m.prev_end - 1][0] == m.prev_epoch
        )
        if not prev_ok:
            self._send(m.leader, AppendResponse(self.epoch, self.node_id, False, 0))
            return
        offset = m.prev_end
        for i, entry in enumerate(m.entries):
            at = offset + i
            if at < len(self.log) and self.log[at] == entry:
                continue
            self._append_local(list(m.entries[i:]), at)
            break
        match_end = m.prev_end + len(m.entries)
        new_hw = min(m.high_watermark, match_end)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
        self._send(m.leader, AppendResponse(self.epoch, self.node_id, True, match_end))

    def _append_local(self, entries: list[Entry], at: int) -> None:
        del self.log[at:]
        self.log.extend(entries)
        self._unstable_from = at if self._unstable_from is None else min(self._unstable_from, at)

    def _on_append_response(self, m: AppendResponse) -> None:
        if self.role != "leader" or m.epoch != self.epoch:
            return
        if m.success:
            self._match[m.follower] = max(self._match[m.follower], m.match_end)
            self._next[m.follower] = max(self._next[m.follower], m.match_end)
            self._maybe_commit()
        else:
            self._next[m.follower] = max(0, self._next[m.follower] - 1)
            self._send_append(m.follower)

    def _maybe_commit(self) -> None:
        ends = sorted(self._match.values(), reverse=True)
        majority_end = ends[len(self.voters) // 2]
        if majority_end > self.high_watermark and self.log[majority_end - 1][0] == self.epoch:
            self.high_watermark = majority_end
            self._broadcast_append()

    def _broadcast_append(self) -> None:
        for peer in self.voters:
            if peer != self.node_id:
                self._send_append(peer)

    def _send_append(self, peer: int) -> None:
        start = min(self._next[peer], len(self.log))
        prev_epoch = self.log[start - 1][0] if start else 0
        entries = tuple(self.log[start : start + 16])
        self._send(
            peer, Append(self.epoch, self.node_id, start, prev_epoch, entries, self.high_watermark)
        )
