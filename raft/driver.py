"""The trio driver around raft.core.RaftCore (KRaft's KafkaRaftClient poll loop).

One task owns the core. Everything that touches it - wire requests from peers, answers to our
requests, proposals, resign, ticks - arrives on one memory channel and is fed in by that task,
which then applies each `Ready` in the core's order:

    write the quorum state (atomically) -> flush the log store -> send -> apply -> advance

The file write and the fsync run in a worker thread (`trio.to_thread.run_sync`), one at a time,
and nothing is sent before they finished: a granted vote or an acknowledged fetch offset must
survive a crash (persist before send; tests/sim's planted --send-before-flush bug is what
breaking it costs). Committed entries go to the listeners in offset order, then waiting
proposals complete.

Request/response matching (the core has no correlation ids): an outgoing core request is one
transport call whose answer is turned back into a core response with the request in hand
(raft.wire.response_to_core); an incoming wire request waits in `_pending[(sender, kind)]`
until the core emits a response of that kind to that sender whose echo fields match it (or
the request times out: REQUEST_TIMED_OUT).
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
import trio

from protocol.clock import SYSTEM_CLOCK
from protocol.errors import ErrorCode, KafkaError, ProtocolError
from protocol.messages import Request, Response
from protocol.messages import describe_quorum as dq
from raft import wire
from raft.core import (
    AbandonedProposals,
    QuorumStateData,
    RaftConfig,
    RaftCore,
    Ready,
    Role,
)
from raft.core import messages as cm
from raft.log_store import Entry, LogStore, SnapshotId
from raft.metrics import RaftMetrics, default_metrics

log = structlog.get_logger("raft.driver")


class RaftTransport(Protocol):
    """How the driver reaches another quorum node: one request, its answer. Raises on a
    connection failure or timeout (the core resends on its own timers)."""

    async def send(self, to_node: int, request: Request, *, timeout_s: float) -> Response: ...


class QuorumStateStore(Protocol):
    """raft.quorum_state.FileQuorumStateStore's read/write (atomic)."""

    def read(self) -> QuorumStateData | None: ...
    def write(self, state: QuorumStateData) -> None: ...


CommitListener = Callable[[Sequence[Entry]], Awaitable[None]]
SnapshotListener = Callable[[SnapshotId, bytes], Awaitable[None]]


class NotLeaderError(KafkaError):
    """A proposal that will not commit here: NOT_LEADER_OR_FOLLOWER naming the leader."""

    def __init__(self, message: str, *, leader_id: int, epoch: int) -> None:
        super().__init__(ErrorCode.NOT_LEADER_OR_FOLLOWER, message)
        self.leader_id = leader_id
        self.epoch = epoch


@dataclass
class Proposal:
    """An accepted proposal waiting for its last offset to commit (purgatory keyed by
    offset): `append`'s answer. `wait_committed` returns once the listeners were given it."""

    epoch: int
    last_offset: int
    done: trio.Event = field(default_factory=trio.Event)
    error: KafkaError | None = None
    accepted_at: float = 0.0
    """trio time the core accepted it (commit latency)."""

    async def wait_committed(self) -> int:
        """The last offset once committed; NotLeaderError when it never will be here
        (abandoned, leadership lost, or another epoch's entry committed at its offset)."""
        await self.done.wait()
        if self.error is not None:
            raise self.error
        return self.last_offset


@dataclass
class _Pending:
    """A wire request from a peer, waiting for the core's answer."""

    request: cm.Message
    done: trio.Event = field(default_factory=trio.Event)
    response: cm.Message | None = None


@dataclass
class ReplicaState:
    """What the leader knows of a fetcher, for DescribeQuorum (Kafka's LeaderState.ReplicaState)."""

    log_end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_fetch_leader_end: int = -1


def _echo_matches(request: cm.Message, response: cm.Message) -> bool:
    """Does this core response answer this (incoming) request? The core's responses echo."""
    if isinstance(request, cm.FetchRequest) and isinstance(response, cm.FetchResponse):
        return (request.fetch_offset, request.last_fetched_epoch) == (
            response.fetch_offset,
            response.last_fetched_epoch,
        )
    if isinstance(request, cm.VoteRequest) and isinstance(response, cm.VoteResponse):
        return (request.epoch, request.pre_vote) == (response.candidate_epoch, response.pre_vote)
    if isinstance(request, cm.FetchSnapshotRequest) and isinstance(
        response, cm.FetchSnapshotResponse
    ):
        return (request.snapshot_id, request.position) == (
            response.snapshot_id,
            response.position,
        )
    return True


def monotonic_ms() -> int:
    return int(trio.current_time() * 1000)


class RaftDriver:
    """Runs one RaftCore: `await nursery.start(driver.run)`; `propose`, `resign`,
    `handle_request` (the server's entry for quorum requests), `describe_quorum`."""

    def __init__(
        self,
        config: RaftConfig,
        store: LogStore,
        quorum_store: QuorumStateStore,
        transport: RaftTransport,
        *,
        cluster_id: str | None = None,
        rng: random.Random | None = None,
        clock_ms: Callable[[], int] = monotonic_ms,
        wall_clock_ms: Callable[[], int] = SYSTEM_CLOCK.wall_ms,
        voter_endpoints: Sequence[dq.DescribeQuorumNode] = (),
        metrics: RaftMetrics | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics if metrics is not None else default_metrics()
        """raft-metrics (raft.metrics): gauges bound while `run` runs."""
        self.store = store
        self.quorum_store = quorum_store
        self.transport = transport
        self.cluster_id = cluster_id
        self._rng = rng or random.Random()
        self._clock = clock_ms
        self._wall = wall_clock_ms
        # DescribeQuorum's `nodes` (KIP-853): where the voters listen, so a tool that asked a
        # follower can go to the leader it names.
        self.voter_endpoints = tuple(voter_endpoints)
        self._core: RaftCore | None = None
        self._send_in, self._inbox = trio.open_memory_channel[tuple[str, Any]](10_000)
        self._pending: dict[tuple[int, type], list[_Pending]] = {}
        self._waiters: list[Proposal] = []
        self._commit_listeners: list[CommitListener] = []
        self._snapshot_listeners: list[SnapshotListener] = []
        self._replicas: dict[int, ReplicaState] = {}
        self._replicas_epoch = -1
        self._nursery: trio.Nursery | None = None
        self.applied_offset = 0
        """End of what the listeners have been given (exclusive)."""
        self.started = trio.Event()
        self.role_changed = trio.Event()
        """Set (and replaced) whenever role, epoch or leader changed."""
        self._last_view: tuple[Role, int, int] | None = None

    # --- public --------------------------------------------------------------------------
    def add_listener(
        self, on_committed: CommitListener, on_snapshot: SnapshotListener | None = None
    ) -> None:
        """Before `run`: committed entries (control entries skipped) in offset order; a
        snapshot to load first when the core says so."""
        self._commit_listeners.append(on_committed)
        if on_snapshot is not None:
            self._snapshot_listeners.append(on_snapshot)

    @property
    def core(self) -> RaftCore:
        if self._core is None:
            raise RuntimeError("RaftDriver is not running")
        return self._core

    @property
    def role(self) -> Role:
        return self.core.role

    @property
    def epoch(self) -> int:
        return self.core.epoch

    @property
    def leader_id(self) -> int:
        return self.core.leader_id

    @property
    def voted_for(self) -> int:
        return self.core.voted_for

    @property
    def is_voter(self) -> bool:
        return self.config.is_voter

    @property
    def high_watermark(self) -> int:
        return self.core.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.store.end_offset

    async def propose(self, records: Sequence[bytes]) -> int:
        """Append `records`; returns the last one's offset once committed. Raises
        NotLeaderError (NOT_LEADER_OR_FOLLOWER) when not leader or when the proposal is
        abandoned or replaced by another leader's entry."""
        proposal = await self.append(records)
        return await proposal.wait_committed()

    async def append(self, records: Sequence[bytes]) -> Proposal:
        """Hand `records` to the leader's accumulator; returns as soon as the core accepted
        them at a known offset (not committed yet: `Proposal.wait_committed`), so a caller
        can pipeline the next append. NotLeaderError when this node does not lead."""
        if not records:
            raise ValueError("propose needs at least one record")
        reply: trio.MemorySendChannel[Proposal | KafkaError]
        reply, answer = trio.open_memory_channel[Proposal | KafkaError](1)
        await self._send_in.send(("propose", (list(records), reply)))
        got = await answer.receive()
        if isinstance(got, KafkaError):
            raise got
        return got

    async def create_snapshot(self, end_offset: int, data: bytes) -> SnapshotId:
        """Store a snapshot of the state machine after every entry below `end_offset` (at most
        what the listeners were given). ValueError from the core when out of range."""
        return await self._call(lambda core: core.create_snapshot(end_offset, data))  # type: ignore[no-any-return]

    async def delete_before_snapshot(self) -> int:
        """Drop the log below the latest snapshot; returns the new log start offset."""
        return await self._call(lambda core: core.delete_before_snapshot())  # type: ignore[no-any-return]

    async def _call(self, fn: Callable[[RaftCore], Any]) -> Any:
        """Run `fn(core)` inside the loop (the only task that touches the core)."""
        reply: trio.MemorySendChannel[tuple[bool, Any]]
        reply, answer = trio.open_memory_channel[tuple[bool, Any]](1)
        await self._send_in.send(("call", (fn, reply)))
        ok, value = await answer.receive()
        if not ok:
            raise value
        return value

    async def resign(self) -> None:
        """Graceful resignation (EndQuorumEpoch) if leader."""
        await self._send_in.send(("resign", None))

    async def handle_request(self, request: Request) -> Response:
        """Answer a quorum wire request (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of the
        metadata partition, FetchSnapshot, DescribeQuorum)."""
        if isinstance(request, dq.DescribeQuorumRequest):
            return self.describe_quorum(request)
        asked = getattr(request, "cluster_id", None)
        if asked is not None and self.cluster_id is not None and asked != self.cluster_id:
            return wire.error_to_wire(
                request,
                ErrorCode.INCONSISTENT_CLUSTER_ID,
                f"cluster id {asked!r} is not this quorum's {self.cluster_id!r}",
            )
        try:
            msg = wire.request_from_wire(request)
        except KafkaError as exc:
            return wire.error_to_wire(request, exc.code, str(exc))
        pending = _Pending(msg)
        key = (msg.sender, wire.RESPONSE_FOR[type(msg)])
        self._pending.setdefault(key, []).append(pending)
        try:
            await self._send_in.send(("step", msg))
            # The core answers a parked Fetch within fetch_max_wait_ms; give it that plus the
            # request timeout before answering REQUEST_TIMED_OUT ourselves.
            wait_s = (self.config.fetch_max_wait_ms + self.config.request_timeout_ms) / 1000
            with trio.move_on_after(wait_s):
                await pending.done.wait()
        finally:
            queue = self._pending.get(key)
            if queue is not None and pending in queue:
                queue.remove(pending)
                if not queue:
                    del self._pending[key]
        if pending.response is None:
            return wire.error_to_wire(
                request, ErrorCode.REQUEST_TIMED_OUT, f"node {self.config.node_id} did not answer"
            )
        return wire.response_to_wire(pending.response)  # type: ignore[arg-type]

    def describe_quorum(self, request: Request | None = None) -> dq.DescribeQuorumResponse:
        """KIP-595/836's DescribeQuorum as the leader sees it; other nodes answer
        NOT_LEADER_OR_FOLLOWER naming the leader they know."""
        if isinstance(request, dq.DescribeQuorumRequest):
            named = [
                (t.topic_name, p.partition_index) for t in request.topics for p in t.partitions
            ]
            if named != [(wire.METADATA_TOPIC, wire.METADATA_PARTITION)]:
                shown = ", ".join(f"{t}-{p}" for t, p in named) or "none"
                return dq.DescribeQuorumResponse(
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message=f"DescribeQuorumRequest must name exactly "
                    f"{wire.METADATA_TOPIC}-{wire.METADATA_PARTITION}; it named {shown}",
                )
        core = self._core
        if core is None or core.role is not Role.LEADER:
            part = dq.DescribeQuorumPartitionResponse(
                partition_index=wire.METADATA_PARTITION,
                error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
                leader_id=core.leader_id if core else -1,
                leader_epoch=core.epoch if core else -1,
                error_message=f"node {self.config.node_id} is not the quorum leader "
                f"(leader: {core.leader_id if core else -1})",
            )
        else:
            now = self._wall()
            me = self.config.node_id
            voters = []
            for vid in sorted(self.config.voters):
                if vid == me:
                    voters.append(
                        dq.QuorumReplicaState(
                            replica_id=me,
                            log_end_offset=self.store.end_offset,
                            last_fetch_timestamp=now,
                            last_caught_up_timestamp=now,
                        )
                    )
                else:
                    voters.append(self._replica_state(vid))
            observers = tuple(
                self._replica_state(rid)
                for rid in sorted(self._replicas)
                if rid not in self.config.voters
            )
            part = dq.DescribeQuorumPartitionResponse(
                partition_index=wire.METADATA_PARTITION,
                error_code=ErrorCode.NONE,
                leader_id=core.leader_id,
                leader_epoch=core.epoch,
                high_watermark=core.high_watermark,
                current_voters=tuple(voters),
                observers=observers,
            )
        return dq.DescribeQuorumResponse(
            topics=(
                dq.DescribeQuorumTopicResponse(topic_name=wire.METADATA_TOPIC, partitions=(part,)),
            ),
            nodes=self.voter_endpoints,
        )

    # --- the loop ------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        state = await trio.to_thread.run_sync(self.quorum_store.read)
        self._core = RaftCore(
            self.config, self.store, self._rng, state or QuorumStateData(), self._clock()
        )
        self.applied_offset = self.store.start_offset
        self.metrics.bind(self, self)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self.started.set()
                task_status.started()
                await self._loop()
        finally:
            self.metrics.unbind(self)
            self._fail_all_waiters("the raft driver stopped")

    async def _loop(self) -> None:
        core = self.core
        while True:
            deadline = await self._drain_ready()
            # Sleep until something arrives or the next deadline (no deadline: until input).
            if deadline is None:
                timeout_s = math.inf
            else:
                timeout_s = max(0, deadline - self._clock()) / 1000
            with trio.move_on_after(timeout_s):
                item = await self._inbox.receive()
                self._take(item)
                # Feed everything already queued before the next Ready (batching).
                while True:
                    try:
                        item = self._inbox.receive_nowait()
                    except trio.WouldBlock:
                        break
                    self._take(item)
            core.tick(self._clock())

    def _take(self, item: tuple[str, Any]) -> None:
        core = self.core
        kind, value = item
        now = self._clock()
        if kind == "step":
            if isinstance(value, cm.FetchRequest) and core.role is Role.LEADER:
                self._note_fetch(value)
            core.step(value, now)
        elif kind == "propose":
            records, reply = value
            result = core.propose(records, now)
            if result.error != ErrorCode.NONE:
                reply.send_nowait(
                    NotLeaderError(
                        result.message
                        or f"node {self.config.node_id} is not the leader "
                        f"(leader: {result.leader_id}, epoch {result.epoch})",
                        leader_id=result.leader_id,
                        epoch=result.epoch,
                    )
                )
            else:
                waiter = Proposal(result.epoch, result.last_offset, accepted_at=trio.current_time())
                self._waiters.append(waiter)
                reply.send_nowait(waiter)
        elif kind == "call":
            fn, reply = value
            try:
                reply.send_nowait((True, fn(core)))
            except (ValueError, KafkaError, OSError) as exc:
                reply.send_nowait((False, exc))
        elif kind == "failed":
            to, msg = value
            core.on_request_failed(to, msg, now)
        elif kind == "resign":
            if core.role is Role.LEADER:
                core.resign(now)
        else:  # pragma: no cover - internal
            raise AssertionError(f"unknown inbox item {kind!r}")

    async def _drain_ready(self) -> int | None:
        """Apply Readies until an empty one; returns its next deadline (core ms)."""
        core = self.core
        while True:
            ready = core.ready()
            if not ready.is_empty:
                await self._apply(ready)
            core.advance(ready)
            if ready.is_empty:
                self._note_view()
                return ready.next_deadline_ms

    async def _apply(self, ready: Ready) -> None:
        # (1) + (2): persist, in a worker thread, before anything is sent.
        if ready.quorum_state is not None:
            await trio.to_thread.run_sync(self.quorum_store.write, ready.quorum_state)
        if ready.must_flush:
            await trio.to_thread.run_sync(self.store.flush)
        # (3) send: answers resolve waiting wire requests, requests go out as tasks.
        for to, msg in ready.messages:
            if isinstance(msg, wire.CORE_REQUEST_TYPES):
                assert self._nursery is not None
                self._nursery.start_soon(self._send_request, to, msg)
            else:
                self._answer(to, msg)
        # (4) apply: snapshot first, then committed entries in offset order.
        if ready.snapshot is not None and self._snapshot_listeners:
            data = await trio.to_thread.run_sync(self.store.read_snapshot, ready.snapshot)
            for on_snapshot in self._snapshot_listeners:
                await on_snapshot(ready.snapshot, data)
        if ready.snapshot is not None:
            self.applied_offset = max(self.applied_offset, ready.snapshot.end_offset)
        if ready.committed:
            records = [e for e in ready.committed if e.data]
            if records:
                for on_committed in self._commit_listeners:
                    await on_committed(records)
            self.applied_offset = ready.committed[-1].offset + 1
            self._complete_waiters(ready.committed)
        for abandoned in ready.abandoned:
            self._fail_abandoned(abandoned)

    def _answer(self, to: int, msg: cm.Message) -> None:
        queue = self._pending.get((to, type(msg)))
        if not queue:
            return  # the asker gave up (timed out) already
        for pending in queue:
            if pending.response is None and _echo_matches(pending.request, msg):
                pending.response = msg
                pending.done.set()
                queue.remove(pending)
                return

    async def _send_request(self, to: int, msg: wire.CoreRequest) -> None:
        request = wire.request_to_wire(msg, to_node=to, cluster_id=self.cluster_id)
        timeout_s = self.config.request_timeout_ms / 1000
        if isinstance(msg, cm.FetchRequest):
            timeout_s += self.config.fetch_max_wait_ms / 1000
        try:
            response = await self.transport.send(to, request, timeout_s=timeout_s)
            answer = wire.response_to_core(msg, to, response)
        except (
            KafkaError,
            ProtocolError,
            OSError,
            trio.TooSlowError,
            wire.WireResponseError,
        ) as exc:
            # The core resends on its own timers (request timeout, election timeout); an
            # observer looks for the leader again after retry_backoff_ms.
            log.debug("raft request failed", to=to, error=str(exc))
            await self._send_in.send(("failed", (to, msg)))
            return
        await self._send_in.send(("step", answer))

    # --- proposals -------------------------------------------------------------------------
    def _complete_waiters(self, committed: Sequence[Entry]) -> None:
        last = committed[-1].offset
        epoch_at = {e.offset: e.epoch for e in committed}
        keep: list[Proposal] = []
        now = trio.current_time()
        for waiter in self._waiters:
            if waiter.last_offset > last:
                keep.append(waiter)
                continue
            got = epoch_at.get(waiter.last_offset)
            if got is not None and got != waiter.epoch:
                waiter.error = NotLeaderError(
                    f"offset {waiter.last_offset} committed in epoch {got}, not the proposal's "
                    f"epoch {waiter.epoch}: another leader's entry replaced it",
                    leader_id=self.core.leader_id,
                    epoch=self.core.epoch,
                )
            else:
                self.metrics.observe_commit((now - waiter.accepted_at) * 1000)
            waiter.done.set()
        self._waiters = keep

    def _fail_abandoned(self, abandoned: AbandonedProposals) -> None:
        keep: list[Proposal] = []
        for waiter in self._waiters:
            if (
                waiter.epoch == abandoned.epoch
                and abandoned.first_offset <= waiter.last_offset <= abandoned.last_offset
            ):
                waiter.error = NotLeaderError(
                    f"proposal at offset {waiter.last_offset} abandoned: node "
                    f"{self.config.node_id} stopped leading epoch {abandoned.epoch}",
                    leader_id=self.core.leader_id,
                    epoch=self.core.epoch,
                )
                waiter.done.set()
            else:
                keep.append(waiter)
        self._waiters = keep

    def _fail_all_waiters(self, why: str) -> None:
        leader = self._core.leader_id if self._core is not None else -1
        for waiter in self._waiters:
            waiter.error = NotLeaderError(why, leader_id=leader, epoch=waiter.epoch)
            waiter.done.set()
        self._waiters = []

    # --- DescribeQuorum bookkeeping ---------------------------------------------------------
    def _note_view(self) -> None:
        core = self.core
        view = (core.role, core.epoch, core.leader_id)
        if view != self._last_view:
            stale = [
                w for w in self._waiters if core.role is not Role.LEADER or w.epoch != core.epoch
            ]
            if stale:
                # As KRaft's QuorumController on renounce: pending writes fail at once (they
                # may still commit under the next leader; the caller retries against it).
                for waiter in stale:
                    waiter.error = NotLeaderError(
                        f"node {self.config.node_id} is no longer the leader of epoch "
                        f"{waiter.epoch} (now {core.role.value} in epoch {core.epoch}, "
                        f"leader {core.leader_id})",
                        leader_id=core.leader_id,
                        epoch=core.epoch,
                    )
                    waiter.done.set()
                gone = {id(w) for w in stale}
                self._waiters = [w for w in self._waiters if id(w) not in gone]
            last_leader = self._last_view[1:] if self._last_view is not None else None
            if core.leader_id >= 0 and (core.epoch, core.leader_id) != last_leader:
                self.metrics.leader_changes.inc()
            if self._last_view is not None:
                log.info(
                    "raft role changed",
                    node_id=self.config.node_id,
                    raft_role=core.role.value,
                    epoch=core.epoch,
                    leader_id=core.leader_id,
                )
            self._last_view = view
            self.role_changed.set()
            self.role_changed = trio.Event()

    def _note_fetch(self, req: cm.FetchRequest) -> None:
        """Kafka's ReplicaState.updateFollowerState: caught up when the fetch reached the
        leader's end, or reached the end the leader had at this replica's previous fetch."""
        core = self.core
        if self._replicas_epoch != core.epoch:
            self._replicas = {}
            self._replicas_epoch = core.epoch
        now = self._wall()
        state = self._replicas.setdefault(req.sender, ReplicaState())
        leader_end = self.store.end_offset
        if req.fetch_offset >= leader_end:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now)
        elif req.fetch_offset >= state.last_fetch_leader_end >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = req.fetch_offset
        state.last_fetch_ms = now
        state.last_fetch_leader_end = leader_end

    def _replica_state(self, replica_id: int) -> dq.QuorumReplicaState:
        state = (
            self._replicas.get(replica_id) if self._replicas_epoch == self.core.epoch else None
        ) or ReplicaState()
        return dq.QuorumReplicaState(
            replica_id=replica_id,
            log_end_offset=state.log_end_offset,
            last_fetch_timestamp=state.last_fetch_ms,
            last_caught_up_timestamp=state.last_caught_up_ms,
        )
