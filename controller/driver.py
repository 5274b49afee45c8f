"""The single-writer controller event loop: the only trio code of the controller.

Like Kafka's KafkaEventQueue, one task takes events from a queue one at a time: it runs the
pure operation on the current state, appends the records to the MetadataLog, waits until they
are committed, replays them and only then answers. Since the next event starts only after that,
every operation sees the effect of every earlier one (two CreateTopics for the same name can
never both succeed).

Deadlines: each event has one (the request's timeout_ms, else `default_timeout_s`). A caller
stops waiting at its deadline and gets REQUEST_TIMED_OUT; an event still queued at its deadline
is dropped without running. An event already running is always finished (appended, committed,
replayed) before the next one starts: abandoning it half-way could let the next operation run on
a state missing records that will commit anyway.

Standbys (Raft mode, later) and a restarted controller build their state from the log's
listener (`handle_committed`); the active one replays its own records right after they commit,
and whichever path comes second skips what was replayed already (by offset).

Propagation (ZK mode): hooks registered with `on_commit=` / `add_commit_hook` are called with
the images before and after each event whose records committed, once they are replayed and
before the caller is answered (the ZK controller turns them into LeaderAndIsr / UpdateMetadata /
StopReplica with `controller.propagation.plan_propagation`). A hook is synchronous and must not
block; an exception in one is logged and changes nothing else.

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
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from typing import Any

import structlog
import trio

from controller.brokers import RegisterBroker, RegisterBrokerResponse
from controller.context import ControllerContext
from controller.metrics import ControllerMetrics, default_metrics, state_for_request
from controller.operations import failed_response, operation_for
from controller.ports import MetadataLog
from controller.state import ControllerState
from controller.state_machines import StateChange
from protocol.errors import ErrorCode, KafkaError
from protocol.metadata.image import MetadataImage, MetadataReplayError
from protocol.metadata.records import LeaderRecoveryState, MetadataRecord, PartitionChangeRecord

log = structlog.get_logger("controller")
state_change_log = structlog.get_logger("controller.state_change")
"""Kafka's state.change.logger."""

CommitHook = Callable[[MetadataImage, MetadataImage], None]
"""`hook(before, after)`: the controller's images around one event's committed records."""


class _Event:
    __slots__ = ("abandoned", "deadline", "done", "enqueued_at", "request", "response")

    def __init__(self, request: object, deadline: float, now: float) -> None:
        self.request = request
        self.deadline = deadline
        self.enqueued_at = now
        self.done = trio.Event()
        self.response: Any = None
        self.abandoned = False

    def finish(self, response: Any) -> None:
        if not self.done.is_set():
            self.response = response
            self.done.set()

    def fail(self, code: ErrorCode, message: str) -> None:
        self.finish(failed_response(self.request, code, message))


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
        metrics: ControllerMetrics | None = None,
        on_commit: CommitHook | None = None,
    ) -> None:
        self._log = log
        self._state = state if state is not None else ControllerState()
        self._ctx = ctx if ctx is not None else ControllerContext()
        self._default_timeout_s = default_timeout_s
        self._metrics = metrics if metrics is not None else default_metrics()
        self._send, self._receive = trio.open_memory_channel[_Event](queue_capacity)
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
            task_status.started()
            async for event in self._receive:
                current = event
                self._metrics.event_queue_size.dec()
                now = trio.current_time()
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
            while True:
                try:
                    pending = self._receive.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
                self._metrics.event_queue_size.dec()
                pending.fail(ErrorCode.NOT_CONTROLLER, "the controller stopped")

    async def _process(self, event: _Event) -> None:
        # Kafka's ControllerStats: each event type (ControllerEvent.state) has its own
        # rate-and-time timer; BrokerChange's is LeaderElectionRateAndTimeMs.
        state = state_for_request(event.request)
        if state is None:
            await self._run_event(event)
            return
        started = trio.current_time()
        try:
            await self._run_event(event)
        finally:
            self._metrics.timer(state).observe((trio.current_time() - started) * 1000)

    async def _run_event(self, event: _Event) -> None:
        request = event.request
        try:
            result = operation_for(request)(self._state, request, self._ctx)
        except KafkaError as exc:
            event.fail(exc.code, exc.message)
            return
        except Exception as exc:  # a bug in an operation must not take the controller down
            log.exception("controller operation failed", request=type(request).__name__)
            event.fail(ErrorCode.UNKNOWN_SERVER_ERROR, f"controller error: {exc!r}")
            return
        if result.records:
            # Before the append: a log listener may replay the records during it.
            before = self._state.image
            try:
                last_offset = await self._log.append(result.records)
                await self._log.wait_committed(last_offset)
                self._state.replay_appended(result.records, last_offset)
            except MetadataReplayError as exc:
                # State and log disagree: keep no state that might be wrong (Kafka's fatal
                # fault handler); the process supervisor restarts and replays from the log.
                event.fail(ErrorCode.UNKNOWN_SERVER_ERROR, f"metadata replay failed: {exc}")
                raise
            except KafkaError as exc:
                log.warning("metadata append failed", error=str(exc))
                event.fail(exc.code, exc.message)
                return
            except Exception as exc:
                # Whatever did commit still reaches the state through the log's listener.
                log.exception("metadata append failed")
                event.fail(ErrorCode.UNKNOWN_SERVER_ERROR, f"metadata append failed: {exc!r}")
                return
            unclean = sum(
                1
                for r in result.records
                if isinstance(r, PartitionChangeRecord)
                and r.leader_recovery_state == LeaderRecoveryState.RECOVERING
            )
            if unclean:  # only an unclean election sets RECOVERING
                self._metrics.unclean_leader_elections.inc(unclean)
            self._run_commit_hooks(before, self._state.image)
        if result.state_changes:
            _log_state_changes(type(request).__name__, result.state_changes)
        event.finish(result.response)

    def _run_commit_hooks(self, before: MetadataImage, after: MetadataImage) -> None:
        for hook in self._commit_hooks:
            try:
                hook(before, after)
            except Exception:
                log.exception("controller commit hook failed", hook=repr(hook))

    def queue_length(self) -> int:
        return self._receive.statistics().current_buffer_used


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
