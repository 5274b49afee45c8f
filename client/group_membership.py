"""Group membership with Kafka's classic protocol (Kafka's AbstractCoordinator): find the
coordinator, join (JoinGroup, then SyncGroup), heartbeat in the background, leave.

What the members share (their metadata, the assignment) is left to a subclass through three
hooks: `_protocols()` (what to join with), `_perform_assignment(...)` (the leader's job) and
`_on_join_prepare` / `_on_join_complete` (before and after a rebalance). The consumer's
subclass is client.consumer_coordinator.ConsumerCoordinator.

A join runs in a task of its own (started by `ensure_active_group`, which waits for it at most
until the caller's deadline) because a JoinGroup is answered only when the whole group has
rejoined: a poll() with a short timeout returns meanwhile and the join goes on.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
import trio

from client.cluster import ClusterClient, backoff_ms, now_ms
from client.coordinator_lookup import (
    COORDINATOR_ERRORS,
    CoordinatorNode,
    find_coordinator,
    send_to_coordinator,
)
from protocol.errors import ErrorCode, KafkaError
from protocol.messages import Request
from protocol.messages.groups import (
    UNKNOWN_GENERATION_ID,
    UNKNOWN_MEMBER_ID,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupProtocol,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupMember,
    LeaveGroupRequest,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)

log = structlog.get_logger("client.group")

__all__ = ["NO_GENERATION", "Generation", "GroupMembership", "MemberState"]

_LEAVE_TIMEOUT_MS = 5000
_JOIN_MARGIN_MS = 5000
"""Kafka waits rebalance.timeout + 5 s for a JoinGroup answer."""


class MemberState(enum.Enum):
    """Kafka's MemberState."""

    UNJOINED = "UNJOINED"
    PREPARING_REBALANCE = "PREPARING_REBALANCE"
    COMPLETING_REBALANCE = "COMPLETING_REBALANCE"
    STABLE = "STABLE"


@dataclass(frozen=True, slots=True)
class Generation:
    generation_id: int = UNKNOWN_GENERATION_ID
    member_id: str = UNKNOWN_MEMBER_ID
    protocol: str | None = None

    @property
    def valid(self) -> bool:
        return self.generation_id >= 0


NO_GENERATION = Generation()


class _Retry(Exception):
    """A join attempt failed in a way that is retried (after `backoff` or at once)."""

    def __init__(self, reason: str, *, backoff: bool = True) -> None:
        super().__init__(reason)
        self.backoff = backoff


class GroupMembership:
    """One member of `group_id`. Start `run_heartbeats` in a nursery; call
    `ensure_active_group` from poll(); `close()` leaves the group."""

    protocol_type = "consumer"

    def __init__(
        self,
        cluster: ClusterClient,
        config: dict[str, Any],
        nursery: trio.Nursery,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self.group_id: str = config["group.id"]
        self._cluster = cluster
        self._nursery = nursery
        self._wake = wake
        """Wakes the consumer's poll() when the group needs it (a rebalance began)."""
        self.session_timeout_ms: int = config["session.timeout.ms"]
        self.rebalance_timeout_ms: int = config["max.poll.interval.ms"]
        self.heartbeat_interval_ms: int = config["heartbeat.interval.ms"]
        self.request_timeout_ms: float = config["request.timeout.ms"]
        self.coordinator: CoordinatorNode | None = None
        self.generation = NO_GENERATION
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self._rejoin_reason = "initial join"
        self._needs_join_prepare = True
        self._join_done: trio.Event | None = None
        """Set when the running join task ends; None while none runs."""
        self._fatal: KafkaError | None = None
        self._lookup_lock = trio.Lock()
        self.last_poll_ms = now_ms()
        self._last_heartbeat_ok_ms = now_ms()
        self._closed = False

    # -- the subclass's part ------------------------------------------------------------------

    def _protocols(self) -> tuple[JoinGroupProtocol, ...]:
        raise NotImplementedError

    async def _perform_assignment(
        self, protocol: str, members: dict[str, bytes]
    ) -> dict[str, bytes]:
        raise NotImplementedError

    async def _on_join_prepare(self, generation: Generation) -> None:
        """Before (re)joining: `generation` is the one being left (invalid if lost)."""

    async def _on_join_complete(self, generation: Generation, assignment: bytes) -> None:
        """After SyncGroup gave this member its assignment."""

    # -- coordinator --------------------------------------------------------------------------

    async def ensure_coordinator(self, deadline_ms: float) -> CoordinatorNode:
        """The coordinator, looked up if unknown (one lookup at a time)."""
        async with self._lookup_lock:
            if self.coordinator is None:
                self.coordinator = await find_coordinator(self._cluster, self.group_id, deadline_ms)
                log.info(
                    "Discovered group coordinator",
                    group=self.group_id,
                    coordinator=self.coordinator.node_id,
                )
            return self.coordinator

    def coordinator_unknown(self, reason: str) -> None:
        """Kafka's markCoordinatorUnknown: look it up again before the next request."""
        if self.coordinator is not None:
            log.info(
                "Group coordinator is unavailable or invalid; will attempt rediscovery",
                group=self.group_id,
                coordinator=self.coordinator.node_id,
                reason=reason,
            )
            self._cluster.drop(self.coordinator.connection_id)
            self.coordinator = None

    async def send(
        self, request: Request, deadline_ms: float, timeout_ms: float | None = None
    ) -> Any:
        """`request` to the coordinator (looked up first if needed). A broken connection marks
        the coordinator unknown and raises (the caller decides whether to retry)."""
        node = await self.ensure_coordinator(deadline_ms)
        try:
            return await send_to_coordinator(self._cluster, node, request, timeout_ms=timeout_ms)
        except KafkaError as exc:
            if exc.code in COORDINATOR_ERRORS:
                self.coordinator_unknown(exc.message)
            raise

    def handle_coordinator_error(self, code: ErrorCode, message: str) -> None:
        if code in COORDINATOR_ERRORS:
            self.coordinator_unknown(message)

    # -- generation ---------------------------------------------------------------------------

    def request_rejoin(self, reason: str) -> None:
        if not self.rejoin_needed:
            log.info("Request joining group", group=self.group_id, reason=reason)
        self.rejoin_needed = True
        self._rejoin_reason = reason
        self._wake()

    def reset_generation(self, reason: str, *, keep_member_id: bool = False) -> None:
        """Kafka's resetStateAndGeneration: the member must join again (as a new member unless
        `keep_member_id`: after ILLEGAL_GENERATION the member id is still known)."""
        member_id = self.generation.member_id if keep_member_id else UNKNOWN_MEMBER_ID
        self.generation = Generation(member_id=member_id)
        self.state = MemberState.UNJOINED
        self.request_rejoin(reason)

    def generation_if_stable(self) -> Generation | None:
        return self.generation if self.state is MemberState.STABLE else None

    @property
    def rebalance_in_progress(self) -> bool:
        return self.state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE)

    # -- joining ------------------------------------------------------------------------------

    async def ensure_active_group(self, deadline_ms: float) -> bool:
        """Start a join when one is needed and wait for it until `deadline_ms`; True when the
        member is in a Stable generation. A fatal join error is raised here."""
        self._raise_fatal()
        if self.rejoin_needed and self._join_done is None:
            self._join_done = trio.Event()
            self._nursery.start_soon(self._join_task, self._join_done)
        done = self._join_done
        if done is not None:
            with trio.move_on_after(max(0.0, deadline_ms - now_ms()) / 1000):
                await done.wait()
        self._raise_fatal()
        return not self.rejoin_needed and self.state is MemberState.STABLE

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            error, self._fatal = self._fatal, None
            raise error

    async def _join_task(self, done: trio.Event) -> None:
        attempt = 0
        try:
            while self.rejoin_needed and not self._closed:
                attempt += 1
                try:
                    await self._join_once()
                    attempt = 0
                except _Retry as retry:
                    log.info("Rejoining group", group=self.group_id, reason=str(retry))
                    if retry.backoff:
                        await trio.sleep(
                            backoff_ms(
                                attempt,
                                self._cluster.retry_backoff_ms,
                                self._cluster.retry_backoff_max_ms,
                            )
                            / 1000
                        )
        except KafkaError as exc:
            log.warning("Joining group failed", group=self.group_id, error=str(exc))
            self._fatal = exc
            self.state = MemberState.UNJOINED
            self.rejoin_needed = True  # the next poll() tries again
        finally:
            self._join_done = None
            done.set()
            self._wake()

    async def _join_once(self) -> None:
        try:
            await self.ensure_coordinator(now_ms() + self.request_timeout_ms)
        except KafkaError as exc:
            if not exc.code.retriable:
                raise
            raise _Retry(f"no coordinator: {exc.message}") from None
        if self._needs_join_prepare:
            # once per rebalance, even if the JoinGroup below has to be retried
            await self._on_join_prepare(self.generation)
            self._needs_join_prepare = False
        self.state = MemberState.PREPARING_REBALANCE
        # rejoin_needed is cleared before the request so that a heartbeat's
        # REBALANCE_IN_PROGRESS arriving meanwhile asks for another round
        self.rejoin_needed = False
        try:
            joined = await self._join_group()
            assignment = await self._sync_group(joined)
        except _Retry:
            self.rejoin_needed = True
            if self.state is not MemberState.UNJOINED:
                self.state = MemberState.UNJOINED
            raise
        if self.rejoin_needed:
            # a rebalance started while we synced: this assignment is already stale
            self.state = MemberState.UNJOINED
            raise _Retry("group rebalanced during SyncGroup", backoff=False)
        self.state = MemberState.STABLE
        self._last_heartbeat_ok_ms = now_ms()
        self._needs_join_prepare = True
        log.info(
            "Successfully synced group",
            group=self.group_id,
            generation=self.generation.generation_id,
            member_id=self.generation.member_id,
            protocol=self.generation.protocol,
        )
        await self._on_join_complete(self.generation, assignment)

    async def _join_group(self) -> JoinGroupResponse:
        request = JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            member_id=self.generation.member_id,
            protocol_type=self.protocol_type,
            protocols=self._protocols(),
            reason=self._rejoin_reason,
        )
        log.info("(Re-)joining group", group=self.group_id, member_id=request.member_id)
        response: JoinGroupResponse = await self._request(
            request, max(self.request_timeout_ms, self.rebalance_timeout_ms + _JOIN_MARGIN_MS)
        )
        code = ErrorCode.from_wire(response.error_code)
        message = response.error_message or code.name
        if code is ErrorCode.NONE:
            self.generation = Generation(
                response.generation_id, response.member_id, response.protocol_name
            )
            self.state = MemberState.COMPLETING_REBALANCE
            return response
        if code is ErrorCode.MEMBER_ID_REQUIRED:
            # KIP-394: the coordinator gave us an id; join again with it at once
            self.generation = Generation(member_id=response.member_id)
            raise _Retry("the coordinator asked to rejoin with a member id", backoff=False)
        self._handle_group_error(code, message, "JoinGroup")
        raise AssertionError("unreachable")

    async def _sync_group(self, joined: JoinGroupResponse) -> bytes:
        assignments: tuple[SyncGroupAssignment, ...] = ()
        if joined.leader == joined.member_id:
            members = {m.member_id: m.metadata for m in joined.members}
            log.info(
                "Performing assignment as the group leader",
                group=self.group_id,
                protocol=joined.protocol_name,
                members=sorted(members),
            )
            try:
                assigned = await self._perform_assignment(joined.protocol_name or "", members)
            except KafkaError as exc:
                if not exc.code.retriable:  # e.g. metadata for the assignment not reachable
                    raise
                raise _Retry(f"assignment failed: {exc.message}") from None
            assignments = tuple(
                SyncGroupAssignment(member_id=m, assignment=a) for m, a in assigned.items()
            )
        request = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation.generation_id,
            member_id=self.generation.member_id,
            assignments=assignments,
            protocol_type=self.protocol_type,
            protocol_name=self.generation.protocol,
        )
        response: SyncGroupResponse = await self._request(request, self.request_timeout_ms)
        code = ErrorCode.from_wire(response.error_code)
        if code is ErrorCode.NONE:
            return response.assignment
        self._handle_group_error(code, response.error_message or code.name, "SyncGroup")
        raise AssertionError("unreachable")

    async def _request(self, request: Request, timeout_ms: float) -> Any:
        try:
            return await self.send(request, now_ms() + timeout_ms, timeout_ms)
        except KafkaError as exc:
            if exc.code.retriable:
                raise _Retry(f"{type(request).__name__} failed: {exc.message}") from None
            raise

    def _handle_group_error(self, code: ErrorCode, message: str, api: str) -> None:
        """Kafka's JoinGroupResponseHandler / SyncGroupResponseHandler: raise _Retry for what
        a rejoin fixes, KafkaError for the rest."""
        what = f"{api} for group {self.group_id!r}: {message}"
        if code is ErrorCode.UNKNOWN_MEMBER_ID:
            self.generation = NO_GENERATION
            raise _Retry(what, backoff=False)
        if code is ErrorCode.ILLEGAL_GENERATION:
            self.generation = Generation(member_id=self.generation.member_id)
            raise _Retry(what, backoff=False)
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            raise _Retry(what, backoff=False)
        if code is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            raise _Retry(what)
        if code in COORDINATOR_ERRORS:
            self.coordinator_unknown(message)
            raise _Retry(what)
        raise KafkaError(code, what)

    # -- heartbeats ---------------------------------------------------------------------------

    async def run_heartbeats(self) -> None:
        """Kafka's HeartbeatThread: a heartbeat every heartbeat.interval.ms while in a
        generation, and leaving the group when poll() was not called within
        max.poll.interval.ms."""
        while not self._closed:
            await trio.sleep(self._next_heartbeat_delay_ms() / 1000)
            if self.state is MemberState.UNJOINED or self.state is MemberState.PREPARING_REBALANCE:
                continue
            if now_ms() - self.last_poll_ms > self.rebalance_timeout_ms:
                log.warning(
                    "consumer poll timeout has expired: the time between calls to poll() was "
                    "longer than max.poll.interval.ms; leaving the group",
                    group=self.group_id,
                    max_poll_interval_ms=self.rebalance_timeout_ms,
                )
                await self.maybe_leave_group("consumer poll timeout has expired.")
                continue
            if now_ms() - self._last_heartbeat_ok_ms > self.session_timeout_ms:
                # Kafka's heartbeat thread: no answer for a whole session, so this coordinator
                # has dropped us or is gone; look it up again (the next answer tells which)
                self._last_heartbeat_ok_ms = now_ms()
                self.coordinator_unknown("session timed out without a heartbeat response")
            await self._heartbeat()

    def _next_heartbeat_delay_ms(self) -> float:
        poll_due = self.last_poll_ms + self.rebalance_timeout_ms - now_ms()
        return max(1.0, min(self.heartbeat_interval_ms, poll_due + 1))

    async def _heartbeat(self) -> None:
        generation = self.generation
        request = HeartbeatRequest(
            group_id=self.group_id,
            generation_id=generation.generation_id,
            member_id=generation.member_id,
        )
        try:
            response: HeartbeatResponse = await self.send(
                request, now_ms() + self.heartbeat_interval_ms, self.request_timeout_ms
            )
        except KafkaError as exc:
            log.info("Heartbeat failed", group=self.group_id, error=exc.message)
            return
        self._last_heartbeat_ok_ms = now_ms()
        code = ErrorCode.from_wire(response.error_code)
        if code is ErrorCode.NONE or generation != self.generation:
            return  # a join replaced the generation meanwhile: the answer is stale
        message = response.error_message or code.name
        log.info("Heartbeat answered with an error", group=self.group_id, error=code.name)
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            if self.state is MemberState.STABLE:
                self.request_rejoin("group is already rebalancing")
        elif code is ErrorCode.UNKNOWN_MEMBER_ID:
            self.reset_generation(f"Heartbeat: {message}")
        elif code is ErrorCode.ILLEGAL_GENERATION:
            self.reset_generation(f"Heartbeat: {message}", keep_member_id=True)
        elif code in COORDINATOR_ERRORS:
            self.coordinator_unknown(message)
        elif code is not ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            log.warning("Heartbeat refused", group=self.group_id, error=message)

    # -- leaving ------------------------------------------------------------------------------

    async def maybe_leave_group(self, reason: str) -> None:
        """Kafka's maybeLeaveGroup: LeaveGroup (best effort) when in a generation, then start
        over as a new member."""
        generation = self.generation
        coordinator = self.coordinator
        if (
            generation.member_id
            and coordinator is not None
            and self.state is not MemberState.UNJOINED
        ):
            log.info(
                "Member sending LeaveGroup request to coordinator",
                group=self.group_id,
                member_id=generation.member_id,
                reason=reason,
            )
            request = LeaveGroupRequest(
                group_id=self.group_id,
                members=(LeaveGroupMember(member_id=generation.member_id, reason=reason),),
            )
            try:
                with trio.move_on_after(_LEAVE_TIMEOUT_MS / 1000):
                    await send_to_coordinator(
                        self._cluster, coordinator, request, timeout_ms=_LEAVE_TIMEOUT_MS
                    )
            except KafkaError as exc:
                log.info("LeaveGroup failed", group=self.group_id, error=exc.message)
        self.generation = NO_GENERATION
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self._rejoin_reason = reason

    async def close(self) -> None:
        await self.maybe_leave_group("the consumer is being closed")
        self._closed = True
