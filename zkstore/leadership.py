"""ZkLeadership: the controller's Leadership port (controller.service.leadership) and ZK-mode
registry port (controller.service.zk_mode.ZkRegistry) on ZooKeeper, for the controller
candidate every ZK-mode broker runs.

- Leadership follows `ControllerElection` (/controller + /controller_epoch compare-and-set):
  `BecameController` is `Elected(epoch, fencing_token=/controller_epoch's zk version)`,
  `Resigned` is `Lost`.
- A claim loads everything from ZooKeeper (`load_metadata`) and opens the term's
  `ZkMetadataLog` and marker writer, both fenced by that zk version: a zombie's writes fail.
- The registry reads /brokers/ids (broker epoch = the registration's czxid) and
  /admin/delete_topics with watches, and writes deletion markers with fenced multi-ops.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import structlog
import trio

from protocol.errors import ErrorCode
from protocol.metadata.leadership import Claim, Elected, LeadershipChange, Lost
from protocol.metadata.records import BrokerEndpoint
from zkstore.client import ZkClient
from zkstore.election import BecameController, ControllerElection, Resigned
from zkstore.errors import ControllerMovedError
from zkstore.fenced_writer import FencedWriter
from zkstore.loader import incarnation_from_czxid, load_metadata
from zkstore.metadata_log import ZkMetadataLog
from zkstore.record_writes import deletion_marker_ops
from zkstore.znodes import BrokerIdsZNode, BrokerIdZNode, DeleteTopicsZNode, DeleteTopicZNode

log = structlog.get_logger("zkstore.leadership")


@dataclass(frozen=True, slots=True)
class ZkRegistration:
    """A live /brokers/ids/<id> registration."""

    broker_id: int
    epoch: int
    """The registration znode's czxid (Kafka's broker epoch in ZK mode)."""
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None
    incarnation_id: str


class ZkLeadership:
    def __init__(
        self, zk: ZkClient, broker_id: int, *, election: ControllerElection | None = None
    ) -> None:
        self.zk = zk
        self.node_id = broker_id
        self.election = election if election is not None else ControllerElection(zk, broker_id)
        self._log: ZkMetadataLog | None = None
        self._markers: FencedWriter | None = None
        self._refused: BaseException | None = None

    # -- Leadership ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.election.run(task_status=task_status)

    async def changes(self) -> AsyncIterator[LeadershipChange]:
        async for event in self.election.events():
            if isinstance(event, BecameController):
                yield Elected(event.epoch, event.epoch_zk_version)
            elif isinstance(event, Resigned):
                yield Lost(event.reason)

    @property
    def active_id(self) -> int | None:
        return self.election.active_controller_id

    def not_controller_message(self) -> str:
        where = self.active_id
        return f"broker {self.node_id} is not the active controller" + (
            f" (the controller is broker {where})" if where is not None else ""
        )

    async def claim(self, elected: Elected) -> Claim:
        started = trio.current_time()
        loaded = await load_metadata(self.zk)
        read_s = trio.current_time() - started
        image = loaded.image()
        replay_s = trio.current_time() - started - read_s
        self._log = ZkMetadataLog.from_loaded(
            self.zk, loaded, epoch=elected.epoch, epoch_zk_version=elected.fencing_token
        )
        self._markers = FencedWriter(self.zk, elected.fencing_token)
        self._refused = None
        return Claim(
            image=image,
            topics_to_delete=tuple(sorted(loaded.topics_to_delete)),
            records=len(loaded.records),
            # ZooKeeper reads, replay into the image (bench/run_failover.py reports them).
            timings={"zk_read_s": read_s, "replay_s": replay_s},
        )

    def term_log(self) -> ZkMetadataLog:
        assert self._log is not None, "no term claimed"
        return self._log

    def writes_refused(self) -> BaseException | None:
        if self._log is not None and self._log.failure is not None:
            return self._log.failure
        return self._refused

    async def resign(self) -> None:
        await self.election.resign()

    # -- ZkRegistry ---------------------------------------------------------------------------

    @property
    def after_ignored_session_loss(self) -> Callable[[], Awaitable[None]] | None:
        return self.election.after_ignored_session_loss

    @after_ignored_session_loss.setter
    def after_ignored_session_loss(self, hook: Callable[[], Awaitable[None]] | None) -> None:
        # Only with the failpoint controller.zk.ignore_session_loss (tests of fencing).
        self.election.after_ignored_session_loss = hook

    async def read_brokers(self, watch: Any) -> tuple[ZkRegistration, ...]:
        children = await self.zk.get_children(BrokerIdsZNode.PATH, watch=watch)
        ids = sorted(int(c) for c in children if c.isdigit())
        found = await self.zk.get_many([BrokerIdZNode.path(i) for i in ids])
        brokers: list[ZkRegistration] = []
        for broker_id, got in zip(ids, found, strict=True):
            if got is None:
                continue  # gone while we read: the watch fires again
            data, stat = got
            info = BrokerIdZNode.decode(broker_id, data)
            brokers.append(
                ZkRegistration(
                    broker_id=broker_id,
                    epoch=int(stat.czxid),
                    endpoints=info.endpoints,
                    rack=info.rack,
                    incarnation_id=incarnation_from_czxid(int(stat.czxid)),
                )
            )
        return tuple(brokers)

    async def read_deletion_markers(self, watch: Any) -> list[str]:
        children: list[str] = await self.zk.get_children(DeleteTopicsZNode.PATH, watch=watch)
        return children

    async def write_deletion_markers(
        self, *, create: Sequence[str] = (), delete: Sequence[str] = ()
    ) -> tuple[ErrorCode, str] | None:
        writer = self._markers
        if writer is None:
            return ErrorCode.NOT_CONTROLLER, "the controller is not serving yet"
        try:
            found = [await self.zk.exists(DeleteTopicZNode.path(n)) for n in create]
            missing = [n for n, stat in zip(create, found, strict=True) if stat is None]
            await writer.write(deletion_marker_ops(create=missing, delete=delete))
        except ControllerMovedError as exc:
            self._refused = exc
            return ErrorCode.NOT_CONTROLLER, f"this controller was fenced: {exc}"
        except Exception as exc:
            # A marker created by someone else meanwhile fails the multi-op; it is queued all
            # the same when every marker exists now.
            if create and not delete:
                with contextlib.suppress(Exception):
                    found = [await self.zk.exists(DeleteTopicZNode.path(n)) for n in create]
                    if all(stat is not None for stat in found):
                        return None
            log.warning("writing topic deletion markers failed", error=repr(exc))
            return (
                ErrorCode.UNKNOWN_SERVER_ERROR,
                f"could not write {DeleteTopicsZNode.PATH} markers: {exc!r}",
            )
        return None
