"""Controller election as Kafka's KafkaController.elect / registerControllerAndIncrementControllerEpoch.

Every broker runs a `ControllerElection`. `elect()`:

1. read /controller (leaving a watch); someone holds it -> not us, done;
2. read /controller_epoch (create it with epoch 0 when absent) -> (epoch, zk version);
3. one multi-op: create the ephemeral /controller AND set /controller_epoch to epoch + 1 at the
   version just read. Either both happen or neither: if another broker got there first, the
   create fails (NODEEXISTS) or the epoch moved (BADVERSION); then, like Kafka's
   checkControllerAndEpoch, we won only if /controller names us and the epoch is ours;
4. the winner's (epoch, zk version of /controller_epoch) fence all its later writes: each
   ZkMetadataLog multi-op checks /controller_epoch is still at that version.

The watch on /controller re-elects when it is deleted (the controller's session ended) and
resigns this broker if it is active and the znode now names someone else. A lost session
(expired: the ephemeral is gone) resigns at once; the new session re-elects. (The failpoint
`controller.zk.ignore_session_loss` makes an active controller ignore the loss: on the new
session it awaits `after_ignored_session_loss` - the service acting as a zombie - and only then
re-elects, i.e. resigns: so a test sees a zombie's fenced writes on every run.) Resignation is an
event: the controller stops its event loop and drops its state when it gets `Resigned`.

Events, delivered in order through `events()` (a trio receive channel) and the properties:
`BecameController(epoch, epoch_zk_version)`, `Resigned(reason)`,
`ControllerChanged(controller_id)` (None when nobody holds /controller).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import structlog
import trio
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
)
from kazoo.protocol.states import WatchedEvent

from protocol.clock import SYSTEM_CLOCK
from zkstore.client import ZkClient, ZkState, ZkStateEvent
from zkstore.errors import ControllerMovedError
from zkstore.znodes import INITIAL_CONTROLLER_EPOCH, ControllerEpochZNode, ControllerZNode

log = structlog.get_logger("zkstore.election")


@dataclass(frozen=True, slots=True)
class BecameController:
    epoch: int
    epoch_zk_version: int
    """The version of /controller_epoch this controller wrote: every fenced write checks it."""


@dataclass(frozen=True, slots=True)
class Resigned:
    reason: str


@dataclass(frozen=True, slots=True)
class ControllerChanged:
    controller_id: int | None


ElectionEvent = BecameController | Resigned | ControllerChanged


async def read_controller_id(
    zk: ZkClient, watch: Callable[[WatchedEvent], None] | None = None
) -> int | None:
    """The broker id in /controller, or None (Kafka's getControllerId)."""
    found = await zk.get_or_none(ControllerZNode.PATH, watch=watch)
    return None if found is None else ControllerZNode.decode(found[0]).broker_id


async def read_controller_epoch(zk: ZkClient) -> tuple[int, int] | None:
    """(epoch, zk version) of /controller_epoch, or None when absent."""
    found = await zk.get_or_none(ControllerEpochZNode.PATH)
    return None if found is None else (ControllerEpochZNode.decode(found[0]), found[1].version)


async def _maybe_create_controller_epoch(zk: ZkClient) -> tuple[int, int]:
    try:
        _, stat = await zk.create(
            ControllerEpochZNode.PATH, ControllerEpochZNode.encode(INITIAL_CONTROLLER_EPOCH)
        )
        return INITIAL_CONTROLLER_EPOCH, stat.version
    except NodeExistsError:
        current = await read_controller_epoch(zk)
        if current is None:
            raise ControllerMovedError(
                f"{ControllerEpochZNode.PATH} existed but went away while reading it"
            ) from None
        return current


async def register_controller_and_increment_epoch(
    zk: ZkClient, broker_id: int, *, timestamp_ms: int | None = None
) -> tuple[int, int]:
    """Kafka's registerControllerAndIncrementControllerEpoch: (new epoch, its zk version), or
    ControllerMovedError when another broker won."""
    timestamp = timestamp_ms if timestamp_ms is not None else SYSTEM_CLOCK.wall_ms()
    current = await read_controller_epoch(zk)
    epoch, epoch_version = (
        current if current is not None else await _maybe_create_controller_epoch(zk)
    )
    new_epoch = epoch + 1
    tx = zk.kazoo.transaction()
    tx.create(ControllerZNode.PATH, ControllerZNode.encode(broker_id, timestamp), ephemeral=True)
    tx.set_data(ControllerEpochZNode.PATH, ControllerEpochZNode.encode(new_epoch), epoch_version)
    results = await zk.wait(tx.commit_async())
    failures = [r for r in results if isinstance(r, Exception)]
    if not failures:
        return new_epoch, int(results[1].version)
    if not any(isinstance(r, NodeExistsError | BadVersionError) for r in failures):
        raise (
            failures[0]
            if isinstance(failures[0], KazooException)
            else ControllerMovedError(repr(failures[0]))
        )
    # Kafka's checkControllerAndEpoch: did our attempt win after all (a retried request)?
    controller = await read_controller_id(zk)
    if controller is None:
        raise ControllerMovedError(
            f"the ephemeral node at {ControllerZNode.PATH} went away while checking whether "
            "the controller election succeeded"
        )
    if controller == broker_id:
        found = await read_controller_epoch(zk)
        if found is not None and found[0] == new_epoch:
            return found
    raise ControllerMovedError(
        f"controller moved to broker {controller}: aborting this broker's controller start-up"
    )


class Failpoints(Protocol):
    """The process's failpoint registry (deploy.node.failpoints.Failpoints; None: all off)."""

    def eval(self, name: str) -> object | None: ...


class ControllerElection:
    """One broker's part in the controller election. Run `run` in a nursery."""

    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        *,
        clock_ms: Callable[[], int] | None = None,
        failpoints: Failpoints | None = None,
    ) -> None:
        self._zk = zk
        self._failpoints = failpoints
        self.broker_id = broker_id
        self._clock_ms = clock_ms or SYSTEM_CLOCK.wall_ms
        self._wakeup_send, self._wakeup_receive = trio.open_memory_channel[object](math.inf)
        self._events_send, self._events_receive = trio.open_memory_channel[ElectionEvent](math.inf)
        self.active_controller_id: int | None = None
        self.epoch: int | None = None
        self.epoch_zk_version: int | None = None
        self.after_ignored_session_loss: Callable[[], Awaitable[None]] | None = None
        """Awaited on the new session after a session loss the failpoint
        `controller.zk.ignore_session_loss` made this (active) controller ignore."""
        self._session_loss_ignored = False

    @property
    def is_active(self) -> bool:
        return self.epoch_zk_version is not None

    def events(self) -> trio.MemoryReceiveChannel[ElectionEvent]:
        """The one stream of election events (BecameController, Resigned, ControllerChanged)."""
        return self._events_receive

    # -- internals ----------------------------------------------------------------------------

    def _emit(self, event: ElectionEvent) -> None:
        log.info("controller election", broker_id=self.broker_id, election_event=repr(event))
        self._events_send.send_nowait(event)

    def _on_watch(self, event: WatchedEvent) -> None:
        self._wakeup_send.send_nowait(event)

    def _on_state(self, event: ZkStateEvent) -> None:
        self._wakeup_send.send_nowait(event)

    def _set_controller(self, controller_id: int | None) -> None:
        if controller_id != self.active_controller_id:
            self.active_controller_id = controller_id
            self._emit(ControllerChanged(controller_id))

    def _resign(self, reason: str) -> None:
        if self.is_active:
            self.epoch = None
            self.epoch_zk_version = None
            self._emit(Resigned(reason))

    async def _refresh(self) -> int | None:
        """Read /controller with a fresh watch; resign if it is no longer us."""
        controller = await read_controller_id(self._zk, watch=self._on_watch)
        self._set_controller(controller)
        if self.is_active and controller != self.broker_id:
            self._resign(
                "the /controller znode was deleted"
                if controller is None
                else f"controller moved to broker {controller}"
            )
        return controller

    async def elect(self) -> bool:
        """One election round (Kafka's elect); True when this broker is now the controller."""
        controller = await self._refresh()
        if controller is not None:
            return controller == self.broker_id and self.is_active
        try:
            epoch, version = await register_controller_and_increment_epoch(
                self._zk, self.broker_id, timestamp_ms=self._clock_ms()
            )
        except ControllerMovedError as exc:
            log.info("controller election lost", broker_id=self.broker_id, reason=str(exc))
            await self._refresh()
            return False
        self.epoch, self.epoch_zk_version = epoch, version
        self._set_controller(self.broker_id)
        self._emit(BecameController(epoch, version))
        # A watch for the znode we just created: fires if our session ends or it is deleted.
        await self._refresh()
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Elect, then follow /controller and the session until cancelled (resigning then)."""
        self._zk.add_state_listener(self._on_state)
        try:
            await self._elect_quietly()
            task_status.started()
            async for wakeup in self._wakeup_receive:
                if isinstance(wakeup, ZkStateEvent):
                    if wakeup.state is ZkState.LOST:
                        if (
                            self.is_active
                            and self._failpoints is not None
                            and self._failpoints.eval("controller.zk.ignore_session_loss")
                            is not None
                        ):
                            log.warning(
                                "controller ignores its session loss (failpoint)",
                                broker_id=self.broker_id,
                                epoch=self.epoch,
                            )
                            self._session_loss_ignored = True
                            continue
                        self._resign("zookeeper session expired")
                        self._set_controller(None)
                    elif wakeup.state is ZkState.CONNECTED:
                        await self._after_session_loss()
                        await self._elect_quietly()
                    continue
                # A watch fired (created, changed, deleted). Events may be stale by now (we may
                # have re-created /controller since): elect() re-reads /controller and resigns
                # only if it no longer names this broker, as Kafka's maybeResign.
                await self._elect_quietly()
        finally:
            self._zk.remove_state_listener(self._on_state)
            self._resign("the election stopped")

    async def _after_session_loss(self) -> None:
        hook = self.after_ignored_session_loss
        if not self._session_loss_ignored:
            return
        self._session_loss_ignored = False
        if hook is not None and self.is_active:
            try:
                await hook()
            except Exception:
                log.exception("acting on a stale controller state failed")

    async def _elect_quietly(self) -> None:
        try:
            await self.elect()
        except KazooException as exc:
            # Not connected: the next CONNECTED state event elects again.
            log.warning(
                "controller election round failed", broker_id=self.broker_id, error=repr(exc)
            )

    async def resign(self) -> None:
        """Give up the controllership (Kafka's triggerControllerMove): resign, then delete
        /controller if this session owns it, so that the other brokers elect."""
        was_active = self.is_active
        self._resign("resigned on request")
        if not was_active:
            return
        found = await self._zk.get_or_none(ControllerZNode.PATH)
        if found is not None and found[1].ephemeralOwner == self._zk.session_id:
            with contextlib.suppress(NoNodeError):
                await self._zk.delete(ControllerZNode.PATH, version=found[1].version)


__all__ = [
    "BecameController",
    "ControllerChanged",
    "ControllerElection",
    "ElectionEvent",
    "Resigned",
    "read_controller_epoch",
    "read_controller_id",
    "register_controller_and_increment_epoch",
]
