"""The single-writer controller event loop: the only trio code of the controller.

Like Kafka's KafkaEventQueue, one task takes events from a queue one at a time and runs the
pure operation on the current state. Writes are pipelined as in KRaft's QuorumController:
the event's records are appended to the MetadataLog (`append` returns once they have an
offset) and replayed into the state at once (`ControllerState.replay_pending`: the next
operation sees them, so two CreateTopics for the same name can never both succeed), and the
loop takes the next event while they commit. The event's completion - `wait_committed`, the
commit hooks, the state-change log, the answer - goes to a purgatory task that completes
events strictly in offset order (`max_pending` of them at most: the loop waits when it is
full, so memory stays bounded).

Reads: an event without records (a read-only request, or a write that changed nothing) was
computed on a state that may hold uncommitted records, so it waits for the highest pending
offset before it is answered (KRaft's "a read waits for the highest pending offset"); with
nothing pending it is answered at once. An operation that raises KafkaError is answered at
once, as KRaft does.

Commit failures: when `wait_committed` raises (Raft: NOT_CONTROLLER, the leadership was
lost), that event and every later pending one fail with NOT_CONTROLLER, the state reverts to
its committed image (`ControllerState.revert`), and the driver stops writing: every later
event gets NOT_CONTROLLER (the Raft service ends the term and starts a new driver next term).
Logs whose append commits (ZooKeeper, the standalone LocalMetadataLog) deliver the records to
`handle_committed` during the append: such an event is completed inline, as before.

Deadlines: each event has one (the request's timeout_ms, else `default_timeout_s`). A caller
stops waiting at its deadline and gets REQUEST_TIMED_OUT; an event still queued at its deadline
is dropped without running. An event already running is always finished (appended and
replayed; answered at its commit or failure): abandoning it half-way could let the next
operation run on a state missing records that will commit anyway.

Standbys (Raft mode) and a restarted controller build their state from the log's listener
(`handle_committed`, or the Raft service's own listener); on the active one the committed
records it replayed at append time only move `committed_image` (they are compared, by offset,
with what was appended there).

Propagation (ZK mode): hooks registered with `on_commit=` / `add_commit_hook` are called with
the images before and after each event whose records committed (both taken at append time),
in offset order and before the caller is answered (the ZK controller turns them into
LeaderAndIsr / UpdateMetadata / StopReplica with `controller.propagation.plan_propagation`). A
hook is synchronous and must not block; an exception in one is logged and changes nothing
else.

Standalone wiring (deploy), in this order:

    log = LocalMetadataLog(metadata_log_dir)
    driver = ControllerDriver(log, ControllerState(MetadataImage.empty(cluster_id)), ctx)
    log.add_listener(driver.handle_committed)
    log.add_listener(broker_metadata_publisher)     # the broker's image, by replay too
    await log.open()                                # replays the whole log to both
    await nursery.start(driver.run)
    await driver.register_broker(RegisterBroker(node_id, incarnation_id, endpoints, rack))
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from typing import Any

import structlog
import trio

from controller.brokers import RegisterBroker, RegisterBrokerResponse
from controller.context import ControllerContext
from controller.log_events import broker_failures, event_type, leader_elections
from controller.metrics import (
    ControllerMetrics,
    ControllerStateName,
    default_metrics,
    state_for_request,
)
from controller.operations import failed_response, operation_for
from controller.ports import MetadataLog
from controller.result import ControllerResult
from controller.state import ControllerState
from controller.state_machines import StateChange
from protocol.errors import ErrorCode, KafkaError
from protocol.metadata.image import MetadataImage, MetadataReplayError
from protocol.metadata.records import LeaderRecoveryState, MetadataRecord, PartitionChangeRecord
from protocol.telemetry import QUIET_CONTROLLER_EVENTS

log = structlog.get_logger("controller")
state_change_log = structlog.get_logger("controller.state_change")
"""Kafka's state.change.logger."""

CommitHook = Callable[[MetadataImage, MetadataImage], None]
"""`hook(before, after)`: the controller's images around one event's committed records."""

MAX_PENDING_DEFAULT = 256
"""Events appended (or reads waiting) but not answered yet, at most: the pipeline's bound."""


class _Event:
    __slots__ = (
        "abandoned",
        "deadline",
        "done",
        "enqueued_at",
        "records",
        "request",
        "response",
        "started_at",
    )

    def __init__(self, request: object, deadline: float, now: float) -> None:
        self.request = request
        self.deadline = deadline
        self.enqueued_at = now
        self.started_at: float | None = None
        """When the loop took it from the queue (None: it never was)."""
        self.records = 0
        self.done = trio.Event()
        self.response: Any = None
        self.abandoned = False

    def finish(self, response: Any) -> None:
        if not self.done.is_set():
            self.response = response
            self.done.set()
            _log_processed(self)

    def fail(self, code: ErrorCode, message: str) -> None:
        self.finish(failed_response(self.request, code, message))


class _Completion:
    """An event whose records were appended (or a read), waiting in the purgatory."""

    __slots__ = (
        "after",
        "before",
        "event",
        "hooks_before",
        "offset",
        "partial",
        "result",
        "started",
        "timer",
    )

    def __init__(
        self,
        event: _Event,
        offset: int,
        result: Any,
        before: MetadataImage,
        after: MetadataImage,
        started: float,
        timer: ControllerStateName | None,
        *,
        hooks_before: MetadataImage | None = None,
        partial: bool = False,
    ) -> None:
        self.event = event
        self.offset = offset
        """The offset to wait for: the event's last record, or the highest pending one."""
        self.result = result
        self.before = before
        self.after = after
        self.started = started
        self.timer = timer
        self.hooks_before = before if hooks_before is None else hooks_before
        """The image the commit hooks compare `after` with: `before`, or for a batch of a
        non-atomic result the image after the previous batch."""
        self.partial = partial
        """A batch of a non-atomic result before its last: its commit runs the hooks only
        (propagation follows the batches); the event is answered by the last one."""


class ControllerDriver:
    """Runs controller operations one at a time against a MetadataLog.

    Start `run` in a nursery (`await nursery.start(driver.run)`), register
    `handle_committed` as a listener of the log, then `submit` requests from any task.
    """

    def __init__(
        self,
        log: MetadataLog,
        state: ControllerState | None = None,
        ctx: ControllerContext | None = None,
        *,
        default_timeout_s: float = 30.0,
        queue_capacity: int = 1024,
        max_pending: int = MAX_PENDING_DEFAULT,
        metrics: ControllerMetrics | None = None,
        on_commit: CommitHook | None = None,
    ) -> None:
        self._log = log
        self._state = state if state is not None else ControllerState()
        self._ctx = ctx if ctx is not None else ControllerContext()
        self._default_timeout_s = default_timeout_s
        self._metrics = metrics if metrics is not None else default_metrics()
        self._send, self._receive = trio.open_memory_channel[_Event](queue_capacity)
        # Bounded by `max_pending` before an event runs (`_wait_for_room`), not here.
        self._to_purgatory, self._purgatory = trio.open_memory_channel[_Completion](math.inf)
        self._max_pending = max(1, max_pending)
        self._room = trio.Event()
        self._in_purgatory: list[_Completion] = []
        """Handed to the purgatory, not answered yet (failed together on a commit failure)."""
        self._highest_pending = -1
        self._failure: str | None = None
        """Set once a commit failed: the driver writes nothing more."""
        self._running = False
        self._closed = False
        self._commit_hooks: list[CommitHook] = [] if on_commit is None else [on_commit]
        self._excluded_topic_ids: Callable[[], Collection[str]] = (
            self._ctx.topics_queued_for_deletion
        )

    def set_excluded_topics(self, topic_ids: Callable[[], Collection[str]]) -> None:
        """Topics left out of the OfflinePartitionsCount and PreferredReplicaImbalanceCount
        gauges (by default the context's `topics_queued_for_deletion`)."""
        self._excluded_topic_ids = topic_ids
        self._metrics.set_excluded_topics(self, topic_ids)

    def add_commit_hook(self, hook: CommitHook) -> None:
        """Call `hook(before, after)` after every event whose records committed."""
        self._commit_hooks.append(hook)

    @property
    def state(self) -> ControllerState:
        return self._state

    @property
    def context(self) -> ControllerContext:
        return self._ctx

    @property
    def pending(self) -> int:
        """Events appended (or reads) waiting in the purgatory for their commit."""
        return len(self._in_purgatory)

    async def handle_committed(self, batch: Sequence[tuple[int, MetadataRecord]]) -> None:
        """Log listener: replay committed `(offset, record)` pairs not replayed yet."""
        self._state.replay(batch)

    def _timeout_for(self, request: object, timeout_s: float | None) -> float:
        if timeout_s is not None:
            return timeout_s
        timeout_ms = getattr(request, "timeout_ms", 0)
        if isinstance(timeout_ms, int) and timeout_ms > 0:
            return timeout_ms / 1000
        return self._default_timeout_s

    async def submit(self, request: object, *, timeout_s: float | None = None) -> Any:
        """Run `request` (any type in `operations.OPERATIONS`: CreateTopicsRequest,
        DeleteTopicsRequest, IncrementalAlterConfigsRequest, DescribeConfigsRequest,
        RegisterBroker, BrokerChange, ControlledShutdownRequest, AlterPartitionRequest,
        ElectLeaders, AutoLeaderRebalance) and return its response once its
        records are committed. Failures come back as error codes in the response, never as
        exceptions; a request type the controller does not handle raises TypeError."""
        operation_for(request)
        if self._closed:
            return failed_response(
                request, ErrorCode.NOT_CONTROLLER, "the controller is not running"
            )
        now = trio.current_time()
        event = _Event(request, now + self._timeout_for(request, timeout_s), now)
        with trio.move_on_at(event.deadline):
            self._metrics.event_queue_size.inc()
            try:
                await self._send.send(event)
            except BaseException:
                self._metrics.event_queue_size.dec()
                raise
            await event.done.wait()
            return event.response
        event.abandoned = True
        return failed_response(
            request,
            ErrorCode.REQUEST_TIMED_OUT,
            f"the controller did not complete the request within "
            f"{self._timeout_for(request, timeout_s):g} s",
        )

    async def register_broker(
        self, request: RegisterBroker, *, timeout_s: float | None = None
    ) -> RegisterBrokerResponse:
        """Register (and in standalone mode unfence) a broker; raises KafkaError on failure."""
        response: RegisterBrokerResponse = await self.submit(request, timeout_s=timeout_s)
        if response.error_code:
            raise KafkaError(ErrorCode.from_wire(response.error_code), response.error_message or "")
        return response

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the queue until cancelled; pending requests then get NOT_CONTROLLER."""
        if self._running:
            raise RuntimeError("ControllerDriver.run is already running")
        self._running = True
        current: _Event | None = None
        # The KafkaController gauges follow the running driver (a new term binds its own).
        self._metrics.bind(self, lambda: self._state.image, self._excluded_topic_ids)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._complete_in_order)
                task_status.started()
                async for event in self._receive:
                    current = event
                    self._metrics.event_queue_size.dec()
                    now = trio.current_time()
                    event.started_at = now
                    self._metrics.event_queue_time_ms.observe((now - event.enqueued_at) * 1000)
                    if event.abandoned or now >= event.deadline:
                        event.fail(
                            ErrorCode.REQUEST_TIMED_OUT,
                            "the request waited in the controller queue past its deadline",
                        )
                        continue
                    await self._process(event)
                    self._metrics.event_queue_processing_time_ms.observe(
                        (trio.current_time() - now) * 1000
                    )
                    current = None
        finally:
            self._metrics.unbind(self)
            self._closed = True
            if current is not None:
                current.fail(ErrorCode.NOT_CONTROLLER, "the controller stopped")
            self._fail_pending("the controller stopped")
            while True:
                try:
                    pending = self._receive.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
                self._metrics.event_queue_size.dec()
                pending.fail(ErrorCode.NOT_CONTROLLER, "the controller stopped")

    async def _process(self, event: _Event) -> None:
        # Kafka's ControllerStats: each event type (ControllerEvent.state) has its own
        # rate-and-time timer (from the start of its run to its answer); BrokerChange's is
        # LeaderElectionRateAndTimeMs.
        timer = state_for_request(event.request)
        while len(self._in_purgatory) >= self._max_pending:
            await self._room.wait()  # the pipeline is full: wait for a commit
        started = trio.current_time()
        completion = await self._run_event(event, started, timer)
        if completion is None:
            self._observe(timer, started)
        else:
            await self._hand_over(completion)

    async def _hand_over(self, completion: _Completion) -> None:
        """Finish `completion` now if nothing is left to wait for, else queue it in the
        purgatory (in offset order)."""
        if completion.offset < 0 or (
            not self._in_purgatory and self._state.committed_offset >= completion.offset
        ):
            # Nothing to wait for (a read with nothing pending, or a log whose append
            # committed and delivered the records already): answer inline.
            await self._log.wait_committed(completion.offset)
            self._finish(completion)
        else:
            self._in_purgatory.append(completion)
            self._highest_pending = max(self._highest_pending, completion.offset)
            await self._to_purgatory.send(completion)

    async def _run_event(
        self, event: _Event, started: float, timer: ControllerStateName | None
    ) -> _Completion | None:
        """Run the operation and append its records; None when the event was answered."""
        request = event.request
        if self._failure is not None:
            event.fail(ErrorCode.NOT_CONTROLLER, self._failure)
            return None
        try:
            result = operation_for(request)(self._state, request, self._ctx)
        except KafkaError as exc:
            event.fail(exc.code, exc.message)
            return None
        except Exception as exc:  # a bug in an operation must not take the controller down
            log.exception("controller operation failed", request=type(request).__name__)
            event.fail(ErrorCode.UNKNOWN_SERVER_ERROR, f"controller error: {exc!r}")
            return None
        before = self._state.image
        _log_broker_failures(request, before, result.records)
        if not result.records:
            # A read (or a write that changed nothing) waits for the highest pending offset.
            offset = self._highest_pending if self._in_purgatory else -1
            return _Completion(event, offset, result, before, before, started, timer)
        event.records = len(result.records)
        last_offset = -1
        batches = _batches(result)
        hooks_before = before
        for i, batch in enumerate(batches):
            if last_offset >= 0:
                # A non-atomic result goes out batch by batch: the first ones commit (and
                # reach the brokers) while the later ones are appended.
                await trio.lowlevel.checkpoint()
            appended = await self._append(event, batch, partly=last_offset >= 0)
            if appended is None:
                return None
            last_offset = appended
            if i < len(batches) - 1 and self._commit_hooks:
                # ZK mode: each batch is propagated once committed, not the whole result
                # at its end (Kafka's controller sends the elections before the shrinks).
                after = self._state.image
                await self._hand_over(
                    _Completion(event, appended, result, before, after, started, timer,
                                hooks_before=hooks_before, partial=True)
                )  # fmt: skip
                hooks_before = after
        return _Completion(
            event, last_offset, result, before, self._state.image, started, timer,
            hooks_before=hooks_before,
        )  # fmt: skip

    async def _append(
        self, event: _Event, records: Sequence[MetadataRecord], *, partly: bool
    ) -> int | None:
        """Append and replay `records`; their last offset, or None when the event failed.
        `partly`: earlier batches of the same event are appended already, so a failure now
        is one of a pending write (the state goes back to committed)."""
        try:
            last_offset = await self._log.append(records)
        except Exception as exc:
            # Whatever did commit still reaches the state through the log's listener.
            if isinstance(exc, KafkaError):
                log.warning("metadata append failed", error=str(exc))
                code, message = exc.code, exc.message
            else:
                log.exception("metadata append failed")
                code, message = ErrorCode.UNKNOWN_SERVER_ERROR, f"metadata append failed: {exc!r}"
            if partly and self._failure is None:
                self._commit_failed(code, message)
            event.fail(code, message)
            return None
        if self._failure is not None:
            # An earlier write failed to commit during this append: the state was reverted
            # and these records (if they commit at all) come back through the listener.
            event.fail(ErrorCode.NOT_CONTROLLER, self._failure)
            return None
        try:
            self._state.replay_pending(records, last_offset)
        except MetadataReplayError as exc:
            # State and log disagree: keep no state that might be wrong (Kafka's fatal
            # fault handler); the process supervisor restarts and replays from the log.
            event.fail(ErrorCode.UNKNOWN_SERVER_ERROR, f"metadata replay failed: {exc}")
            raise
        return last_offset

    async def _complete_in_order(self) -> None:
        """The purgatory: answer appended events once their offsets committed, in order."""
        async for completion in self._purgatory:
            if completion not in self._in_purgatory:
                continue  # failed already (an earlier commit failure): nothing to wait for
            try:
                await self._log.wait_committed(completion.offset)
            except Exception as exc:
                code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
                if not isinstance(exc, KafkaError):
                    log.exception("metadata commit failed")
                self._commit_failed(code, str(exc))
                continue
            if completion not in self._in_purgatory:
                continue  # failed meanwhile
            self._in_purgatory.remove(completion)
            self._state.mark_committed(completion.offset)
            self._finish(completion)
            self._wake_room()

    def _commit_failed(self, code: ErrorCode, message: str) -> None:
        """KRaft's renounce: every pending event fails, the state goes back to committed."""
        self._failure = (
            f"a metadata write did not commit ({message}); "
            "this controller writes nothing more until it is active again"
        )
        log.warning(
            "metadata commit failed; reverting to the committed state",
            error=message,
            pending=len(self._in_purgatory),
            committed_offset=self._state.committed_offset,
        )
        if code == ErrorCode.NONE:
            code = ErrorCode.UNKNOWN_SERVER_ERROR
        self._fail_pending(message, code)

    def _fail_pending(self, message: str, code: ErrorCode = ErrorCode.NOT_CONTROLLER) -> None:
        pending, self._in_purgatory = self._in_purgatory, []
        self._wake_room()
        for completion in pending:
            completion.event.fail(code, message)
            if not completion.partial:
                self._observe(completion.timer, completion.started)
        # Also what the running event appended before it failed (a non-atomic result's
        # earlier batches): nothing waits for those.
        self._state.revert()

    def _wake_room(self) -> None:
        self._room.set()
        self._room = trio.Event()

    def _finish(self, completion: _Completion) -> None:
        result, request = completion.result, completion.event.request
        if completion.partial:
            self._run_commit_hooks(completion.hooks_before, completion.after)
            return
        if result.records:
            unclean = sum(
                1
                for r in result.records
                if isinstance(r, PartitionChangeRecord)
                and r.leader_recovery_state == LeaderRecoveryState.RECOVERING
            )
            if unclean:  # only an unclean election sets RECOVERING
                self._metrics.unclean_leader_elections.inc(unclean)
            # Before the hooks: the elections precede their propagation in the log.
            _log_elections(request, completion.before, completion.after, result.records)
            self._run_commit_hooks(completion.hooks_before, completion.after)
        if result.state_changes:
            _log_state_changes(type(request).__name__, result.state_changes)
        completion.event.finish(result.response)
        self._observe(completion.timer, completion.started)

    def _observe(self, timer: ControllerStateName | None, started: float) -> None:
        if timer is not None:
            self._metrics.timer(timer).observe((trio.current_time() - started) * 1000)

    def _run_commit_hooks(self, before: MetadataImage, after: MetadataImage) -> None:
        for hook in self._commit_hooks:
            try:
                hook(before, after)
            except Exception:
                log.exception("controller commit hook failed", hook=repr(hook))

    def queue_length(self) -> int:
        return self._receive.statistics().current_buffer_used


MAX_RECORDS_PER_BATCH = 2_000
"""Records of a non-atomic result appended together at most (KRaft bounds its batches too)."""


def _batches(result: ControllerResult[Any]) -> list[Sequence[MetadataRecord]]:
    records = result.records
    if result.atomic or len(records) <= MAX_RECORDS_PER_BATCH:
        return [records]
    step = MAX_RECORDS_PER_BATCH
    return [records[i : i + step] for i in range(0, len(records), step)]


def _log_processed(event: _Event) -> None:
    """The catalogued "controller event processed" (protocol.telemetry), heartbeats aside."""
    name = event_type(event.request)
    if name in QUIET_CONTROLLER_EVENTS:
        return
    now = trio.current_time()
    started = now if event.started_at is None else event.started_at
    code = getattr(event.response, "error_code", 0) or 0
    log.info(
        "controller event processed",
        event_type=name,
        queue_ms=round((started - event.enqueued_at) * 1000, 3),
        process_ms=round((now - started) * 1000, 3),
        records=event.records,
        error=ErrorCode.from_wire(code).name,
    )


def _log_broker_failures(
    request: object, before: MetadataImage, records: Sequence[MetadataRecord]
) -> None:
    for failure in broker_failures(request, before, records):
        log.info(
            "broker failure detected",
            broker_id=failure.broker_id,
            broker_epoch=failure.broker_epoch,
            reason=failure.reason,
            event_type=event_type(request),
            metadata_mode=failure.metadata_mode,
        )


def _log_elections(
    request: object,
    before: MetadataImage,
    after: MetadataImage,
    records: Sequence[MetadataRecord],
) -> None:
    name = event_type(request)
    for e in leader_elections(request, before, after, records):
        log.info(
            "leader election",
            topic=e.topic,
            partition=e.partition,
            leader=e.leader,
            previous_leader=e.previous_leader,
            leader_epoch=e.leader_epoch,
            isr=list(e.isr),
            cause=e.cause,
            unclean=e.unclean,
            event_type=name,
        )


FAILED_CHANGES_LOGGED = 20
"""At most this many failed state changes are named in one warning."""


def _log_state_changes(trigger: str, changes: Sequence[StateChange]) -> None:
    """Kafka's state-change log: every change at debug (it can be one per partition and
    replica of a broker: tens of thousands), one summary per event at info (counts by
    transition), and the changes that failed (a partition left without a leader) at warning."""
    counts: Counter[str] = Counter()
    failed: list[StateChange] = []
    debug = state_change_log.is_enabled_for(logging.DEBUG)
    for change in changes:
        counts[change.transition] += 1
        if not change.reached:
            failed.append(change)
        if debug:
            state_change_log.debug(
                "state change",
                trigger=trigger,
                what=change.what,
                from_state=change.current.value,
                to_state=change.target.value,
                reached=change.reached,
            )
    state_change_log.info("state changes", trigger=trigger, changes=dict(sorted(counts.items())))
    if failed:
        state_change_log.warning(
            "state changes failed",
            trigger=trigger,
            count=len(failed),
            changes=[f"{c.what} {c.transition}" for c in failed[:FAILED_CHANGES_LOGGED]],
        )
