"""RaftControllerService: KRaft's QuorumController in a controller process (Raft mode).

The counterpart of deploy.node.zk_controller.ZkControllerService, on the Raft quorum:

- Every controller, active or standby, keeps one `ControllerState` replayed from what the
  quorum committed (raft.metadata_log.RaftMetadataLog's listener); a snapshot the RaftDriver
  loads (at start-up, or a standby behind the leader's log start) replaces it:
  `ControllerState(image_from_snapshot(...))`, and the tail is replayed on top.
- When the RaftDriver becomes leader in epoch E, a term starts: propose a NoOpRecord and wait
  until it is applied (everything committed before it is then in the state, KRaft's
  "claim"), then `ClusterControl.activate` (every registered broker gets a fresh session), a
  `ControllerDriver(RaftMetadataLog, state, ctx)` - writes are pipelined: replayed into the
  state once appended, answered once committed (controller.driver) - and the term's tasks: `FenceStaleBrokers` at
  `ClusterControl.next_check_time_ms()` (re-checked after every heartbeat or registration), a
  NoOpRecord when nothing was written for metadata.max.idle.interval.ms, and the auto leader
  rebalance when enabled (5 s after activation, then every
  leader.imbalance.check.interval.seconds, as the ZK service).
- Reads: a read-only request (DescribeConfigs, ListPartitionReassignments) sees the appended
  writes before it and is answered only once the highest pending offset committed (the
  driver's purgatory): KRaft's "a read waits for the highest pending offset".
- When leadership is lost (another role, or a new epoch) the term is cancelled: queued and
  pending requests are answered NOT_CONTROLLER, the soft state (broker sessions) is dropped,
  and the state reverts to its committed image (`ControllerState.revert`: appended records
  that commit after all come back through the listener). The committed state stays: it is
  the committed log's, on every controller.
- Snapshots: every controller on its own (KRaft's SnapshotGenerator) writes one once more than
  metadata.log.max.record.bytes.between.snapshots bytes of records were applied since the last
  (`encode_snapshot(state.committed_image)` at the applied end offset, `driver.create_snapshot`, then
  `driver.delete_before_snapshot()`), so a restart loads snapshot + tail.

Log events (JSON at INFO): `controller active` (epoch, records, topics, partitions, load_s),
`controller resigned` (epoch, reason, leader_id), `metadata topics replayed` (offset, created,
deleted: on every controller), `metadata snapshot loaded` / `metadata snapshot written`
(end_offset, ...), `brokers fenced` (broker_ids), `broker registered` (from the app).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import structlog
import trio

from controller.cluster_control import ClusterControl
from controller.config import ControllerConfig as ControllerSettings
from controller.context import ControllerContext
from controller.driver import ControllerDriver
from controller.elect_leaders import AutoLeaderRebalance
from controller.heartbeats import BROKER_SESSION_TIMEOUT_MS_DEFAULT, NEVER
from controller.metrics import ControllerMetrics, ControllerStateName, default_metrics
from controller.operations import failed_response
from controller.raft_lifecycle import FenceStaleBrokers, WriteNoOp
from controller.state import ControllerState
from protocol.errors import ErrorCode
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    UnregisterBrokerRequest,
)
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import (
    NoOpRecord,
    RemoveTopicRecord,
    TopicRecord,
    encode_record,
)
from protocol.metadata.snapshot import encode_snapshot
from raft.core import Role
from raft.driver import NotLeaderError, RaftDriver, monotonic_ms
from raft.metadata_log import CommittedRecords, RaftMetadataLog, not_controller_message

log = structlog.get_logger("deploy.node.raft_controller")

REBALANCE_INITIAL_DELAY_S = 5.0
"""Kafka schedules the first auto-rebalance check 5 s after a controller became active."""
SNAPSHOT_BYTES_DEFAULT = 20 * 1024 * 1024
"""metadata.log.max.record.bytes.between.snapshots (Kafka's default)."""
IDLE_INTERVAL_MS_DEFAULT = 500
"""metadata.max.idle.interval.ms (Kafka's default)."""
NAMES_LOGGED = 20
"""At most this many topic names per `metadata topics replayed` event."""
_CONTACT = (BrokerRegistrationRequest, BrokerHeartbeatRequest, UnregisterBrokerRequest)


class _Term:
    """One epoch as the active controller: everything here is dropped when it ends."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.scope = trio.CancelScope()
        self.finished = trio.Event()
        self.driver: ControllerDriver | None = None
        self.control: ClusterControl | None = None
        self.contact = trio.Event()
        """Set (and replaced) after each broker contact: the fencing task re-checks."""

    def broker_contact(self) -> None:
        self.contact.set()
        self.contact = trio.Event()


class RaftControllerService:
    """`await nursery.start(service.run)` after the RaftDriver runs; `submit(request)`."""

    def __init__(
        self,
        raft: RaftDriver,
        metadata_log: RaftMetadataLog,
        settings: ControllerSettings | None = None,
        *,
        session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS_DEFAULT,
        idle_interval_ms: int = IDLE_INTERVAL_MS_DEFAULT,
        snapshot_max_record_bytes: int = SNAPSHOT_BYTES_DEFAULT,
        cluster_id: str | None = None,
        rebalance_initial_delay_s: float = REBALANCE_INITIAL_DELAY_S,
        clock_ms: Callable[[], int] = monotonic_ms,
        metrics: ControllerMetrics | None = None,
        rng: random.Random | None = None,
        local_broker: tuple[int, str] | None = None,
    ) -> None:
        self._raft = raft
        # Combined mode (deploy.node.combined): (broker id, incarnation id) of the broker in
        # this process. A registration of that id with another incarnation is an earlier run
        # of this very process, so it has no live session (else re-registering after a crash
        # would wait out broker.session.timeout.ms as DUPLICATE_BROKER_REGISTRATION).
        self._local_broker = local_broker
        self._log = metadata_log
        self._settings = settings or ControllerSettings()
        self._session_timeout_ms = session_timeout_ms
        self._idle_interval_ms = idle_interval_ms
        self._snapshot_bytes = snapshot_max_record_bytes
        self._cluster_id = cluster_id
        self._rebalance_initial_delay_s = rebalance_initial_delay_s
        self._clock = clock_ms
        self._metrics = metrics
        self._rng = rng or random.Random()
        self._state = ControllerState(MetadataImage.empty(cluster_id or ""))
        self._term: _Term | None = None
        self._last_write_s = -math.inf
        self._bytes_since_snapshot = 0
        self._snapshot_end = 0
        self._snapshot_due = trio.Event()
        self.terms = 0
        metadata_log.add_listener(self._on_records, self._on_image)

    # -- what others read ---------------------------------------------------------------------

    @property
    def state(self) -> ControllerState:
        """The replayed state (every controller has one)."""
        return self._state

    @property
    def is_active(self) -> bool:
        return self._term is not None and self._term.driver is not None

    @property
    def active_id(self) -> int | None:
        """The Raft leader's id (None when none is known)."""
        leader = self._raft.leader_id if self._raft.started.is_set() else -1
        return leader if leader >= 0 else None

    @property
    def epoch(self) -> int | None:
        """The epoch of this controller's term, None when not active."""
        return self._term.epoch if self.is_active and self._term is not None else None

    @property
    def node_id(self) -> int:
        return self._raft.config.node_id

    def not_controller_message(self) -> str:
        leader = self.active_id
        leading = self._raft.started.is_set() and self._raft.role is Role.LEADER
        return not_controller_message(
            self.node_id, -1 if leader is None else leader, leading=leading
        )

    async def submit(self, request: Any) -> Any:
        """The active controller's answer, or NOT_CONTROLLER naming the leader it knows."""
        term = self._term
        driver = term.driver if term is not None else None
        if term is None or driver is None:
            return failed_response(request, ErrorCode.NOT_CONTROLLER, self.not_controller_message())
        response = await driver.submit(request)
        if isinstance(request, _CONTACT):
            term.broker_contact()
        if response.error_code == ErrorCode.NOT_CONTROLLER and self._term is not term:
            # The term ended while it waited: say who leads now.
            return failed_response(request, ErrorCode.NOT_CONTROLLER, self.not_controller_message())
        return response

    # -- replay (every controller) ------------------------------------------------------------

    async def _on_records(self, committed: CommittedRecords) -> None:
        before = self._state.committed_image
        self._state.replay(committed.records, committed.epoch)
        self._last_write_s = trio.current_time()
        self._bytes_since_snapshot += committed.size_bytes
        if self._bytes_since_snapshot > self._snapshot_bytes:
            self._snapshot_due.set()
        created = [r.record.name for r in committed.records if isinstance(r.record, TopicRecord)]
        deleted = [
            before.topics.by_id[r.record.topic_id].name
            for r in committed.records
            if isinstance(r.record, RemoveTopicRecord) and r.record.topic_id in before.topics.by_id
        ]
        if created or deleted:
            log.info(
                "metadata topics replayed",
                node_id=self.node_id,
                offset=committed.records[-1].offset,
                created=created[:NAMES_LOGGED],
                deleted=deleted[:NAMES_LOGGED],
                created_count=len(created),
                deleted_count=len(deleted),
            )

    async def _on_image(self, image: MetadataImage) -> None:
        term = self._term
        if term is not None and term.driver is not None:
            # An active controller never loads a snapshot (a starting leader may, before its
            # NoOp commits: it reads the state only after); if it did, its driver's state is
            # not the replayed one any more.
            log.warning("metadata snapshot loaded during a term; ending it", epoch=term.epoch)
            term.scope.cancel()
        self._state = ControllerState(image)
        self._bytes_since_snapshot = 0
        self._snapshot_end = image.provenance.last_offset + 1
        log.info(
            "metadata snapshot loaded",
            node_id=self.node_id,
            end_offset=self._snapshot_end,
            epoch=image.provenance.last_epoch,
            topics=len(image.topics.by_name),
            brokers=len(image.cluster.brokers),
        )

    # -- the service --------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._raft.started.wait()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._write_snapshots)
            task_status.started()
            try:
                await self._follow_leadership(nursery)
            finally:
                term, self._term = self._term, None
                if term is not None:
                    term.scope.cancel()

    async def _follow_leadership(self, nursery: trio.Nursery) -> None:
        while True:
            changed = self._raft.role_changed
            leading = self._raft.role is Role.LEADER
            term = self._term
            if term is not None and (not leading or self._raft.epoch != term.epoch):
                await self._end_term(
                    term, "no longer the quorum leader" if not leading else "new epoch"
                )
                continue
            if leading and term is None:
                term = _Term(self._raft.epoch)
                self._term = term
                self.terms += 1
                nursery.start_soon(self._serve, term)
            await changed.wait()

    async def _end_term(self, term: _Term, reason: str) -> None:
        started = trio.current_time()
        self._term = None
        term.scope.cancel()
        await term.finished.wait()
        self._controller_metrics().timer(ControllerStateName.CONTROLLER_CHANGE).observe(
            (trio.current_time() - started) * 1000
        )
        log.info(
            "controller resigned",
            node_id=self.node_id,
            epoch=term.epoch,
            reason=reason,
            leader_id=self._raft.leader_id,
        )

    def _controller_metrics(self) -> ControllerMetrics:
        return self._metrics if self._metrics is not None else default_metrics()

    async def _serve(self, term: _Term) -> None:
        try:
            with term.scope:
                await self._activate(term)
        finally:
            term.driver = None
            term.control = None
            # Appended but uncommitted records are this term's guess, not the log's.
            self._state.revert()
            term.finished.set()

    async def _activate(self, term: _Term) -> None:
        started = trio.current_time()
        try:
            # KRaft's leader claims its epoch with a record of its own; once it is applied the
            # state holds everything committed before this term.
            offset = await self._raft.propose([encode_record(NoOpRecord())])
            await self._log.wait_committed(offset)
        except NotLeaderError as exc:
            log.info("controller not activated", epoch=term.epoch, error=exc.message)
            return
        state = self._state
        control = ClusterControl.activate(
            state.image,
            self._clock(),
            session_timeout_ms=self._session_timeout_ms,
            cluster_id=self._cluster_id,
        )
        if self._local_broker is not None:
            broker_id, incarnation_id = self._local_broker
            registered = state.image.cluster.broker(broker_id)
            if registered is not None and registered.incarnation_id != incarnation_id:
                control.heartbeats.fence(broker_id)
        ctx = ControllerContext(
            config=self._settings, rng=self._rng, cluster_control=control, clock_ms=self._clock
        )
        driver = ControllerDriver(self._log, state, ctx, metrics=self._metrics)
        async with trio.open_nursery() as nursery:
            await nursery.start(driver.run)
            term.driver, term.control = driver, control
            image = state.image
            log.info(
                "controller active",
                node_id=self.node_id,
                epoch=term.epoch,
                records=image.provenance.last_offset + 1,
                brokers=len(image.cluster.brokers),
                topics=len(image.topics.by_name),
                partitions=sum(len(t.partitions) for t in image.topics.by_id.values()),
                load_s=round(trio.current_time() - started, 3),
            )
            nursery.start_soon(self._fence_stale_brokers, term, driver, control)
            if self._idle_interval_ms > 0:
                nursery.start_soon(self._write_noop_when_idle, driver)
            if self._settings.auto_leader_rebalance_enable:
                nursery.start_soon(self._rebalance, driver)

    async def _fence_stale_brokers(
        self, term: _Term, driver: ControllerDriver, control: ClusterControl
    ) -> None:
        """KRaft's periodic fencing: at the earliest session end, re-planned on each contact."""
        while True:
            contact = term.contact
            due_ms = control.next_check_time_ms()
            if due_ms != NEVER and self._clock() > due_ms:
                response = await driver.submit(FenceStaleBrokers())
                if response.broker_ids:
                    log.info("brokers fenced", broker_ids=list(response.broker_ids))
                elif response.error_code:
                    log.warning("fencing stale brokers failed", error=response.error_message)
                    await trio.sleep(self._session_timeout_ms / 1000 / 10)
                continue
            # "Exactly the timeout is still live": wake just after it.
            wake_at = math.inf if due_ms == NEVER else (due_ms + 1) / 1000
            with trio.move_on_at(wake_at):
                await contact.wait()

    async def _write_noop_when_idle(self, driver: ControllerDriver) -> None:
        """KRaft's metadata.max.idle.interval.ms: a NoOpRecord when nothing else was written,
        so followers and brokers see the high watermark move (and stale leaders find out)."""
        idle_s = self._idle_interval_ms / 1000
        while True:
            due = self._last_write_s + idle_s
            if trio.current_time() < due:
                await trio.sleep_until(due)
                continue
            response = await driver.submit(WriteNoOp())
            if response.error_code:
                log.warning("idle no-op not written", error=response.error_message)
                await trio.sleep(idle_s)

    async def _rebalance(self, driver: ControllerDriver) -> None:
        await trio.sleep(self._rebalance_initial_delay_s)
        while True:
            response = await driver.submit(AutoLeaderRebalance())
            moved = [
                (r.topic, p.partition_id)
                for r in response.replica_election_results
                for p in r.partition_result
                if p.error_code == 0
            ]
            if moved:
                log.info("auto leader rebalance", elected=moved)
            await trio.sleep(self._settings.leader_imbalance_check_interval_seconds)

    # -- snapshots (every controller) ---------------------------------------------------------

    async def _write_snapshots(self) -> None:
        while True:
            await self._snapshot_due.wait()
            self._snapshot_due = trio.Event()
            # Only what committed: the active controller's image runs ahead of the log.
            image = self._state.committed_image
            end = image.provenance.last_offset + 1
            if end <= self._snapshot_end:
                continue
            self._bytes_since_snapshot = 0
            data = await trio.to_thread.run_sync(encode_snapshot, image)
            try:
                snapshot_id = await self._raft.create_snapshot(end, data)
                log_start = await self._raft.delete_before_snapshot()
            except ValueError as exc:
                log.warning("metadata snapshot not written", end_offset=end, error=str(exc))
                continue
            self._snapshot_end = end
            log.info(
                "metadata snapshot written",
                node_id=self.node_id,
                end_offset=snapshot_id.end_offset,
                epoch=snapshot_id.epoch,
                bytes=len(data),
                log_start=log_start,
            )
