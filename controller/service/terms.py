"""ControllerService: the controller's term lifecycle, the same in both metadata modes (Kafka's
KafkaController.onControllerFailover / onControllerResignation and QuorumController's
claim / renounce).

It follows a Leadership port (controller.service.leadership; zkstore.leadership and
raft.leadership implement it). When this node is `Elected` in epoch E, a term starts:

1. claim: the backend loads the metadata (ZooKeeper) or commits a record of the new epoch so
   that the replayed state is current (Raft);
2. a `ControllerDriver` (the single-writer event loop) over the term's fenced metadata log and
   the state, with the context the mode gives the term (ZK: the deletion queue; Raft: the
   broker sessions);
3. the mode's term tasks (a `TermMode`: controller.service.zk_mode opens the channels to the
   brokers, watches the broker registry and the deletion markers; controller.service.kraft_mode
   fences brokers whose session expired and writes a NoOp when idle) and, when
   auto.leader.rebalance.enable, the preferred-leader check 5 s after activation and then every
   leader.imbalance.check.interval.seconds.

When it is `Lost` (or elected again, or the backend refuses the term's writes: it was fenced by
a newer controller, which makes this one resign) the term is cancelled: queued and running
requests are answered NOT_CONTROLLER, the term's soft state goes, and state replayed from a log
reverts to what committed. `submit(request)` runs a controller request on the active term or
answers NOT_CONTROLLER naming the controller this node knows.

Log events: `controller active` (node_id, epoch, brokers, topics, partitions, records, load_s
and the backend's load timings), `controller resigned` (epoch, reason, leader_id), `auto leader
rebalance` (elected). The ControllerChangeRateAndTimeMs timer takes both the activation (claim
to serving) and the resignation (until the term stopped), as Kafka's ControllerChange event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import structlog
import trio

from controller.context import ControllerContext
from controller.elect_leaders import AutoLeaderRebalance
from controller.metrics import ControllerMetrics, ControllerStateName, default_metrics
from controller.operations import failed_response
from controller.service.driver import ControllerDriver
from controller.service.leadership import Leadership
from controller.state import ControllerState
from protocol.errors import ErrorCode
from protocol.metadata.image import MetadataImage
from protocol.metadata.leadership import Claim, Elected, Lost

log = structlog.get_logger("controller.service.terms")

REBALANCE_INITIAL_DELAY_S = 5.0
"""Kafka schedules the first auto-rebalance check 5 s after a controller became active."""


class Term:
    """One epoch as the active controller: everything here is dropped when it ends."""

    def __init__(self, epoch: int, fencing_token: int) -> None:
        self.epoch = epoch
        self.fencing_token = fencing_token
        self.scope = trio.CancelScope()
        self.finished = trio.Event()
        self.driver: ControllerDriver | None = None
        """Set once the term serves (claimed, event loop running)."""
        self.nursery: trio.Nursery | None = None
        self.started = trio.current_time()
        """When the term started (the service starts its claim at once)."""
        self.resigning = False
        self.resign_requested = False
        self.replayed = True
        """The state is the one replayed from the log (reverted to what committed at the end);
        False once a claim loaded one for this term."""
        self.mode_state: Any = None
        """What the mode keeps for this term (channels, sessions, the deletion queue)."""

    @property
    def serving(self) -> bool:
        return self.driver is not None and not self.resigning


class TermMode(Protocol):
    """What a metadata mode adds to a term (controller.service.zk_mode, kraft_mode)."""

    def attach(self, service: ControllerService) -> None:
        """Called once by the service it serves, before anything runs."""
        ...

    async def run(self, service: ControllerService, nursery: trio.Nursery) -> None:
        """Tasks of every controller, active or not, for the service's lifetime."""
        ...

    def context(self, term: Term, ctx: ControllerContext, claim: Claim) -> ControllerContext:
        """The term's controller context (the base one plus this term's soft state)."""
        ...

    def on_commit(self, term: Term) -> Callable[[MetadataImage, MetadataImage], None] | None:
        """Called by the driver after each committed write (ZK: propagation to brokers)."""
        ...

    async def start(self, term: Term, driver: ControllerDriver, image: MetadataImage) -> None:
        """Before the driver serves: open the channels to brokers, send the failover plan."""
        ...

    def start_tasks(self, term: Term, driver: ControllerDriver) -> None:
        """Once serving: the term's timers and watches, in `term.nursery`."""
        ...

    async def submit(self, term: Term, driver: ControllerDriver, request: Any) -> Any:
        """Run one request on the active term (most just `driver.submit(request)`)."""
        ...


class ControllerService:
    """`await nursery.start(service.run)`; `submit(request)`; `resign()`."""

    def __init__(
        self,
        leadership: Leadership,
        mode: TermMode,
        ctx: ControllerContext,
        *,
        metrics: ControllerMetrics | None = None,
        rebalance_initial_delay_s: float = REBALANCE_INITIAL_DELAY_S,
        rebalance_interval_s: float | None = None,
    ) -> None:
        self.leadership = leadership
        self.mode = mode
        self.ctx = ctx
        self.metrics = metrics
        self.rebalance_initial_delay_s = rebalance_initial_delay_s
        self.rebalance_interval_s = (
            rebalance_interval_s
            if rebalance_interval_s is not None
            else float(ctx.config.leader_imbalance_check_interval_seconds)
        )
        self.state = ControllerState(MetadataImage.empty(""))
        """The controller state: replayed from the log on every controller (Raft), or loaded
        when a term starts (ZooKeeper)."""
        self._term: Term | None = None
        self._nursery: trio.Nursery | None = None
        self.terms = 0
        """How many terms this node started (for tests and logs)."""
        mode.attach(self)

    # -- what others read ---------------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self.leadership.node_id

    @property
    def term(self) -> Term | None:
        return self._term

    @property
    def is_active(self) -> bool:
        """This node is the controller and serving (state loaded, event loop running)."""
        return self._term is not None and self._term.serving

    @property
    def active_id(self) -> int | None:
        """The active controller as last seen (None when none is known)."""
        return self.leadership.active_id

    @property
    def epoch(self) -> int | None:
        """The epoch of this node's term while active."""
        term = self._term
        return term.epoch if term is not None and term.serving else None

    @property
    def driver(self) -> ControllerDriver | None:
        term = self._term
        return term.driver if term is not None and term.serving else None

    @property
    def term_state(self) -> Any:
        """The mode's state of the serving term (ZK mode: its channels to the brokers, its
        deletion queue), None when not active."""
        term = self._term
        return term.mode_state if term is not None and term.serving else None

    @property
    def image(self) -> MetadataImage | None:
        """The active controller's metadata (None when not active)."""
        driver = self.driver
        return None if driver is None else driver.state.image

    def not_controller_message(self) -> str:
        return self.leadership.not_controller_message()

    async def submit(self, request: Any) -> Any:
        """The active term's answer, or NOT_CONTROLLER naming the controller known here."""
        term = self._term
        driver = term.driver if term is not None and not term.resigning else None
        if term is None or driver is None:
            return self._not_controller(request)
        response = await self.mode.submit(term, driver, request)
        self.check_writes(term)
        if (
            getattr(response, "error_code", 0) == ErrorCode.NOT_CONTROLLER
            and self._term is not term
        ):
            # The term ended while the request waited: say who leads now.
            return self._not_controller(request)
        return response

    def _not_controller(self, request: Any) -> Any:
        return failed_response(request, ErrorCode.NOT_CONTROLLER, self.not_controller_message())

    def controller_metrics(self) -> ControllerMetrics:
        return self.metrics if self.metrics is not None else default_metrics()

    # -- following leadership -----------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Follow the leadership until cancelled (started once the backend's first round)."""
        if self._nursery is not None:
            raise RuntimeError("ControllerService.run is already running")
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.leadership.run)
                nursery.start_soon(self.mode.run, self, nursery)
                task_status.started()
                async for change in self.leadership.changes():
                    if isinstance(change, Elected):
                        await self._end_term("elected again")
                        term = Term(change.epoch, change.fencing_token)
                        self._term = term
                        self.terms += 1
                        nursery.start_soon(self._serve, term, change)
                    elif isinstance(change, Lost):
                        await self._end_term(change.reason)
        finally:
            self._nursery = None
            term, self._term = self._term, None
            if term is not None:
                term.scope.cancel()

    async def _end_term(self, reason: str) -> None:
        term, self._term = self._term, None
        if term is None:
            return
        term.resigning = True
        started = trio.current_time()
        term.scope.cancel()
        await term.finished.wait()
        # Kafka's ControllerChange event (onControllerResignation).
        self.controller_metrics().timer(ControllerStateName.CONTROLLER_CHANGE).observe(
            (trio.current_time() - started) * 1000
        )
        log.info(
            "controller resigned",
            node_id=self.node_id,
            epoch=term.epoch,
            reason=reason,
            leader_id=self.active_id if self.active_id is not None else -1,
        )

    async def _serve(self, term: Term, elected: Elected) -> None:
        try:
            with term.scope:
                await self._activate(term, elected)
        except Exception:
            log.exception("controller failed; resigning", node_id=self.node_id, epoch=term.epoch)
            self.resign_soon(term)
        finally:
            term.driver = None
            if term.replayed:
                # Appended but uncommitted records are this term's guess, not the log's.
                self.state.revert()
            term.finished.set()

    async def _activate(self, term: Term, elected: Elected) -> None:
        """Claim, then serve until the term is cancelled."""
        started = term.started
        claim = await self.leadership.claim(elected)
        if claim is None:
            return
        if claim.image is not None:
            self.state = ControllerState(claim.image)
            term.replayed = False
        state = self.state
        ctx = self.mode.context(term, self.ctx, claim)
        driver = ControllerDriver(
            self.leadership.term_log(),
            state,
            ctx,
            on_commit=self.mode.on_commit(term),
            metrics=self.metrics,
        )
        async with trio.open_nursery() as nursery:
            term.nursery = nursery
            await self.mode.start(term, driver, state.image)
            await nursery.start(driver.run)
            term.driver = driver
            self._log_active(term, claim, started)
            # Kafka's ControllerChange event (onControllerFailover) ends here.
            self.controller_metrics().timer(ControllerStateName.CONTROLLER_CHANGE).observe(
                (trio.current_time() - started) * 1000
            )
            self.mode.start_tasks(term, driver)
            if self.ctx.config.auto_leader_rebalance_enable:
                nursery.start_soon(self._rebalance, term, driver)

    def _log_active(self, term: Term, claim: Claim, started: float) -> None:
        image = self.state.image
        log.info(
            "controller active",
            node_id=self.node_id,
            epoch=term.epoch,
            brokers=sorted(image.cluster.brokers),
            topics=len(image.topics.by_id),
            partitions=sum(len(t.partitions) for t in image.topics.by_id.values()),
            records=claim.records if claim.records >= 0 else image.provenance.last_offset + 1,
            **{k: round(v, 3) for k, v in claim.timings.items()},
            load_s=round(trio.current_time() - started, 3),
        )

    async def _rebalance(self, term: Term, driver: ControllerDriver) -> None:
        await trio.sleep(self.rebalance_initial_delay_s)
        while True:
            response = await driver.submit(AutoLeaderRebalance())
            if self.check_writes(term):
                return
            moved = [
                (r.topic, p.partition_id)
                for r in response.replica_election_results
                for p in r.partition_result
                if p.error_code == 0
            ]
            if moved:
                log.info("auto leader rebalance", elected=moved)
            await trio.sleep(self.rebalance_interval_s)

    # -- resigning ----------------------------------------------------------------------------

    async def resign(self) -> None:
        """Give up the controllership (the others elect again)."""
        await self.leadership.resign()

    def check_writes(self, term: Term) -> bool:
        """True (and resigning) when the backend refuses this term's writes: fenced by a newer
        controller, or ZooKeeper left half-written."""
        failure = self.leadership.writes_refused()
        if failure is None or term is not self._term:
            return failure is not None
        if not term.resign_requested:
            log.warning(
                "controller writes refused; resigning",
                node_id=self.node_id,
                epoch=term.epoch,
                error=str(failure),
            )
            self.resign_soon(term)
        return True

    def resign_soon(self, term: Term) -> None:
        if term.resign_requested:
            return
        term.resign_requested = term.resigning = True
        if self._nursery is not None and term is self._term:
            self._nursery.start_soon(self._resign_quietly)

    async def _resign_quietly(self) -> None:
        try:
            await self.leadership.resign()
        except Exception as exc:
            # Not connected: the session's end removes /controller anyway.
            log.warning("controller resignation failed", error=repr(exc))


__all__ = ["REBALANCE_INITIAL_DELAY_S", "ControllerService", "Term", "TermMode"]
