"""KRaftMode: what a Raft-mode (KRaft) controller adds to the term lifecycle of
controller.service.terms, as Kafka's QuorumController.

- Every controller, active or standby, replays what the quorum committed into the service's
  `ControllerState`; a snapshot the quorum loads (at start-up, or a standby behind the leader's
  log start) replaces it, and the tail is replayed on top.
- A term's context holds the brokers' sessions (`ClusterControl.activate`: every registered broker
  gets a fresh session; in combined mode an earlier run of this very process is fenced at once,
  else re-registering after a crash would wait out broker.session.timeout.ms as
  DUPLICATE_BROKER_REGISTRATION). Its tasks: `FenceStaleBrokers` at
  `ClusterControl.next_check_time_ms()` (re-planned after every heartbeat or registration), and a
  NoOpRecord when nothing was written for metadata.max.idle.interval.ms.
- Snapshots, on every controller on its own (KRaft's SnapshotGenerator): once more than
  metadata.log.max.record.bytes.between.snapshots bytes of records were applied since the last,
  the committed image at the applied end offset, then the log before it is deleted.

Log events: `metadata topics replayed` (offset, created, deleted: on every controller),
`metadata snapshot loaded` / `metadata snapshot written` (end_offset, ...), `brokers fenced`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog
import trio

from controller.cluster_control import ClusterControl
from controller.context import ControllerContext
from controller.heartbeats import NEVER
from controller.raft_lifecycle import FenceStaleBrokers, WriteNoOp
from controller.service.driver import ControllerDriver
from controller.state import ControllerState
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    UnregisterBrokerRequest,
)
from protocol.metadata.image import MetadataImage
from protocol.metadata.leadership import Claim
from protocol.metadata.records import RemoveTopicRecord, TopicRecord
from protocol.metadata.snapshot import encode_snapshot

if TYPE_CHECKING:
    from controller.service.terms import ControllerService, Term

log = structlog.get_logger("controller.service.kraft_mode")

SNAPSHOT_BYTES_DEFAULT = 20 * 1024 * 1024
"""metadata.log.max.record.bytes.between.snapshots (Kafka's default)."""
IDLE_INTERVAL_MS_DEFAULT = 500
"""metadata.max.idle.interval.ms (Kafka's default)."""
NAMES_LOGGED = 20
"""At most this many topic names per `metadata topics replayed` event."""
_CONTACT = (BrokerRegistrationRequest, BrokerHeartbeatRequest, UnregisterBrokerRequest)


class CommittedBatch(Protocol):
    """Records the quorum committed, all of one epoch (raft.metadata_log.CommittedRecords)."""

    records: Any
    epoch: int
    size_bytes: int


class SnapshotId(Protocol):
    end_offset: int
    epoch: int


class MetadataQuorum(Protocol):
    """What KRaftMode needs of the Raft quorum (raft.leadership.RaftLeadership)."""

    def add_listener(
        self,
        on_records: Callable[[Any], Awaitable[None]],
        on_image: Callable[[MetadataImage], Awaitable[None]],
    ) -> None: ...

    async def create_snapshot(self, end_offset: int, data: bytes) -> SnapshotId: ...

    async def delete_before_snapshot(self) -> int: ...


class _Sessions:
    """A term's broker sessions, and the wake-up of its fencing task on each contact."""

    def __init__(self, control: ClusterControl) -> None:
        self.control = control
        self.contact = trio.Event()

    def broker_contact(self) -> None:
        self.contact.set()
        self.contact = trio.Event()


class KRaftMode:
    def __init__(
        self,
        quorum: MetadataQuorum,
        *,
        session_timeout_ms: int,
        clock_ms: Callable[[], int],
        idle_interval_ms: int = IDLE_INTERVAL_MS_DEFAULT,
        snapshot_max_record_bytes: int = SNAPSHOT_BYTES_DEFAULT,
        cluster_id: str | None = None,
        local_broker: tuple[int, str] | None = None,
    ) -> None:
        self.quorum = quorum
        self.session_timeout_ms = session_timeout_ms
        self.clock_ms = clock_ms
        self.idle_interval_ms = idle_interval_ms
        self.snapshot_bytes = snapshot_max_record_bytes
        self.cluster_id = cluster_id
        # Combined mode: (broker id, incarnation id) of the broker in this process.
        self.local_broker = local_broker
        self._service: ControllerService | None = None
        self._last_write_s = -math.inf
        self._bytes_since_snapshot = 0
        self._snapshot_end = 0
        self._snapshot_due = trio.Event()

    def attach(self, service: ControllerService) -> None:
        """Replay into `service.state` from now on (before the quorum delivers anything)."""
        self._service = service
        service.state = ControllerState(MetadataImage.empty(self.cluster_id or ""))
        self.quorum.add_listener(self._on_records, self._on_image)

    @property
    def service(self) -> ControllerService:
        assert self._service is not None, "KRaftMode.attach was not called"
        return self._service

    # -- every controller ---------------------------------------------------------------------

    async def run(self, service: ControllerService, nursery: trio.Nursery) -> None:
        await self._write_snapshots()

    async def _on_records(self, committed: CommittedBatch) -> None:
        state = self.service.state
        before = state.committed_image
        state.replay(committed.records, committed.epoch)
        self._last_write_s = trio.current_time()
        self._bytes_since_snapshot += committed.size_bytes
        if self._bytes_since_snapshot > self.snapshot_bytes:
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
                node_id=self.service.node_id,
                offset=committed.records[-1].offset,
                created=created[:NAMES_LOGGED],
                deleted=deleted[:NAMES_LOGGED],
                created_count=len(created),
                deleted_count=len(deleted),
            )

    async def _on_image(self, image: MetadataImage) -> None:
        term = self.service.term
        if term is not None and term.driver is not None:
            # An active controller never loads a snapshot (a starting leader may, before its
            # claim commits: it reads the state only after); if it did, its driver's state is
            # not the replayed one any more.
            log.warning("metadata snapshot loaded during a term; ending it", epoch=term.epoch)
            term.scope.cancel()
        self.service.state = ControllerState(image)
        self._bytes_since_snapshot = 0
        self._snapshot_end = image.provenance.last_offset + 1
        log.info(
            "metadata snapshot loaded",
            node_id=self.service.node_id,
            end_offset=self._snapshot_end,
            epoch=image.provenance.last_epoch,
            topics=len(image.topics.by_name),
            brokers=len(image.cluster.brokers),
        )

    async def _write_snapshots(self) -> None:
        while True:
            await self._snapshot_due.wait()
            self._snapshot_due = trio.Event()
            # Only what committed: the active controller's image runs ahead of the log.
            image = self.service.state.committed_image
            end = image.provenance.last_offset + 1
            if end <= self._snapshot_end:
                continue
            self._bytes_since_snapshot = 0
            data = await trio.to_thread.run_sync(encode_snapshot, image)
            try:
                snapshot_id = await self.quorum.create_snapshot(end, data)
                log_start = await self.quorum.delete_before_snapshot()
            except ValueError as exc:
                log.warning("metadata snapshot not written", end_offset=end, error=str(exc))
                continue
            self._snapshot_end = end
            log.info(
                "metadata snapshot written",
                node_id=self.service.node_id,
                end_offset=snapshot_id.end_offset,
                epoch=snapshot_id.epoch,
                bytes=len(data),
                log_start=log_start,
            )

    # -- the active controller's term ---------------------------------------------------------

    def context(self, term: Term, ctx: ControllerContext, claim: Claim) -> ControllerContext:
        image = self.service.state.image
        control = ClusterControl.activate(
            image,
            self.clock_ms(),
            session_timeout_ms=self.session_timeout_ms,
            cluster_id=self.cluster_id,
        )
        if self.local_broker is not None:
            broker_id, incarnation_id = self.local_broker
            registered = image.cluster.broker(broker_id)
            if registered is not None and registered.incarnation_id != incarnation_id:
                control.heartbeats.fence(broker_id)
        term.mode_state = _Sessions(control)
        return dataclasses.replace(ctx, cluster_control=control, clock_ms=self.clock_ms)

    def on_commit(self, term: Term) -> None:
        return None

    async def start(self, term: Term, driver: ControllerDriver, image: MetadataImage) -> None:
        return None

    def start_tasks(self, term: Term, driver: ControllerDriver) -> None:
        assert term.nursery is not None
        term.nursery.start_soon(self._fence_stale_brokers, term, driver)
        if self.idle_interval_ms > 0:
            term.nursery.start_soon(self._write_noop_when_idle, driver)

    async def submit(self, term: Term, driver: ControllerDriver, request: Any) -> Any:
        if isinstance(request, BrokerHeartbeatRequest):
            sessions: _Sessions = term.mode_state
            sessions.control.track_heartbeat(
                driver.state.image, request.broker_id, request.broker_epoch, self.clock_ms()
            )
        response = await driver.submit(request)
        if isinstance(request, _CONTACT):
            term.mode_state.broker_contact()
        return response

    async def _fence_stale_brokers(self, term: Term, driver: ControllerDriver) -> None:
        """KRaft's periodic fencing: at the earliest session end, re-planned on each contact."""
        sessions: _Sessions = term.mode_state
        while True:
            contact = sessions.contact
            due_ms = sessions.control.next_check_time_ms()
            if due_ms != NEVER and self.clock_ms() > due_ms:
                response = await driver.submit(FenceStaleBrokers())
                if response.broker_ids:
                    log.info("brokers fenced", broker_ids=list(response.broker_ids))
                elif response.error_code:
                    log.warning("fencing stale brokers failed", error=response.error_message)
                    await trio.sleep(self.session_timeout_ms / 1000 / 10)
                continue
            # "Exactly the timeout is still live": wake just after it.
            wake_at = math.inf if due_ms == NEVER else (due_ms + 1) / 1000
            with trio.move_on_at(wake_at):
                await contact.wait()

    async def _write_noop_when_idle(self, driver: ControllerDriver) -> None:
        """KRaft's metadata.max.idle.interval.ms: a NoOpRecord when nothing else was written,
        so followers and brokers see the high watermark move (and stale leaders find out)."""
        idle_s = self.idle_interval_ms / 1000
        while True:
            due = self._last_write_s + idle_s
            if trio.current_time() < due:
                await trio.sleep_until(due)
                continue
            response = await driver.submit(WriteNoOp())
            if response.error_code:
                log.warning("idle no-op not written", error=response.error_message)
                await trio.sleep(idle_s)
