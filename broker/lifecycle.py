"""A Raft-mode broker's lifecycle with the active controller (KRaft's BrokerLifecycleManager).

`BrokerLifecycle` is the pure part (no trio, no clock: times are passed in as monotonic ms):
it says which request to send next and when, and takes the answers. `BrokerLifecycleManager`
is its small trio loop over a ControllerChannel.

The sequence, as KRaft's:
- BrokerRegistration at start (a random incarnation id per process start, the bound
  advertised listeners, the rack), retried with backoff until accepted; the answer's broker
  epoch (the registration record's offset) is what AlterPartition carries.
- BrokerHeartbeat every `broker.heartbeat.interval.ms` with `current_metadata_offset` = what
  the publisher applied and `want_fence` until the broker has caught up with the metadata log:
  KRaft's "caught up" is that offset reaching the registration's (the broker epoch); once it
  has, the broker applies its first full image and asks to be unfenced.
- STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED: the controller lost this registration (a
  session timeout, a new controller without it): register again. Other errors (NOT_CONTROLLER,
  no answer) are retried after the retry backoff.
- Controlled shutdown through the heartbeat: `begin_controlled_shutdown()` makes heartbeats
  carry `want_shut_down` (sent at once, then each time the broker applied more metadata, else
  every heartbeat interval) until an answer says `should_shut_down`; `shutdown_deadline_ms` bounds the wait (then the broker shuts down
  anyway, as ZK mode after controlled.shutdown.max.retries).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog
import trio

from broker.ports import ControllerChannel
from protocol.errors import ErrorCode
from protocol.messages.broker_lifecycle import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationListener,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from protocol.server_configs import SERVER_CONFIGS

log = structlog.get_logger("broker.lifecycle")

REGISTERED = "broker registered"
UNFENCED = "broker unfenced"
CAUGHT_UP = "broker caught up with the metadata log"
SHUTDOWN_ALLOWED = "controlled shutdown allowed by the controller"
SHUTDOWN_GAVE_UP = "controlled shutdown gave up; shutting down anyway"

MAX_BACKOFF_MS = 5_000
"""Registration retries back off exponentially up to this."""

_REREGISTER = (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED)


class BrokerState(enum.Enum):
    """KRaft's BrokerState, the part a broker goes through with the controller."""

    STARTING = "STARTING"  # not registered yet
    RECOVERY = "RECOVERY"  # registered, fenced, catching up with the metadata log
    RUNNING = "RUNNING"  # unfenced
    PENDING_CONTROLLED_SHUTDOWN = "PENDING_CONTROLLED_SHUTDOWN"
    SHUTTING_DOWN = "SHUTTING_DOWN"  # the controller said should_shut_down (or we gave up)


@dataclass(frozen=True, slots=True)
class Registration:
    """What the broker registers with (fixed for one process run)."""

    broker_id: int
    cluster_id: str
    incarnation_id: str
    listeners: tuple[BrokerRegistrationListener, ...]
    rack: str | None = None


_HEARTBEAT_INTERVAL_MS_DEFAULT = int(SERVER_CONFIGS["broker.heartbeat.interval.ms"].default)


class BrokerLifecycle:
    """The pure state of registration and heartbeats. `next_request(now_ms, metadata_offset)`
    is the request due now (or None, then `next_due_ms` says when); the answers go to
    `on_registration_response` / `on_heartbeat_response`, a failed send to `on_send_failed`."""

    def __init__(
        self,
        registration: Registration,
        *,
        heartbeat_interval_ms: int = _HEARTBEAT_INTERVAL_MS_DEFAULT,
        retry_backoff_ms: int = 100,
        now_ms: int = 0,
    ) -> None:
        self.registration = registration
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.state = BrokerState.STARTING
        self.broker_epoch = -1
        self.is_fenced = True
        self.caught_up = False
        """The applied metadata offset reached the broker epoch (KRaft's initial catch-up)."""
        self.ready_to_unfence = False
        """Set by the broker once its first full image is applied: heartbeats stop asking to
        be fenced."""
        self.want_shut_down = False
        self.next_due_ms = now_ms
        self._backoff_ms = retry_backoff_ms
        self._in_flight = False
        self._sent_want_fence = False
        self._sent_offset = -1
        self._applied_offset = -1

    # -- what to send ------------------------------------------------------------------

    def next_request(
        self, now_ms: int, metadata_offset: int
    ) -> BrokerRegistrationRequest | BrokerHeartbeatRequest | None:
        """The request due at `now_ms`; None while one is in flight or none is due."""
        if self._in_flight or now_ms < self.next_due_ms:
            return None
        if self.state is BrokerState.SHUTTING_DOWN:
            return None
        self._in_flight = True
        self._sent_want_fence = not self.ready_to_unfence and not self.want_shut_down
        if self.broker_epoch < 0:
            r = self.registration
            return BrokerRegistrationRequest(
                broker_id=r.broker_id,
                cluster_id=r.cluster_id,
                incarnation_id=r.incarnation_id,
                listeners=r.listeners,
                rack=r.rack,
            )
        self.note_metadata_offset(metadata_offset)
        self._sent_offset = metadata_offset
        return BrokerHeartbeatRequest(
            broker_id=self.registration.broker_id,
            broker_epoch=self.broker_epoch,
            current_metadata_offset=metadata_offset,
            want_fence=not self.ready_to_unfence and not self.want_shut_down,
            want_shut_down=self.want_shut_down,
        )

    def note_metadata_offset(self, metadata_offset: int) -> bool:
        """The publisher applied up to `metadata_offset`; True when that is the initial
        catch-up (the offset reached the broker epoch for the first time)."""
        self._applied_offset = max(self._applied_offset, metadata_offset)
        if self.caught_up or self.broker_epoch < 0 or metadata_offset < self.broker_epoch:
            return False
        self.caught_up = True
        return True

    def shutdown_heartbeat_due(self, now_ms: int) -> bool:
        """While a controlled shutdown waits, the controller allows it only once this broker
        has applied the records that moved its leaderships: a newly applied offset is reported
        at once, not a heartbeat interval later (Kafka sends the second heartbeat of a
        controlled shutdown after 50 ms). True when a heartbeat became due."""
        if (
            self.state is not BrokerState.PENDING_CONTROLLED_SHUTDOWN
            or self._in_flight
            or self._applied_offset <= self._sent_offset
        ):
            return False
        self.next_due_ms = min(self.next_due_ms, now_ms)
        return True

    def begin_controlled_shutdown(self, now_ms: int) -> None:
        """SIGTERM: ask through the heartbeat; the next one is due at once."""
        if self.state is BrokerState.SHUTTING_DOWN:
            return
        self.want_shut_down = True
        if self.broker_epoch < 0:
            # Never registered: nothing leads here, nothing to hand over.
            self.state = BrokerState.SHUTTING_DOWN
            return
        self.state = BrokerState.PENDING_CONTROLLED_SHUTDOWN
        self.next_due_ms = now_ms

    # -- answers ------------------------------------------------------------------------

    def on_send_failed(self, now_ms: int, reason: str) -> None:
        """No answer (no controller known, connection, timeout): retry with backoff."""
        self._in_flight = False
        self._retry(now_ms)
        log.info("controller request failed; retrying", reason=reason, state=self.state.value)

    def on_registration_response(self, response: BrokerRegistrationResponse, now_ms: int) -> None:
        self._in_flight = False
        if response.error_code != 0:
            log.warning(
                "broker registration refused",
                error=ErrorCode.from_wire(response.error_code).name,
                message=response.error_message,
            )
            self._retry(now_ms)
            return
        self.broker_epoch = response.broker_epoch
        self.caught_up = False
        self._backoff_ms = self.retry_backoff_ms
        if self.state is BrokerState.STARTING:
            self.state = BrokerState.RECOVERY
        self.next_due_ms = now_ms  # the first heartbeat at once
        log.info(REGISTERED, broker_epoch=self.broker_epoch)

    def on_heartbeat_response(self, response: BrokerHeartbeatResponse, now_ms: int) -> None:
        self._in_flight = False
        code = ErrorCode.from_wire(response.error_code)
        if code in _REREGISTER:
            log.warning(
                "registration lost; registering again",
                error=code.name,
                message=response.error_message,
                broker_epoch=self.broker_epoch,
            )
            self.broker_epoch = -1
            self.is_fenced = True
            self.next_due_ms = now_ms
            return
        if code != ErrorCode.NONE:
            self._retry(now_ms)
            return
        self._backoff_ms = self.retry_backoff_ms
        was_fenced, self.is_fenced = self.is_fenced, response.is_fenced
        if was_fenced and not self.is_fenced:
            log.info(UNFENCED, broker_epoch=self.broker_epoch)
        if self.state is BrokerState.RECOVERY and not self.is_fenced:
            self.state = BrokerState.RUNNING
        if self.want_shut_down and response.should_shut_down:
            self.state = BrokerState.SHUTTING_DOWN
            log.info(SHUTDOWN_ALLOWED, broker_epoch=self.broker_epoch)
            return
        if self.is_fenced and self.ready_to_unfence and self._sent_want_fence:
            # Became ready while a heartbeat still asking to be fenced was in flight: ask to
            # be unfenced at once, not a heartbeat interval later (KRaft's catch-up path).
            self.next_due_ms = now_ms
            return
        self.next_due_ms = now_ms + self.heartbeat_interval_ms
        self.shutdown_heartbeat_due(now_ms)  # applied more while this one was in flight

    def _retry(self, now_ms: int) -> None:
        self.next_due_ms = now_ms + self._backoff_ms
        self._backoff_ms = min(self._backoff_ms * 2, MAX_BACKOFF_MS)


def registration_listeners(
    endpoints: Sequence[tuple[str, str, int]],
) -> tuple[BrokerRegistrationListener, ...]:
    """(name, host, port) triples -> BrokerRegistration listeners (PLAINTEXT)."""
    return tuple(BrokerRegistrationListener(name=n, host=h, port=p) for n, h, p in endpoints)


class BrokerLifecycleManager:
    """The trio loop around BrokerLifecycle: `await nursery.start(manager.run)` (started once
    registered), `wait_caught_up()`, `set_ready_to_unfence()`, `await controlled_shutdown(
    timeout_s)` -> True when the controller allowed it, False when it gave up."""

    def __init__(
        self,
        lifecycle: BrokerLifecycle,
        channel: ControllerChannel,
        metadata_offset: Callable[[], int],
        *,
        request_timeout_s: float = 30.0,
        on_epoch: Callable[[int], None] = lambda epoch: None,
    ) -> None:
        self.lifecycle = lifecycle
        self.channel = channel
        self.metadata_offset = metadata_offset
        self.request_timeout_s = request_timeout_s
        self.on_epoch = on_epoch
        self._wake = trio.Event()
        self._changed = trio.Event()

    @staticmethod
    def _now_ms() -> int:
        return int(trio.current_time() * 1000)

    def wake(self) -> None:
        """Something changed (metadata applied, shutdown asked): look at the state again."""
        self._wake.set()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, condition: Callable[[BrokerLifecycle], bool]) -> None:
        while not condition(self.lifecycle):
            await self._changed.wait()

    async def wait_caught_up(self) -> None:
        await self.wait_for(lambda lc: lc.caught_up)

    def metadata_applied(self) -> None:
        """The publisher applied more: maybe the initial catch-up."""
        if self.lifecycle.note_metadata_offset(self.metadata_offset()):
            log.info(CAUGHT_UP, offset=self.metadata_offset())
            self._notify()
        if self.lifecycle.shutdown_heartbeat_due(self._now_ms()):
            self.wake()

    def set_ready_to_unfence(self) -> None:
        self.lifecycle.ready_to_unfence = True
        self.lifecycle.next_due_ms = self._now_ms()  # tell the controller at once
        self.wake()

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        self.lifecycle.begin_controlled_shutdown(self._now_ms())
        self.wake()
        with trio.move_on_after(timeout_s):
            await self.wait_for(lambda lc: lc.state is BrokerState.SHUTTING_DOWN)
            return True
        log.warning(SHUTDOWN_GAVE_UP, timeout_s=timeout_s)
        return False

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        started = False
        while True:
            lc = self.lifecycle
            request = lc.next_request(self._now_ms(), self.metadata_offset())
            if request is not None:
                await self._send(request)
                if not started and lc.broker_epoch >= 0:
                    started = True
                    task_status.started(lc.broker_epoch)
                self.metadata_applied()
                self._notify()
                continue
            self._wake = trio.Event()
            with trio.move_on_after(max(0, lc.next_due_ms - self._now_ms()) / 1000):
                await self._wake.wait()

    async def _send(self, request: BrokerRegistrationRequest | BrokerHeartbeatRequest) -> None:
        lc = self.lifecycle
        epoch_before = lc.broker_epoch
        try:
            with trio.fail_after(self.request_timeout_s):
                response = await self.channel.submit(request)
        except trio.TooSlowError:
            lc.on_send_failed(self._now_ms(), f"no answer within {self.request_timeout_s:g} s")
            return
        except Exception as exc:  # the channel may fail in any way: retry
            lc.on_send_failed(self._now_ms(), str(exc) or repr(exc))
            return
        if isinstance(response, BrokerRegistrationResponse):
            lc.on_registration_response(response, self._now_ms())
        elif isinstance(response, BrokerHeartbeatResponse):
            lc.on_heartbeat_response(response, self._now_ms())
        else:
            lc.on_send_failed(self._now_ms(), f"unexpected answer {type(response).__name__}")
        if lc.broker_epoch != epoch_before and lc.broker_epoch >= 0:
            self.on_epoch(lc.broker_epoch)
