"""The broker lifecycle of a Raft-mode active controller (KRaft's ClusterControlManager plus the
broker half of ReplicationControlManager, KIP-631 and KIP-841). Pure: time is passed in.

- `register_broker` (BrokerRegistration): a RegisterBrokerRecord, fenced, whose broker epoch is
  the record's own offset. Another incarnation while the registered one still has a live
  session -> DUPLICATE_BROKER_REGISTRATION; the same incarnation again amends the registration
  (epoch, fencing and controlled shutdown kept).
- `process_heartbeat` (BrokerHeartbeat): KRaft's state machine (heartbeats.calculate_next_state)
  and the records of the transition it takes: unfencing once the broker has read up to its own
  registration, fencing when it asks, controlled shutdown (a BrokerRegistrationChangeRecord, then
  its leaderships moved and it leaves every ISR), and SHUTDOWN_NOW once it leads nothing and
  every active broker has read past the shutdown's records.
- `fence_stale_brokers`: brokers whose session (broker.session.timeout.ms) ended are fenced,
  after leaving every ISR and their leaderships re-elected.

Every partition change goes through the PartitionChangeBuilder with the topic's election
(clean, or unclean when unclean.leader.election.enable), the same code ZK mode's BrokerChange
uses; an ISR is never emptied (its last member stays, leaderless).

Choices (see docs/internals.md): fencing writes FenceBrokerRecord/UnfenceBrokerRecord (KRaft
before BrokerRegistrationChangeRecord; the image replays both the same way); the "caught up"
offset is the broker epoch (KRaft keeps the offset of the latest RegisterBrokerRecord, which
differs only after an amend); stale brokers are fenced in one batch (one after the other, each
seeing the previous one's changes) rather than one per event; a new incarnation replacing an unfenced registration whose session already ended
fences the old one in the same batch first, so the new one never inherits its leaderships.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TypeVar

from controller.broker_lifecycle import election_for
from controller.context import ControllerContext
from controller.heartbeats import (
    BROKER_SESSION_TIMEOUT_MS_DEFAULT,
    BrokerControlState,
    BrokerHeartbeatManager,
)
from controller.partition_change import Election, PartitionChangeBuilder
from controller.result import ControllerResult
from controller.state import ControllerState
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    InControlledShutdownChange,
    MetadataRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)

T = TypeVar("T")


def is_active(image: MetadataImage, broker_id: int) -> bool:
    """KRaft's ClusterControlManager.isActive: registered, unfenced, not shutting down."""
    reg = image.cluster.brokers.get(broker_id)
    return reg is not None and not reg.fenced and not reg.in_controlled_shutdown


def has_leaderships(image: MetadataImage, broker_id: int) -> bool:
    return any(
        part.leader == broker_id
        for topic in image.topics.by_id.values()
        for part in topic.partitions.values()
    )


def leader_and_isr_updates(
    state: ControllerState,
    ctx: ControllerContext,
    *,
    remove: Collection[int] = (),
    add: int = NO_LEADER,
) -> list[MetadataRecord]:
    """KRaft's generateLeaderAndIsrUpdates. With `remove`: the partitions those brokers are in
    the ISR of (or lead) lose them from the ISR and, when they led, get a new leader; they are
    never acceptable leaders. With `add`: partitions without a leader get an election in which
    `add` counts as active although the image still shows it fenced (its unfence record is in
    the same batch). An ISR shrink keeps the leader epoch (Kafka since metadata version 3.6,
    KAFKA-15021): the partition epoch orders the change, the leader never takes the removed
    replica back while it is fenced or shutting down (KIP-841), and its followers keep
    fetching; only a new leader bumps it."""
    image = state.image
    removed = frozenset(remove)

    def acceptable(r: int) -> bool:
        return r not in removed and (r == add or is_active(image, r))

    elections: list[MetadataRecord] = []
    others: list[MetadataRecord] = []
    by_name = image.topics.by_name
    elections_by_topic: dict[str, Election] = {}
    candidates = state.partitions_of_brokers(removed) if removed else state.leaderless_partitions()
    for name, pid in candidates:
        topic = by_name[name]
        topic_id, part = topic.topic_id, topic.partitions[pid]
        if removed:
            if part.leader not in removed and not any(r in removed for r in part.isr):
                continue
        elif part.leader != NO_LEADER:
            continue
        builder = PartitionChangeBuilder(
            part, topic_id, pid, acceptable, bump_leader_epoch_on_isr_shrink=False
        )
        builder.set_target_isr([r for r in part.isr if r not in removed])
        election = elections_by_topic.get(name)
        if election is None:
            election = elections_by_topic[name] = election_for(state, name, ctx)
        builder.set_election(election)
        record = builder.build()
        if record is not None:
            moved = record.leader not in (NO_LEADER_CHANGE, part.leader)
            (elections if moved else others).append(record)
    # New leaders first: brokers apply a large change in steps (broker.metadata_publisher),
    # and a partition without its leader accepts nothing, where one with a member too many
    # in its ISR still serves acks=1 and reads.
    return elections + others


class ClusterControl:
    """The active controller's broker sessions and the operations that use them. Build one with
    `activate` when this controller becomes active; drop it when it stops being active."""

    def __init__(self, heartbeats: BrokerHeartbeatManager, *, cluster_id: str | None = None):
        self.heartbeats = heartbeats
        self.cluster_id = cluster_id
        """The cluster id registrations must name; None: the image's (unchecked when empty)."""

    @classmethod
    def activate(
        cls,
        image: MetadataImage,
        now_ms: int,
        *,
        session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS_DEFAULT,
        cluster_id: str | None = None,
    ) -> ClusterControl:
        heartbeats = BrokerHeartbeatManager.activate(
            ((b.broker_id, b.fenced) for b in image.cluster.brokers.values()),
            now_ms,
            session_timeout_ms,
        )
        return cls(heartbeats, cluster_id=cluster_id)

    def next_check_time_ms(self) -> int:
        """When `fence_stale_brokers` next has something to do (heartbeats.NEVER if never)."""
        return self.heartbeats.next_check_time_ms()

    # -- BrokerRegistration ----------------------------------------------------------------

    def register_broker(
        self,
        state: ControllerState,
        request: BrokerRegistrationRequest,
        now_ms: int,
        ctx: ControllerContext,
    ) -> ControllerResult[BrokerRegistrationResponse]:
        try:
            return self._register_broker(state, request, now_ms, ctx)
        except KafkaError as exc:
            return _error(
                BrokerRegistrationResponse(error_code=int(exc.code), error_message=exc.message)
            )

    def _register_broker(
        self,
        state: ControllerState,
        request: BrokerRegistrationRequest,
        now_ms: int,
        ctx: ControllerContext,
    ) -> ControllerResult[BrokerRegistrationResponse]:
        broker_id = request.broker_id
        if broker_id < 0:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Broker id must be non-negative, got {broker_id}."
            )
        expected = self.cluster_id if self.cluster_id is not None else state.image.cluster_id
        if expected and request.cluster_id != expected:
            raise KafkaError(
                ErrorCode.INCONSISTENT_CLUSTER_ID,
                f"Expected cluster ID {expected}, but got cluster ID {request.cluster_id}",
            )
        endpoints = _endpoints(request)
        existing = state.image.cluster.broker(broker_id)
        if (
            existing is not None
            and self.heartbeats.has_valid_session(broker_id, now_ms)
            and request.incarnation_id != existing.incarnation_id
        ):
            raise KafkaError(
                ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                # Kafka's words; never the registered incarnation or epoch, which is what a
                # forged registration or heartbeat would need.
                f"Another broker is registered with that broker id ({broker_id}) and its "
                "session is live.",
            )
        records: list[MetadataRecord] = []
        new_incarnation = existing is None or existing.incarnation_id != request.incarnation_id
        if new_incarnation:
            if existing is not None and not existing.fenced:
                # Its session ended but the periodic check has not fenced it yet: do it now.
                records += self._fence_records(state, ctx, [broker_id])
            epoch = state.next_offset + len(records)
            fenced, in_controlled_shutdown = True, False
        else:
            assert existing is not None
            epoch = existing.epoch
            fenced, in_controlled_shutdown = existing.fenced, existing.in_controlled_shutdown
        records.append(
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id=request.incarnation_id,
                broker_epoch=epoch,
                endpoints=endpoints,
                rack=request.rack,
                fenced=fenced,
                in_controlled_shutdown=in_controlled_shutdown,
            )
        )
        if new_incarnation:
            self.heartbeats.remove(broker_id)  # the old incarnation's session ends here
        self.heartbeats.register(broker_id, fenced, now_ms)
        return ControllerResult(
            records=records, response=BrokerRegistrationResponse(broker_epoch=epoch)
        )

    # -- BrokerHeartbeat -------------------------------------------------------------------

    def track_heartbeat(
        self, image: MetadataImage, broker_id: int, broker_epoch: int, now_ms: int
    ) -> bool:
        """KRaft's trackBrokerHeartbeat: a heartbeat of the broker's registered epoch counts
        as contact when it arrives, before it waits in the controller's queue, so that a
        backlog (a large fencing or creation, a slow fsync of the metadata log) does not end
        the sessions of brokers whose heartbeats are queued or time out there. False when
        the broker or epoch is not the registered one (the queued heartbeat says why)."""
        reg = image.cluster.broker(broker_id)
        if reg is None or reg.epoch != broker_epoch or broker_id not in self.heartbeats:
            return False
        self.heartbeats.update_contact(broker_id, now_ms)
        return True

    def process_heartbeat(
        self,
        state: ControllerState,
        request: BrokerHeartbeatRequest,
        now_ms: int,
        ctx: ControllerContext,
    ) -> ControllerResult[BrokerHeartbeatResponse]:
        try:
            return self._process_heartbeat(state, request, now_ms, ctx)
        except KafkaError as exc:
            return _error(
                BrokerHeartbeatResponse(error_code=int(exc.code), error_message=exc.message)
            )

    def _process_heartbeat(
        self,
        state: ControllerState,
        request: BrokerHeartbeatRequest,
        now_ms: int,
        ctx: ControllerContext,
    ) -> ControllerResult[BrokerHeartbeatResponse]:
        broker_id = request.broker_id
        reg = state.image.cluster.broker(broker_id)
        if reg is None:
            raise KafkaError(
                ErrorCode.STALE_BROKER_EPOCH,
                f"Received a heartbeat from broker {broker_id} before its registration.",
            )
        if reg.epoch != request.broker_epoch:
            raise KafkaError(
                ErrorCode.STALE_BROKER_EPOCH,
                # Unlike Kafka's text, never the expected epoch (a forger's missing piece).
                f"Broker epoch {request.broker_epoch} is not the current registration of "
                f"broker {broker_id}.",
            )
        if broker_id not in self.heartbeats:
            # Registered in the log but unknown here (activation missed it): as activate would.
            self.heartbeats.register(broker_id, reg.fenced, now_ms)
        registration_offset = reg.epoch
        image = state.image
        states = self.heartbeats.calculate_next_state(
            broker_id,
            want_fence=request.want_fence,
            want_shut_down=request.want_shut_down,
            current_metadata_offset=request.current_metadata_offset,
            registration_offset=registration_offset,
            has_leaderships=lambda: has_leaderships(image, broker_id),
        )
        records: list[MetadataRecord] = []
        nxt = states.next
        if states.current is not nxt:
            if nxt is BrokerControlState.FENCED or nxt is BrokerControlState.SHUTDOWN_NOW:
                records += self._fence_records(state, ctx, [broker_id])
            elif nxt is BrokerControlState.UNFENCED:
                records.append(UnfenceBrokerRecord(id=broker_id, epoch=reg.epoch))
                records += leader_and_isr_updates(state, ctx, add=broker_id)
            else:  # CONTROLLED_SHUTDOWN (KIP-841: persisted, not soft state)
                if not reg.in_controlled_shutdown:
                    records.append(
                        BrokerRegistrationChangeRecord(
                            broker_id=broker_id,
                            broker_epoch=reg.epoch,
                            in_controlled_shutdown=InControlledShutdownChange.IN_CONTROLLED_SHUTDOWN,
                        )
                    )
                records += leader_and_isr_updates(state, ctx, remove=[broker_id])
        self.heartbeats.touch(broker_id, nxt.fenced, request.current_metadata_offset, now_ms)
        if nxt.in_controlled_shutdown:
            # KRaft's processBatchEndOffset: the single writer's batch ends at this offset.
            batch_end = state.next_offset + len(records) - 1
            self.heartbeats.maybe_update_controlled_shutdown_offset(broker_id, batch_end)
        return ControllerResult(
            records=records,
            response=BrokerHeartbeatResponse(
                is_caught_up=request.current_metadata_offset >= registration_offset,
                is_fenced=nxt.fenced,
                should_shut_down=nxt.should_shut_down,
            ),
        )

    # -- session expiry --------------------------------------------------------------------

    def fence_stale_brokers(
        self, state: ControllerState, now_ms: int, ctx: ControllerContext
    ) -> ControllerResult[tuple[int, ...]]:
        """Fence every unfenced broker whose session ended by `now_ms`; the response is their
        ids (oldest contact first). No records when none."""
        stale = []
        for broker_id in self.heartbeats.stale_brokers(now_ms):
            reg = state.image.cluster.broker(broker_id)
            if reg is None or reg.fenced:
                # Unregistered, or fenced already in the log: only the soft state lagged.
                self.heartbeats.fence(broker_id)
                continue
            stale.append(broker_id)
        # One broker at a time, oldest contact first, each seeing the previous one's changes
        # (KRaft fences one per event): with two ISR members fenced together the ISR ends as
        # the one fenced last, as it would have, not as both.
        records: list[MetadataRecord] = []
        scratch = state
        for broker_id in stale:
            step = self._fence_records(scratch, ctx, [broker_id])
            records += step
            if len(stale) > 1:
                if scratch is state:
                    scratch = ControllerState(state.image)
                scratch.replay_appended(step, scratch.next_offset + len(step) - 1)
            self.heartbeats.fence(broker_id)
        return ControllerResult(records=records, response=tuple(stale), atomic=False)

    def fence_dead_broker(
        self,
        state: ControllerState,
        broker_id: int,
        broker_epoch: int,
        lost_at_ms: int,
        ctx: ControllerContext,
    ) -> ControllerResult[str | None]:
        """Fence incarnation `broker_epoch` of `broker_id` before its session ends, once the
        fast fencing confirmed it dead (controller.liveness): only while that epoch is still
        the broker's, unfenced, not in controlled shutdown, and nothing was heard from it since
        its connection ended at `lost_at_ms`. The response is None when fenced, else why not."""
        reg = state.image.cluster.broker(broker_id)
        heard = self.heartbeats.state(broker_id)
        reason = None
        if reg is None or reg.epoch != broker_epoch:
            reason = "the broker registered again since"
        elif reg.fenced:
            reason = "already fenced"
        elif reg.in_controlled_shutdown or (heard is not None and heard.shutting_down):
            reason = "in controlled shutdown"
        elif heard is not None and heard.last_contact_ms > lost_at_ms:
            reason = "heard from since its connection ended"
        if reason is not None:
            return ControllerResult(records=[], response=reason)
        records = self._fence_records(state, ctx, [broker_id])
        self.heartbeats.fence(broker_id)
        return ControllerResult(records=records, response=None, atomic=False)

    # -- UnregisterBroker ------------------------------------------------------------------

    def unregister_broker(
        self, state: ControllerState, request: UnregisterBrokerRequest, ctx: ControllerContext
    ) -> ControllerResult[UnregisterBrokerResponse]:
        """KRaft's handleBrokerUnregistered: out of every ISR (leaderships re-elected), then
        UnregisterBrokerRecord; its session ends."""
        reg = state.image.cluster.broker(request.broker_id)
        if reg is None:
            return _error(
                UnregisterBrokerResponse(
                    error_code=int(ErrorCode.BROKER_ID_NOT_REGISTERED),
                    error_message=f"Broker ID {request.broker_id} is not currently registered",
                )
            )
        records = leader_and_isr_updates(state, ctx, remove=[request.broker_id])
        records.append(UnregisterBrokerRecord(broker_id=reg.broker_id, broker_epoch=reg.epoch))
        self.heartbeats.remove(reg.broker_id)
        return ControllerResult(records=records, response=UnregisterBrokerResponse(), atomic=False)

    def _fence_records(
        self, state: ControllerState, ctx: ControllerContext, broker_ids: Collection[int]
    ) -> list[MetadataRecord]:
        """KRaft's handleBrokerFenced: fenced, out of every ISR, leaderships re-elected. The
        fencing comes first (KRaft writes it last, in one batch the brokers apply at once):
        brokers publish a large change in steps, and a leader must know the broker fenced
        when its shrink arrives, or the broker, caught up outside the ISR, holds the HW
        (KAFKA-15021's rule) until the last step."""
        records: list[MetadataRecord] = [
            FenceBrokerRecord(id=b, epoch=state.image.cluster.brokers[b].epoch) for b in broker_ids
        ]
        records += leader_and_isr_updates(state, ctx, remove=broker_ids)
        return records


def _endpoints(request: BrokerRegistrationRequest) -> tuple[BrokerEndpoint, ...]:
    seen: set[str] = set()
    for listener in request.listeners:
        if listener.name in seen:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Broker {request.broker_id} registered listener {listener.name!r} twice.",
            )
        seen.add(listener.name)
        if not 0 < listener.port < 65536:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"Broker {request.broker_id} registered listener {listener.name!r} with port "
                f"{listener.port}; a port is 1-65535.",
            )
    return tuple(
        BrokerEndpoint(
            name=lst.name, host=lst.host, port=lst.port, security_protocol=lst.security_protocol
        )
        for lst in request.listeners
    )


def _error(response: T) -> ControllerResult[T]:
    return ControllerResult(records=(), response=response)
