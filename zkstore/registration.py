"""Broker registration in ZooKeeper: the ephemeral /brokers/ids/<id> (Kafka's registerBroker).

The znode's czxid is the broker epoch: every new registration (a restart, or a new session after
the old one expired) gets a larger one, which is how the controller tells a broker's runs apart.
The create is Kafka's "checked ephemeral create": when the znode exists already and belongs to
this session (a retried create), it is ours; when another live session owns it, a second broker
runs with the same node.id and BrokerIdInUseError says so; when it vanished meanwhile, try again.

`BrokerRegistrar.run` registers, reports the epoch through `task_status.started(epoch)`, and
re-registers whenever kazoo comes back with a new session (the old ephemeral went with the old
session); each registration's epoch is delivered to `on_registered` callbacks.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import replace

import structlog
import trio
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from protocol.clock import SYSTEM_CLOCK
from zkstore.client import ZkClient, ZkState, ZkStateEvent
from zkstore.errors import BrokerIdInUseError
from zkstore.znodes import (
    PERSISTENT_PATHS,
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    acl_store_paths,
)

log = structlog.get_logger("zkstore.registration")


async def ensure_persistent_paths(zk: ZkClient) -> None:
    """Create Kafka's persistent paths (/brokers/ids, /brokers/topics, /config/changes, ...)
    and its ACL store paths (/kafka-acl/Topic, ..., /kafka-acl-changes): Kafka's AclAuthorizer
    creates those at start, and the controller's ACL writes need their parents."""
    await zk.ensure_paths((*PERSISTENT_PATHS, *acl_store_paths()))


async def get_or_create_cluster_id(zk: ZkClient, proposed: str) -> str:
    """The cluster id in /cluster/id, creating it with `proposed` when absent (Kafka's
    getOrGenerateClusterId); whoever created it first wins."""
    found = await zk.get_or_none(ClusterIdZNode.PATH)
    if found is not None:
        return ClusterIdZNode.decode(found[0])
    try:
        await zk.create(ClusterIdZNode.PATH, ClusterIdZNode.encode(proposed), makepath=True)
        return proposed
    except NodeExistsError:
        data, _ = await zk.get(ClusterIdZNode.PATH)
        return ClusterIdZNode.decode(data)


async def checked_ephemeral_create(zk: ZkClient, path: str, data: bytes) -> int:
    """Create an ephemeral znode owned by this session; returns its czxid. Raises
    BrokerIdInUseError when another session owns it."""
    while True:
        try:
            _, stat = await zk.create(path, data, ephemeral=True, makepath=True)
            return int(stat.czxid)
        except NodeExistsError:
            pass
        found = await zk.get_or_none(path)
        if found is None:
            log.info("ephemeral znode went away while reading it; creating again", path=path)
            continue
        owner = found[1].ephemeralOwner
        if owner == zk.session_id:
            return int(found[1].czxid)
        raise BrokerIdInUseError(
            f"{path} already exists and its owner session 0x{owner:x} is not this session "
            f"0x{(zk.session_id or 0):x}: another broker is registered with this id (node.id "
            "must be unique; a previous run's session expires after the session timeout)"
        )


class BrokerRegistrar:
    """Keeps /brokers/ids/<id> registered for one broker. Run `run` in a nursery."""

    def __init__(
        self,
        zk: ZkClient,
        info: BrokerInfo,
        *,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self._zk = zk
        self._info = info
        self._clock_ms = clock_ms or SYSTEM_CLOCK.wall_ms
        self._epoch: int | None = None
        self._callbacks: list[Callable[[int], None]] = []
        self._wakeup_send, self._wakeup_receive = trio.open_memory_channel[ZkStateEvent](math.inf)

    @property
    def path(self) -> str:
        return BrokerIdZNode.path(self._info.broker_id)

    @property
    def broker_epoch(self) -> int | None:
        """The czxid of the current registration (None before the first one)."""
        return self._epoch

    def on_registered(self, callback: Callable[[int], None]) -> None:
        """`callback(broker_epoch)` after every (re-)registration, in the trio thread."""
        self._callbacks.append(callback)

    async def register(self) -> int:
        """Register now; returns the broker epoch (czxid)."""
        info = replace(self._info, timestamp_ms=self._clock_ms())
        epoch = await checked_ephemeral_create(self._zk, self.path, BrokerIdZNode.encode(info))
        self._epoch = epoch
        log.info(
            "broker registered in zookeeper",
            broker_id=self._info.broker_id,
            broker_epoch=epoch,
            session_id=f"0x{(self._zk.session_id or 0):x}",
        )
        for callback in list(self._callbacks):
            callback(epoch)
        return epoch

    def _on_state(self, event: ZkStateEvent) -> None:
        self._wakeup_send.send_nowait(event)

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Register, report the epoch, then re-register after each session loss. Raises
        BrokerIdInUseError (the broker should stop) if another broker holds the id."""
        self._zk.add_state_listener(self._on_state)
        try:
            epoch = await self.register()
            task_status.started(epoch)
            needs_registration = False
            async for event in self._wakeup_receive:
                if event.state is ZkState.LOST:
                    needs_registration = True
                    log.warning(
                        "zookeeper session lost; broker registration gone",
                        broker_id=self._info.broker_id,
                    )
                elif event.state is ZkState.CONNECTED and (needs_registration or event.new_session):
                    try:
                        await self.register()
                        needs_registration = False
                    except (KazooException, NoNodeError) as exc:
                        # Disconnected again before the create got through: the next
                        # CONNECTED event retries.
                        log.warning("broker re-registration failed", error=repr(exc))
                        needs_registration = True
        finally:
            self._zk.remove_state_listener(self._on_state)

    async def deregister(self) -> None:
        """Delete the registration if this session owns it (a clean shutdown)."""
        found = await self._zk.get_or_none(self.path)
        if found is not None and found[1].ephemeralOwner == self._zk.session_id:
            with contextlib.suppress(NoNodeError):
                await self._zk.delete(self.path, version=found[1].version)
        self._epoch = None


__all__ = [
    "BrokerRegistrar",
    "checked_ephemeral_create",
    "ensure_persistent_paths",
    "get_or_create_cluster_id",
]
