"""Broker heartbeats on the active controller (Kafka's BrokerHeartbeatManager, KIP-631/841).

Soft state: when each broker was last heard from, the metadata offset it reported, and the
offset at which its controlled shutdown completes. None of it is in the metadata log, so only
the active controller has one; a controller that becomes active builds it from the image
(`activate`) and gives every registered broker a fresh session, as KRaft does (a failover can
delay fencing by up to one session, never cause one).

Pure: time is passed in as monotonic milliseconds. A broker is "fenced" here when it is not in
the unfenced set, exactly as KRaft's `prev == null`; `active` = unfenced and not shutting down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum

from protocol.server_configs import SERVER_CONFIGS

BROKER_SESSION_TIMEOUT_MS_DEFAULT: int = SERVER_CONFIGS["broker.session.timeout.ms"].default
"""broker.session.timeout.ms (9000): a broker not heard from for longer is fenced."""
BROKER_HEARTBEAT_INTERVAL_MS_DEFAULT: int = SERVER_CONFIGS["broker.heartbeat.interval.ms"].default
"""broker.heartbeat.interval.ms (2000): how often a broker sends BrokerHeartbeat."""

NO_OFFSET = -1
NEVER = 2**63 - 1
"""Kafka's Long.MAX_VALUE: 'no check needed' / 'no active broker'."""


class BrokerControlState(Enum):
    """Kafka's BrokerControlState."""

    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    SHUTDOWN_NOW = "shutdown_now"

    @property
    def fenced(self) -> bool:
        return self in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW)

    @property
    def should_shut_down(self) -> bool:
        return self is BrokerControlState.SHUTDOWN_NOW

    @property
    def in_controlled_shutdown(self) -> bool:
        return self is BrokerControlState.CONTROLLED_SHUTDOWN


@dataclass(frozen=True, slots=True)
class BrokerControlStates:
    current: BrokerControlState
    next: BrokerControlState


@dataclass(slots=True)
class BrokerHeartbeatState:
    broker_id: int
    last_contact_ms: int = 0
    metadata_offset: int = NO_OFFSET
    controlled_shutdown_offset: int = NO_OFFSET
    """Offset at which its controlled shutdown completes; -1 when not shutting down."""
    fenced: bool = True

    @property
    def shutting_down(self) -> bool:
        return self.controlled_shutdown_offset >= 0

    @property
    def active(self) -> bool:
        return not self.fenced and not self.shutting_down


class BrokerHeartbeatManager:
    def __init__(self, session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS_DEFAULT) -> None:
        if session_timeout_ms <= 0:
            raise ValueError(
                f"broker.session.timeout.ms must be positive, got {session_timeout_ms}"
            )
        self.session_timeout_ms = session_timeout_ms
        self._brokers: dict[int, BrokerHeartbeatState] = {}

    @classmethod
    def activate(
        cls,
        registrations: Iterable[tuple[int, bool]],
        now_ms: int,
        session_timeout_ms: int = BROKER_SESSION_TIMEOUT_MS_DEFAULT,
    ) -> BrokerHeartbeatManager:
        """KRaft's ClusterControlManager.activate: every (broker id, fenced) registration gets a
        session starting now."""
        manager = cls(session_timeout_ms)
        for broker_id, fenced in registrations:
            manager.register(broker_id, fenced, now_ms)
        return manager

    # -- queries ---------------------------------------------------------------------------

    def state(self, broker_id: int) -> BrokerHeartbeatState | None:
        return self._brokers.get(broker_id)

    def __contains__(self, broker_id: object) -> bool:
        return broker_id in self._brokers

    def has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        """Unfenced and heard from within the session timeout (KRaft's `>=`: a contact exactly
        session_timeout_ms ago is still valid)."""
        broker = self._brokers.get(broker_id)
        if broker is None or broker.fenced:
            return False
        return broker.last_contact_ms + self.session_timeout_ms >= now_ms

    def controlled_shutdown_offset(self, broker_id: int) -> int | None:
        broker = self._brokers.get(broker_id)
        if broker is None or broker.controlled_shutdown_offset == NO_OFFSET:
            return None
        return broker.controlled_shutdown_offset

    def lowest_active_offset(self) -> int:
        """The lowest metadata offset reported by an active broker; NEVER when there is none."""
        offsets = [b.metadata_offset for b in self._brokers.values() if b.active]
        return min(offsets) if offsets else NEVER

    def next_check_time_ms(self) -> int:
        """When the least recently heard-from unfenced broker's session ends; NEVER if none."""
        unfenced = [b.last_contact_ms for b in self._brokers.values() if not b.fenced]
        return min(unfenced) + self.session_timeout_ms if unfenced else NEVER

    def stale_brokers(self, now_ms: int) -> list[int]:
        """Unfenced brokers whose session has ended, oldest contact first (then by id)."""
        stale = [
            b
            for b in self._brokers.values()
            if not b.fenced and b.last_contact_ms + self.session_timeout_ms < now_ms
        ]
        return [b.broker_id for b in sorted(stale, key=lambda b: (b.last_contact_ms, b.broker_id))]

    def find_one_stale_broker(self, now_ms: int) -> int | None:
        """KRaft's findOneStaleBroker: the oldest-contact unfenced broker, if its session ended."""
        stale = self.stale_brokers(now_ms)
        return stale[0] if stale else None

    # -- changes ---------------------------------------------------------------------------

    def register(self, broker_id: int, fenced: bool, now_ms: int) -> None:
        """Track a broker (if new) and make its fencing right. As KRaft's register: the
        reported metadata offset is kept only when the fencing changes."""
        broker = self._brokers.get(broker_id)
        metadata_offset = NO_OFFSET
        if broker is None:
            self._brokers[broker_id] = BrokerHeartbeatState(broker_id)
        elif broker.fenced != fenced:
            metadata_offset = broker.metadata_offset
        self.touch(broker_id, fenced, metadata_offset, now_ms)

    def update_contact(self, broker_id: int, now_ms: int) -> None:
        """Only the contact time (KRaft's BrokerHeartbeatTracker.updateContactTime): a
        heartbeat seen on arrival, before it waits in the controller's queue."""
        broker = self._brokers.get(broker_id)
        if broker is not None:
            broker.last_contact_ms = max(broker.last_contact_ms, now_ms)

    def touch(self, broker_id: int, fenced: bool, metadata_offset: int, now_ms: int) -> None:
        broker = self._require(broker_id)
        broker.last_contact_ms = now_ms
        broker.metadata_offset = metadata_offset
        broker.fenced = fenced
        if fenced:
            # A fenced broker leaves controlled shutdown; its next heartbeat shuts it down.
            broker.controlled_shutdown_offset = NO_OFFSET

    def fence(self, broker_id: int) -> None:
        broker = self._brokers.get(broker_id)
        if broker is not None:
            broker.fenced = True

    def remove(self, broker_id: int) -> None:
        self._brokers.pop(broker_id, None)

    def maybe_update_controlled_shutdown_offset(self, broker_id: int, offset: int) -> None:
        """Set the offset at which the broker's controlled shutdown completes, the first time."""
        broker = self._require(broker_id)
        if broker.fenced:
            raise ValueError(f"fenced broker {broker_id} cannot enter controlled shutdown")
        if broker.controlled_shutdown_offset < 0:
            broker.controlled_shutdown_offset = offset

    def current_state(self, broker_id: int) -> BrokerControlState:
        broker = self._require(broker_id)
        if broker.shutting_down:
            return BrokerControlState.CONTROLLED_SHUTDOWN
        return BrokerControlState.FENCED if broker.fenced else BrokerControlState.UNFENCED

    def calculate_next_state(
        self,
        broker_id: int,
        *,
        want_fence: bool,
        want_shut_down: bool,
        current_metadata_offset: int,
        registration_offset: int,
        has_leaderships: Callable[[], bool],
    ) -> BrokerControlStates:
        """KRaft's calculateNextBrokerState, case by case."""
        current = self.current_state(broker_id)
        S = BrokerControlState
        if current is S.FENCED:
            if want_shut_down:
                return BrokerControlStates(current, S.SHUTDOWN_NOW)
            if not want_fence and current_metadata_offset >= registration_offset:
                # Caught up with its own registration record: it has seen itself registered.
                return BrokerControlStates(current, S.UNFENCED)
            return BrokerControlStates(current, S.FENCED)
        if current is S.UNFENCED:
            if want_fence:
                return BrokerControlStates(current, S.SHUTDOWN_NOW if want_shut_down else S.FENCED)
            if want_shut_down:
                nxt = S.CONTROLLED_SHUTDOWN if has_leaderships() else S.SHUTDOWN_NOW
                return BrokerControlStates(current, nxt)
            return BrokerControlStates(current, S.UNFENCED)
        # CONTROLLED_SHUTDOWN: leaderships first, then every active broker must have read past
        # the shutdown's records (so nobody still thinks it leads), then it may go.
        if has_leaderships():
            return BrokerControlStates(current, S.CONTROLLED_SHUTDOWN)
        broker = self._require(broker_id)
        if broker.controlled_shutdown_offset <= self.lowest_active_offset():
            return BrokerControlStates(current, S.SHUTDOWN_NOW)
        return BrokerControlStates(current, S.CONTROLLED_SHUTDOWN)

    def _require(self, broker_id: int) -> BrokerHeartbeatState:
        broker = self._brokers.get(broker_id)
        if broker is None:
            raise KeyError(f"broker {broker_id} is not registered with the heartbeat manager")
        return broker
