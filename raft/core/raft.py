"""The Raft core: KRaft's semantics in etcd-raft's shape (inputs step/tick/propose, output
Ready, then advance).

Deterministic: no clock (every input carries `now_ms`), no I/O of its own beyond the
synchronous `LogStore` port (appends land in the page cache; the driver flushes as the Ready
says), randomness only from the injected `random.Random`. The driver loop is:

    core.step(message, now_ms) / core.tick(now_ms) / core.propose(records, now_ms)
    rd = core.ready()
    write rd.quorum_state (atomically) ; if rd.must_flush: store.flush()
    send rd.messages ; apply rd.committed ; core.advance(rd)
    call core.tick again at rd.next_deadline_ms at the latest

Entries with empty `data` are control entries (the leader's epoch-start entry, KRaft's
LeaderChange record); they are committed and handed out like the others: skip them when
applying.

Snapshots (KRaft's FetchSnapshot): any node may `create_snapshot(end_offset, data)` of the
state it applied (end_offset <= HW) and `delete_before_snapshot()` to move its log start up.
A Fetch below the leader's log start (or diverging below it) is answered with `snapshot_id`;
the follower then pulls the snapshot in chunks (FetchSnapshot: position + max_bytes), stores
it, restarts its log at its end offset and fetches on from there. A Ready's `snapshot` tells
the state machine to load a snapshot before applying `committed` (also at start-up: a node
starts from its latest snapshot plus the log tail).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from protocol.errors import ErrorCode
from raft.core.accumulator import BatchAccumulator
from raft.core.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from raft.core.quorum import next_high_watermark
from raft.core.types import (
    AbandonedProposals,
    ProposeResult,
    QuorumStateData,
    RaftConfig,
    Ready,
    Role,
)
from raft.log_store import Entry, LogStore, LogStoreError, OffsetAndEpoch, SnapshotId

# KRaft's check-quorum timer is 1.5x the fetch timeout.
CHECK_QUORUM_FACTOR = 1.5


class RaftCore:
    """One node's Raft state machine. `quorum_state` is what the driver last persisted
    (QuorumStateData() on first start); `store` holds the log as it survived."""

    def __init__(
        self,
        config: RaftConfig,
        store: LogStore,
        rng: random.Random,
        quorum_state: QuorumStateData,
        now_ms: int,
    ) -> None:
        self.config = config
        self.store = store
        self._rng = rng
        self._now = now_ms
        self._epoch = quorum_state.epoch
        self._voted_for = quorum_state.voted_for
        self._leader_id = quorum_state.leader_id
        self._qs_handed = quorum_state
        self._role = Role.UNATTACHED
        self._outbox: list[tuple[int, Message]] = []
        self._inflight: Ready | None = None
        # Start-up (KRaft's truncateToLatestSnapshot + a log starting at its snapshot): a
        # snapshot fetched beyond the log restarts the log there; otherwise the log below the
        # latest snapshot (committed: snapshots are only taken at or below the HW) is dropped,
        # so the log always starts at a snapshot and the state machine loads it first.
        latest = store.latest_snapshot_id()
        if latest is not None:
            if latest.end_offset > store.end_offset:
                store.truncate_to_snapshot(latest)
            elif latest.end_offset > store.start_offset:
                store.delete_before_snapshot(latest)
        self._base_snapshot: SnapshotId | None = (
            latest if latest is not None and latest.end_offset == store.start_offset else None
        )
        self._load_snapshot: SnapshotId | None = self._base_snapshot
        self._hw = store.start_offset
        self._applied = store.start_offset
        self._abandoned: list[AbandonedProposals] = []
        # Follower: the snapshot being fetched and the bytes received so far.
        self._snap_fetch: tuple[SnapshotId, bytearray] | None = None
        self._fetched_from_leader = False  # KRaft's FollowerState.hasFetchedFromLeader
        # Timers (absolute ms; None = not armed).
        self._election_at: int | None = None  # election timeout / follower fetch timeout
        self._fetch_at: int | None = None  # send (or resend) the next Fetch
        self._fetch_inflight = False
        self._leader_gone = False  # follower: the leader said it resigned
        # Prospective / candidate.
        self._grants: set[int] = set()
        self._rejects: set[int] = set()
        # Leader.
        self._epoch_start = 0
        self._replica_end: dict[int, int] = {}
        self._last_fetch_ms: dict[int, int] = {}
        self._last_sent_hw: dict[int, int] = {}
        self._begin_acked: set[int] = set()
        self._begin_resend_at: int | None = None
        self._parked: dict[int, tuple[FetchRequest, int]] = {}
        self._acc: BatchAccumulator | None = None

        # KRaft's QuorumState.initialize: a leader restarts resigned (it may have lost its
        # unflushed tail; it must never lead this epoch again); a vote is kept.
        if quorum_state.leader_id == config.node_id:
            self._role = Role.RESIGNED
            self._election_at = now_ms + self._election_timeout()
        elif quorum_state.leader_id != NO_LEADER:
            self._become_follower(quorum_state.epoch, quorum_state.leader_id, now_ms)
        elif quorum_state.voted_for != NO_LEADER and config.is_voter:
            self._role = Role.VOTED
            self._election_at = now_ms + self._election_timeout()
        else:
            self._become_unattached(quorum_state.epoch, now_ms)
        if config.voters == {config.node_id} and self._role is not Role.LEADER:
            self._become_candidate(now_ms)  # a sole voter elects itself at once

    # --- read-only views ---------------------------------------------------------------
    @property
    def role(self) -> Role:
        return self._role

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def leader_id(self) -> int:
        return self._leader_id

    @property
    def voted_for(self) -> int:
        return self._voted_for

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def quorum_state(self) -> QuorumStateData:
        return QuorumStateData(self._epoch, self._voted_for, self._leader_id)

    # --- inputs ------------------------------------------------------------------------
    def step(self, message: Message, now_ms: int) -> None:
        """Handle one message from another node."""
        self._now = max(self._now, now_ms)
        now = self._now
        if isinstance(message, VoteRequest):
            self._on_vote_request(message, now)
        elif isinstance(message, FetchRequest):
            self._on_fetch_request(message, now)
        elif isinstance(message, BeginQuorumEpochRequest):
            self._on_begin_quorum_epoch(message, now)
        elif isinstance(message, EndQuorumEpochRequest):
            self._on_end_quorum_epoch(message, now)
        elif isinstance(message, FetchSnapshotRequest):
            self._on_fetch_snapshot_request(message, now)
        elif isinstance(
            message,
            VoteResponse
            | FetchResponse
            | FetchSnapshotResponse
            | BeginQuorumEpochResponse
            | EndQuorumEpochResponse,
        ):
            if message.epoch > self._epoch:
                # A newer epoch: follow its leader if the answer names one, else wait unattached.
                if message.leader_id not in (NO_LEADER, self.config.node_id):
                    self._become_follower(message.epoch, message.leader_id, now)
                else:
                    self._become_unattached(message.epoch, now)
                return
            stale_ok = isinstance(message, VoteResponse) and message.pre_vote
            if message.epoch < self._epoch and not stale_ok:
                return  # stale (a pre-vote grant from a voter behind us still counts)
            if isinstance(message, VoteResponse):
                self._on_vote_response(message, now)
            elif isinstance(message, FetchResponse):
                self._on_fetch_response(message, now)
            elif isinstance(message, FetchSnapshotResponse):
                self._on_fetch_snapshot_response(message, now)
            elif isinstance(message, BeginQuorumEpochResponse) and self._role is Role.LEADER:
                self._begin_acked.add(message.sender)
        else:
            raise TypeError(f"RaftCore.step: not a raft message: {type(message).__name__}")

    def on_request_failed(self, to_node: int, request: Message, now_ms: int) -> None:
        """The driver could not deliver `request` to `to_node` or got no answer (connection
        refused or broken, timeout). An observer's Fetch: back off retry_backoff_ms, then look
        for the leader again among the voters (KafkaRaftClient's observer after a failed
        fetch), instead of waiting request_timeout_ms for the resend timer. Voters keep their
        timers: the fetch timeout decides elections."""
        self._now = max(self._now, now_ms)
        now = self._now
        if (
            self.config.is_voter
            or not isinstance(request, FetchRequest)
            or not self._fetch_inflight
            or request.epoch != self._epoch
            or request.fetch_offset != self.store.end_offset
        ):
            return
        if self._role is Role.FOLLOWER and to_node == self._leader_id:
            self._become_unattached(self._epoch, now)
        elif self._role is not Role.UNATTACHED:
            return
        self._fetch_inflight = False
        self._fetch_at = now + max(1, self.config.retry_backoff_ms)

    def tick(self, now_ms: int) -> None:
        """Fire every timer due at `now_ms`."""
        self._now = max(self._now, now_ms)
        now = self._now
        if self._role is Role.LEADER:
            self._leader_tick(now)
            return
        if self._election_at is not None and now >= self._election_at:
            if self._role is Role.FOLLOWER and not self.config.is_voter:
                # An observer lost its leader: look for it again.
                self._become_unattached(self._epoch, now)
            else:
                self._start_election(now)
            return
        if self._fetch_at is not None and now >= self._fetch_at:
            self._send_fetch(now)

    def propose(self, records: Sequence[bytes], now_ms: int) -> ProposeResult:
        """Queue records for appending (in one batch after the linger). Not the leader:
        NOT_LEADER_OR_FOLLOWER with the known leader, nothing queued."""
        self._now = max(self._now, now_ms)
        if isinstance(records, bytes | bytearray):
            raise TypeError("propose takes a sequence of records (bytes), not one bytes")
        data: list[bytes] = []
        for i, rec in enumerate(records):
            if not isinstance(rec, bytes | bytearray) or not rec:
                raise ValueError(
                    f"propose: record {i} must be non-empty bytes (empty data is reserved for "
                    f"control entries), got {rec!r:.40}"
                )
            data.append(bytes(rec))
        if not data:
            raise ValueError("propose: no records")
        if self._role is not Role.LEADER or self._acc is None:
            leader = self._leader_id if self._leader_id != self.config.node_id else NO_LEADER
            return ProposeResult(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                self._epoch,
                leader,
                message=f"node {self.config.node_id} is {self._role.value} in epoch "
                f"{self._epoch}, not the leader",
            )
        last = self._acc.append(data, self._now)
        if self._acc.ready_to_drain(self._now):
            self._append_as_leader(self._acc.drain())
        return ProposeResult(ErrorCode.NONE, self._epoch, self.config.node_id, last)

    def resign(self, now_ms: int) -> None:
        """Graceful shutdown of a leader: EndQuorumEpoch to the voters, most caught-up first
        (a no-op when not the leader)."""
        self._now = max(self._now, now_ms)
        if self._role is Role.LEADER:
            self._resign(self._now)

    def create_snapshot(self, end_offset: int, data: bytes) -> SnapshotId:
        """Store `data`, the state machine's state after applying every entry below
        `end_offset`, as a snapshot (the controller's serialized image). Only committed
        state that was handed out: start offset < end_offset <= what the Ready applied
        (<= HW). The log stays until `delete_before_snapshot`."""
        if not isinstance(data, bytes | bytearray):
            raise TypeError(f"create_snapshot data must be bytes, got {type(data).__name__}")
        store = self.store
        base = self._base_snapshot
        if base is not None and end_offset == store.start_offset == base.end_offset:
            return base  # already the snapshot the log starts at
        if not store.start_offset < end_offset <= self._applied:
            raise ValueError(
                f"create_snapshot at offset {end_offset}: must be above the log start "
                f"{store.start_offset} and at most the applied offset {self._applied} "
                f"(high watermark {self._hw})"
            )
        last = store.read(end_offset - 1, max_entries=1)[0]
        snapshot_id = SnapshotId(end_offset, last.epoch)
        store.create_snapshot(snapshot_id, bytes(data))
        return snapshot_id

    def delete_before_snapshot(self) -> int:
        """Drop the log below the latest snapshot (KRaft's deleteBeforeSnapshot: never above
        the HW); returns the new log start offset."""
        latest = self.store.latest_snapshot_id()
        if latest is not None and self.store.start_offset < latest.end_offset <= min(
            self._hw, self._applied
        ):
            self.store.delete_before_snapshot(latest)
            self._base_snapshot = latest
        return self.store.start_offset

    # --- output ------------------------------------------------------------------------
    def ready(self) -> Ready:
        """Everything to persist, send and apply since the last Ready. Call `advance` with
        it once done; calling `ready` again before that is an error."""
        if self._inflight is not None:
            raise RuntimeError("RaftCore.ready() called again before advance() of the last one")
        qs = self.quorum_state
        store = self.store
        must_flush = store.flushed_end_offset < store.end_offset
        unflushed = max(store.flushed_end_offset, store.start_offset)
        committed: tuple[Entry, ...] = ()
        top = min(self._hw, store.end_offset)
        if self._applied < top:
            n = min(self.config.max_committed_per_ready, top - self._applied)
            committed = tuple(store.read(self._applied, max_entries=n))
        rd = Ready(
            quorum_state=qs if qs != self._qs_handed else None,
            must_flush=must_flush,
            entries=tuple(store.read(unflushed)) if must_flush else (),
            messages=tuple(self._outbox),
            committed=committed,
            high_watermark=self._hw,
            next_deadline_ms=self._next_deadline(),
            role=self._role,
            snapshot=self._load_snapshot,
            abandoned=tuple(self._abandoned),
        )
        self._qs_handed = qs
        self._outbox.clear()
        self._abandoned.clear()
        self._load_snapshot = None
        self._inflight = rd
        return rd

    def advance(self, ready: Ready) -> None:
        """The driver persisted, sent and applied `ready`."""
        if ready is not self._inflight:
            raise RuntimeError("RaftCore.advance() needs the Ready last returned by ready()")
        self._inflight = None
        if ready.committed:
            self._applied = max(self._applied, ready.committed[-1].offset + 1)
        if self._role is Role.LEADER:
            self._maybe_update_hw()  # the leader's own entries count once flushed

    # --- transitions -------------------------------------------------------------------
    def _election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return t + self._rng.randrange(t)

    def _reset_role_state(self) -> None:
        self._election_at = None
        self._fetch_at = None
        self._fetch_inflight = False
        self._leader_gone = False
        self._grants.clear()
        self._rejects.clear()
        self._parked.clear()
        self._snap_fetch = None
        self._fetched_from_leader = False
        if self._acc is not None:
            # Queued, never appended: these can never commit; the Ready says so.
            pending = self._acc.pending_offsets()
            if pending is not None:
                self._abandoned.append(AbandonedProposals(self._acc.epoch, *pending))
        self._acc = None
        self._begin_resend_at = None

    def _become_unattached(self, epoch: int, now: int) -> None:
        same = epoch == self._epoch
        self._reset_role_state()
        self._role = Role.UNATTACHED
        if not same:
            self._epoch, self._voted_for = epoch, NO_LEADER
        self._leader_id = NO_LEADER
        if self.config.is_voter:
            self._election_at = now + self._election_timeout()
        else:
            self._fetch_at = now  # an observer asks a voter who leads

    def _become_follower(self, epoch: int, leader: int, now: int) -> None:
        if epoch != self._epoch:
            self._voted_for = NO_LEADER
        self._reset_role_state()
        self._role = Role.FOLLOWER
        self._epoch, self._leader_id = epoch, leader
        self._election_at = now + self.config.fetch_timeout_ms
        self._fetch_at = now

    def _start_election(self, now: int) -> None:
        if not self.config.is_voter:
            return
        if self.config.pre_vote and len(self.config.voters) > 1:
            self._become_prospective(now)
        else:
            self._become_candidate(now)

    def _become_prospective(self, now: int) -> None:
        # Pre-vote changes nothing persisted: epoch, vote and known leader stay.
        leader, voted = self._leader_id, self._voted_for
        self._reset_role_state()
        self._role = Role.PROSPECTIVE
        self._leader_id, self._voted_for = leader, voted
        self._grants = {self.config.node_id}
        self._election_at = now + self._election_timeout()
        self._send_votes(pre_vote=True)

    def _become_candidate(self, now: int) -> None:
        self._reset_role_state()
        self._role = Role.CANDIDATE
        self._epoch += 1
        self._voted_for, self._leader_id = self.config.node_id, NO_LEADER
        self._grants = {self.config.node_id}
        self._election_at = now + self._election_timeout()
        if len(self._grants) >= self.config.majority:
            self._become_leader(now)
            return
        self._send_votes(pre_vote=False)

    def _send_votes(self, pre_vote: bool) -> None:
        req = VoteRequest(
            sender=self.config.node_id,
            epoch=self._epoch,
            last_epoch=self.store.last_epoch,
            end_offset=self.store.end_offset,
            pre_vote=pre_vote,
        )
        for voter in sorted(self.config.voters - {self.config.node_id}):
            self._outbox.append((voter, req))

    def _become_leader(self, now: int) -> None:
        self._reset_role_state()
        self._role = Role.LEADER
        self._leader_id = self.config.node_id
        others = self.config.voters - {self.config.node_id}
        self._replica_end = dict.fromkeys(others, 0)
        self._last_fetch_ms = dict.fromkeys(others, now)
        self._last_sent_hw = {}
        self._begin_acked = set()
        # The epoch-start control entry: entries below it commit only once it does.
        self._epoch_start = self.store.end_offset
        self.store.append([Entry(self._epoch_start, self._epoch, b"")])
        self._acc = BatchAccumulator(
            self._epoch,
            self.store.end_offset,
            self.config.append_linger_ms,
            self.config.max_batch_entries,
        )
        self._send_begin_quorum_epoch(now)

    def _send_begin_quorum_epoch(self, now: int) -> None:
        req = BeginQuorumEpochRequest(self.config.node_id, self._epoch, self.config.node_id)
        for voter in sorted(self.config.voters - {self.config.node_id} - self._begin_acked):
            self._outbox.append((voter, req))
        self._begin_resend_at = now + max(1, self.config.fetch_timeout_ms // 2)

    def _resign(self, now: int) -> None:
        others = self.config.voters - {self.config.node_id}
        successors = tuple(sorted(others, key=lambda v: (-self._replica_end.get(v, 0), v)))
        self._reset_role_state()
        self._role = Role.RESIGNED
        self._election_at = now + self._election_timeout()
        req = EndQuorumEpochRequest(self.config.node_id, self._epoch, self._leader_id, successors)
        for voter in sorted(others):
            self._outbox.append((voter, req))

    # --- votes -------------------------------------------------------------------------
    def _log_up_to_date(self, last_epoch: int, end_offset: int) -> bool:
        if not self.config.check_log_up_to_date:
            return True  # UNSAFE, for the simulator's self-test only
        return (last_epoch, end_offset) >= (self.store.last_epoch, self.store.end_offset)

    def _fetched_recently(self, now: int) -> bool:
        # KRaft's FollowerState.canGrantVote: a follower grants pre-votes only until it has
        # fetched successfully from its leader in this epoch. Ours also grants once the leader
        # said it resigned (EndQuorumEpoch, or a Fetch answered NOT_LEADER_OR_FOLLOWER) or
        # the fetch timeout passed, so a successor's pre-vote is not refused by voters still
        # "following" a leader that is gone.
        return (
            self._role is Role.FOLLOWER
            and self._fetched_from_leader
            and not self._leader_gone
            and self._election_at is not None
            and now < self._election_at
        )

    def _on_vote_request(self, req: VoteRequest, now: int) -> None:
        def answer(granted: bool) -> None:
            self._outbox.append(
                (
                    req.sender,
                    VoteResponse(
                        sender=self.config.node_id,
                        epoch=self._epoch,
                        leader_id=self._leader_id,
                        granted=granted,
                        pre_vote=req.pre_vote,
                        candidate_epoch=req.epoch,
                        error=ErrorCode.NONE
                        if self.config.is_voter and req.sender in self.config.voters
                        else ErrorCode.INCONSISTENT_VOTER_SET,
                    ),
                )
            )

        if not self.config.is_voter or req.sender not in self.config.voters:
            answer(False)
            return
        if req.epoch < self._epoch:
            answer(False)
            return
        log_ok = self._log_up_to_date(req.last_epoch, req.end_offset)
        if req.pre_vote:
            # KIP-996: would I vote for it? Not while I lead or follow a live leader.
            answer(log_ok and self._role is not Role.LEADER and not self._fetched_recently(now))
            return
        if req.epoch > self._epoch:
            self._become_unattached(req.epoch, now)
        role = self._role
        if role is Role.UNATTACHED:
            can = True
        elif role is Role.VOTED:
            can = self._voted_for == req.sender
        elif role is Role.PROSPECTIVE:
            can = self._leader_id == NO_LEADER and self._voted_for in (NO_LEADER, req.sender)
        else:  # leader, resigned, candidate (voted for itself), follower (has a leader)
            can = False
        if can and log_ok:
            if role is not Role.VOTED:
                self._reset_role_state()
                self._role = Role.VOTED
                self._voted_for = req.sender
            self._election_at = now + self._election_timeout()
            answer(True)  # in the same Ready as the persisted vote
        else:
            answer(False)

    def _on_vote_response(self, resp: VoteResponse, now: int) -> None:
        role = self._role
        if role is Role.PROSPECTIVE and resp.pre_vote and resp.candidate_epoch == self._epoch:
            if (
                not resp.granted
                and resp.leader_id not in (NO_LEADER, self.config.node_id)
                and resp.epoch == self._epoch
            ):
                # KIP-996: a voter still follows a leader of this epoch: follow it too.
                self._become_follower(self._epoch, resp.leader_id, now)
                return
        elif not (
            role is Role.CANDIDATE and not resp.pre_vote and resp.candidate_epoch == self._epoch
        ):
            return
        (self._grants if resp.granted else self._rejects).add(resp.sender)
        if len(self._grants) >= self.config.majority:
            if role is Role.PROSPECTIVE:
                self._become_candidate(now)
            else:
                self._become_leader(now)
        elif len(self._rejects) > len(self.config.voters) - self.config.majority:
            # Lost: back off (randomized) before the next round.
            backoff = self._rng.randrange(self.config.election_backoff_max_ms + 1)
            self._election_at = min(self._election_at or now + backoff, now + backoff)

    # --- quorum epoch announcements ------------------------------------------------------
    def _voter_only_error(self, remote: int, epoch: int) -> ErrorCode | None:
        """KafkaRaftClient's validateVoterOnlyRequest: an epoch announcement or a resignation
        counts only from a configured voter, and only at a voter (a non-voter as leader made
        every controller follow a node that does not exist). Without authentication this stops
        mistakes, not a forger who names a real voter."""
        if epoch < self._epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if remote < 0:
            return ErrorCode.INVALID_REQUEST
        if not self.config.is_voter or remote not in self.config.voters:
            return ErrorCode.INCONSISTENT_VOTER_SET
        return None

    def _on_begin_quorum_epoch(self, req: BeginQuorumEpochRequest, now: int) -> None:
        error = self._voter_only_error(req.leader_id, req.epoch)
        if error is None:
            if req.epoch == self._epoch and self._role in (Role.LEADER, Role.RESIGNED):
                error = ErrorCode.INVALID_REQUEST  # two leaders in one epoch: never follow
            elif not (self._role is Role.FOLLOWER and self._leader_id == req.leader_id) or (
                req.epoch > self._epoch
            ):
                self._become_follower(req.epoch, req.leader_id, now)
        self._outbox.append(
            (
                req.sender,
                BeginQuorumEpochResponse(
                    self.config.node_id, self._epoch, self._leader_id, error=error or ErrorCode.NONE
                ),
            )
        )

    def _on_end_quorum_epoch(self, req: EndQuorumEpochRequest, now: int) -> None:
        error = self._voter_only_error(req.leader_id, req.epoch)
        if error is None:
            if req.epoch > self._epoch:
                self._become_unattached(req.epoch, now)
            if self._role is Role.FOLLOWER and self._leader_id == req.leader_id:
                self._leader_gone = True
            if self._role in (Role.FOLLOWER, Role.UNATTACHED, Role.VOTED):
                backoff = self._end_epoch_election_backoff(req.preferred_successors)
                self._election_at = min(self._election_at or now + backoff, now + backoff)
        self._outbox.append(
            (
                req.sender,
                EndQuorumEpochResponse(
                    self.config.node_id, self._epoch, self._leader_id, error or ErrorCode.NONE
                ),
            )
        )

    def _end_epoch_election_backoff(self, successors: tuple[int, ...]) -> int:
        """KRaft's strictExponentialElectionBackoffMs: the first preferred successor runs at
        once; position p (1 <= p < n) waits (backoff_max >> (n - 1)) << (p - 1); a voter not
        in the list (or past its end) waits election.backoff.max.ms."""
        backoff_max = self.config.election_backoff_max_ms
        n = len(successors)
        if self.config.node_id not in successors:
            return backoff_max
        pos = successors.index(self.config.node_id)
        if pos == 0:
            return 0
        return min(backoff_max, (backoff_max >> (n - 1)) << (pos - 1))

    # --- replication: the leader ---------------------------------------------------------
    def _on_fetch_request(self, req: FetchRequest, now: int) -> None:
        def error(code: ErrorCode) -> None:
            leader = self._leader_id if self._role is not Role.RESIGNED else NO_LEADER
            self._outbox.append(
                (
                    req.sender,
                    FetchResponse(
                        sender=self.config.node_id,
                        epoch=self._epoch,
                        leader_id=leader,
                        fetch_offset=req.fetch_offset,
                        last_fetched_epoch=req.last_fetched_epoch,
                        error=code,
                        high_watermark=self._hw,
                    ),
                )
            )

        if self._role is not Role.LEADER:
            error(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        if req.epoch < self._epoch:
            error(ErrorCode.FENCED_LEADER_EPOCH)
            return
        if req.epoch > self._epoch:
            error(ErrorCode.UNKNOWN_LEADER_EPOCH)
            return
        is_voter = req.sender in self._replica_end
        if is_voter:
            self._last_fetch_ms[req.sender] = now
            self._begin_acked.add(req.sender)
        store = self.store
        base = self._base_snapshot
        if base is not None and (
            req.fetch_offset < store.start_offset
            or (req.fetch_offset == store.start_offset and req.last_fetched_epoch != base.epoch)
            or req.last_fetched_epoch < base.epoch
        ):
            # KRaft's validateOffsetAndEpoch: the fetcher needs what lies below our log start.
            snap = store.latest_snapshot_id() or base
            self._respond_fetch(req, snapshot_id=OffsetAndEpoch(*snap))
            return
        end = store.end_offset_for_epoch(req.last_fetched_epoch)
        if (
            req.fetch_offset > store.end_offset
            or end.epoch != req.last_fetched_epoch
            or end.offset < req.fetch_offset
        ):
            self._respond_fetch(req, diverging=end)
            return
        if is_voter:
            self._replica_end[req.sender] = req.fetch_offset
        self._parked.pop(req.sender, None)
        self._maybe_update_hw()
        if store.end_offset > req.fetch_offset or self._hw > self._last_sent_hw.get(req.sender, -1):
            self._respond_fetch(req)
        else:
            # Nothing new: park it (KRaft's fetch purgatory) until data, a new HW or max wait.
            self._parked[req.sender] = (req, now + self.config.fetch_max_wait_ms)

    def _respond_fetch(
        self,
        req: FetchRequest,
        diverging: OffsetAndEpoch | None = None,
        snapshot_id: OffsetAndEpoch | None = None,
    ) -> None:
        entries: tuple[Entry, ...] = ()
        if diverging is None and snapshot_id is None:
            entries = tuple(
                self.store.read(
                    req.fetch_offset, self.config.fetch_max_entries, self.config.fetch_max_bytes
                )
            )
        self._last_sent_hw[req.sender] = self._hw
        self._outbox.append(
            (
                req.sender,
                FetchResponse(
                    sender=self.config.node_id,
                    epoch=self._epoch,
                    leader_id=self.config.node_id,
                    fetch_offset=req.fetch_offset,
                    last_fetched_epoch=req.last_fetched_epoch,
                    entries=entries,
                    high_watermark=self._hw,
                    diverging_epoch=diverging,
                    snapshot_id=snapshot_id,
                ),
            )
        )

    def _on_fetch_snapshot_request(self, req: FetchSnapshotRequest, now: int) -> None:
        def answer(code: ErrorCode, size: int = 0, data: bytes = b"") -> None:
            leader = self._leader_id if self._role is not Role.RESIGNED else NO_LEADER
            self._outbox.append(
                (
                    req.sender,
                    FetchSnapshotResponse(
                        sender=self.config.node_id,
                        epoch=self._epoch,
                        leader_id=leader,
                        snapshot_id=req.snapshot_id,
                        position=req.position,
                        error=code,
                        size=size,
                        data=data,
                    ),
                )
            )

        if self._role is not Role.LEADER:
            answer(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            return
        if req.epoch != self._epoch:
            answer(
                ErrorCode.FENCED_LEADER_EPOCH
                if req.epoch < self._epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH
            )
            return
        if req.sender in self._replica_end:
            # A voter loading a snapshot is fetching: it counts for check-quorum (as KRaft).
            self._last_fetch_ms[req.sender] = now
            self._begin_acked.add(req.sender)
        try:
            data = self.store.read_snapshot(SnapshotId(*req.snapshot_id))
        except LogStoreError:
            answer(ErrorCode.SNAPSHOT_NOT_FOUND)
            return
        if not 0 <= req.position < len(data) and not (req.position == 0 and not data):
            answer(ErrorCode.POSITION_OUT_OF_RANGE, size=len(data))
            return
        chunk = min(max(1, req.max_bytes), self.config.fetch_snapshot_max_bytes)
        answer(ErrorCode.NONE, len(data), data[req.position : req.position + chunk])

    def _complete_parked(self, now: int) -> None:
        for sender, (req, deadline) in sorted(self._parked.items()):
            if (
                self.store.end_offset > req.fetch_offset
                or self._hw > self._last_sent_hw.get(sender, -1)
                or now >= deadline
            ):
                del self._parked[sender]
                self._respond_fetch(req)

    def _maybe_update_hw(self) -> None:
        ends = dict(self._replica_end)
        ends[self.config.node_id] = self.store.flushed_end_offset
        hw = next_high_watermark(ends, self.config.majority, self._epoch_start, self._hw)
        if hw != self._hw:
            self._hw = hw
        self._complete_parked(self._now)

    def _append_as_leader(self, entries: list[Entry]) -> None:
        if entries:
            self.store.append(entries)
            self._complete_parked(self._now)

    def _check_quorum_deadline(self) -> int | None:
        """When fewer than a majority will have fetched within the check-quorum window."""
        need = self.config.majority - 1  # the leader counts itself
        if need == 0:
            return None
        times = sorted(self._last_fetch_ms.values(), reverse=True)
        window = int(self.config.fetch_timeout_ms * CHECK_QUORUM_FACTOR)
        return times[need - 1] + window

    def _leader_tick(self, now: int) -> None:
        assert self._acc is not None
        if self._acc.ready_to_drain(now):
            self._append_as_leader(self._acc.drain())
        self._complete_parked(now)
        deadline = self._check_quorum_deadline()
        if deadline is not None and now >= deadline:
            self._resign(now)  # a majority stopped fetching: we may be partitioned away
            return
        if self._begin_resend_at is not None and now >= self._begin_resend_at:
            self._send_begin_quorum_epoch(now)

    # --- replication: followers and observers --------------------------------------------
    def _send_fetch(self, now: int) -> None:
        if self._role is Role.FOLLOWER:
            target = self._leader_id
        elif self._role is Role.UNATTACHED and not self.config.is_voter:
            target = self._rng.choice(sorted(self.config.voters))  # find the leader
        else:
            return
        if self._snap_fetch is not None and self._role is Role.FOLLOWER:
            # Loading a snapshot: regular fetching pauses (as KRaft's fetchingSnapshot).
            snap_id, got = self._snap_fetch
            self._outbox.append(
                (
                    target,
                    FetchSnapshotRequest(
                        sender=self.config.node_id,
                        epoch=self._epoch,
                        snapshot_id=OffsetAndEpoch(*snap_id),
                        position=len(got),
                        max_bytes=self.config.fetch_snapshot_max_bytes,
                    ),
                )
            )
            self._fetch_inflight = True
            self._fetch_at = now + self.config.request_timeout_ms  # resend a lost chunk
            return
        self._outbox.append(
            (
                target,
                FetchRequest(
                    sender=self.config.node_id,
                    epoch=self._epoch,
                    fetch_offset=self.store.end_offset,
                    last_fetched_epoch=self.store.last_epoch,
                ),
            )
        )
        self._fetch_inflight = True
        self._fetch_at = now + self.config.request_timeout_ms  # resend if unanswered

    def _on_fetch_response(self, resp: FetchResponse, now: int) -> None:
        store = self.store
        if (
            not self._fetch_inflight
            or self._snap_fetch is not None
            or (
                resp.fetch_offset,
                resp.last_fetched_epoch,
            )
            != (store.end_offset, store.last_epoch)
        ):
            # Not the answer to our outstanding Fetch (late or duplicated; while a snapshot is
            # being fetched, only FetchSnapshot answers count: a late Fetch answer taken then
            # would apply entries the snapshot install later rolls back).
            return
        if self._role is Role.UNATTACHED and not self.config.is_voter:
            # Leader discovery for an observer.
            if resp.leader_id not in (NO_LEADER, self.config.node_id):
                self._become_follower(resp.epoch, resp.leader_id, now)
            else:
                self._fetch_inflight = False
                self._fetch_at = now + max(1, self.config.retry_backoff_ms)
            return
        if self._role is not Role.FOLLOWER or resp.sender != self._leader_id:
            return
        self._fetch_inflight = False
        if resp.error is not ErrorCode.NONE:
            if resp.error is ErrorCode.NOT_LEADER_OR_FOLLOWER:
                self._leader_gone = True  # it resigned: pre-votes may now be granted
            self._fetch_at = now + max(1, self.config.retry_backoff_ms)
            return
        self._leader_gone = False
        self._fetched_from_leader = True
        self._election_at = now + self.config.fetch_timeout_ms
        if resp.diverging_epoch is not None:
            div = resp.diverging_epoch
            local = store.end_offset_for_epoch(div.epoch)
            store.truncate_to(max(store.start_offset, min(div.offset, local.offset)))
        elif resp.snapshot_id is not None:
            snap_id = SnapshotId(*resp.snapshot_id)
            if snap_id.end_offset < 0 or snap_id.epoch < 0:
                self._fetch_at = now + max(1, self.config.retry_backoff_ms)
                return
            if store.latest_snapshot_id() == snap_id:
                self._install_snapshot(snap_id)  # already stored (a crash before installing)
            else:
                self._snap_fetch = (snap_id, bytearray())
            self._send_fetch(now)
            return
        elif resp.entries:
            store.append(list(resp.entries))
        self._hw = max(self._hw, min(resp.high_watermark, store.end_offset))
        # Fetch again at once: the Ready flushes what we appended before this Fetch is sent.
        self._send_fetch(now)

    def _on_fetch_snapshot_response(self, resp: FetchSnapshotResponse, now: int) -> None:
        if (
            self._role is not Role.FOLLOWER
            or resp.sender != self._leader_id
            or not self._fetch_inflight
            or self._snap_fetch is None
        ):
            return
        snap_id, got = self._snap_fetch
        if SnapshotId(*resp.snapshot_id) != snap_id or resp.position != len(got):
            return  # a late or duplicated chunk: not the answer to our outstanding request
        self._fetch_inflight = False
        if resp.error is ErrorCode.SNAPSHOT_NOT_FOUND:
            # The leader dropped it (a newer one replaced it): start over with a Fetch.
            self._snap_fetch = None
            self._send_fetch(now)
            return
        if resp.error is not ErrorCode.NONE:
            if resp.error is ErrorCode.NOT_LEADER_OR_FOLLOWER:
                self._leader_gone = True
            self._fetch_at = now + max(1, self.config.retry_backoff_ms)
            return
        self._leader_gone = False
        self._fetched_from_leader = True
        self._election_at = now + self.config.fetch_timeout_ms
        if not resp.data and len(got) + len(resp.data) < resp.size:
            self._fetch_at = now + max(1, self.config.retry_backoff_ms)
            return
        got.extend(resp.data)
        if len(got) >= resp.size:
            self.store.store_fetched_snapshot(snap_id, bytes(got))
            self._install_snapshot(snap_id)
        self._send_fetch(now)

    def _install_snapshot(self, snap_id: SnapshotId) -> None:
        """Restart the log at a stored snapshot; the next Ready tells the state machine to
        load it (everything it applied is replaced)."""
        self.store.truncate_to_snapshot(snap_id)
        self._snap_fetch = None
        self._base_snapshot = snap_id
        self._load_snapshot = snap_id
        self._hw = max(self._hw, snap_id.end_offset)
        self._applied = snap_id.end_offset

    # --- deadlines -------------------------------------------------------------------------
    def _next_deadline(self) -> int | None:
        times: list[int] = []
        if self._role is Role.LEADER:
            if self._acc is not None and self._acc.deadline_ms is not None:
                times.append(self._acc.deadline_ms)
            times.extend(deadline for _, deadline in self._parked.values())
            if self._begin_resend_at is not None and self._begin_acked < (
                self.config.voters - {self.config.node_id}
            ):
                times.append(self._begin_resend_at)
            cq = self._check_quorum_deadline()
            if cq is not None:
                times.append(cq)
        else:
            times.extend(t for t in (self._election_at, self._fetch_at) if t is not None)
        return min(times) if times else None
