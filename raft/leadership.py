"""RaftLeadership: the controller's Leadership port (controller.service.leadership) and the
quorum port of its KRaft mode (controller.service.kraft_mode.MetadataQuorum) on this node's
RaftDriver: the active controller is the quorum leader.

- Leadership follows the driver's role: leader in epoch E is `Elected(E)`; another role, or a
  new epoch, is `Lost`.
- A claim is KRaft's: the new leader proposes a NoOpRecord and waits until it is applied, so
  that the state every controller replays holds everything committed before this term.
- The quorum side: committed records and loaded snapshots delivered to the controller
  (RaftMetadataLog's listener), snapshots written and the log before them deleted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import structlog
import trio

from protocol.metadata.image import MetadataImage
from protocol.metadata.leadership import Claim, Elected, LeadershipChange, Lost
from protocol.metadata.records import NoOpRecord, encode_record
from raft.core import Role
from raft.driver import NotLeaderError, RaftDriver
from raft.log_store import SnapshotId
from raft.metadata_log import RaftMetadataLog, not_controller_message

log = structlog.get_logger("raft.leadership")


class RaftLeadership:
    def __init__(self, driver: RaftDriver, metadata_log: RaftMetadataLog) -> None:
        self.driver = driver
        self.metadata_log = metadata_log

    @property
    def node_id(self) -> int:
        return self.driver.config.node_id

    # -- Leadership ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.driver.started.wait()
        task_status.started()

    async def changes(self) -> AsyncIterator[LeadershipChange]:
        leading_in: int | None = None
        while True:
            changed = self.driver.role_changed
            leading = self.driver.role is Role.LEADER
            if leading_in is not None and (not leading or self.driver.epoch != leading_in):
                leading_in = None
                yield Lost("no longer the quorum leader" if not leading else "new epoch")
                continue
            if leading and leading_in is None:
                leading_in = self.driver.epoch
                yield Elected(leading_in)
            await changed.wait()

    @property
    def active_id(self) -> int | None:
        leader = self.driver.leader_id if self.driver.started.is_set() else -1
        return leader if leader >= 0 else None

    def not_controller_message(self) -> str:
        leader = self.active_id
        leading = self.driver.started.is_set() and self.driver.role is Role.LEADER
        return not_controller_message(
            self.node_id, -1 if leader is None else leader, leading=leading
        )

    async def claim(self, elected: Elected) -> Claim | None:
        try:
            # KRaft's leader claims its epoch with a record of its own; once it is applied the
            # state holds everything committed before this term.
            offset = await self.driver.propose([encode_record(NoOpRecord())])
            await self.metadata_log.wait_committed(offset)
        except NotLeaderError as exc:
            log.info("controller not activated", epoch=elected.epoch, error=exc.message)
            return None
        return Claim(image=None)

    def term_log(self) -> RaftMetadataLog:
        return self.metadata_log

    def writes_refused(self) -> BaseException | None:
        return None  # a deposed leader's appends fail with NotLeaderError (NOT_CONTROLLER)

    async def resign(self) -> None:
        await self.driver.resign()

    # -- MetadataQuorum -----------------------------------------------------------------------

    def add_listener(
        self,
        on_records: Callable[[Any], Awaitable[None]],
        on_image: Callable[[MetadataImage], Awaitable[None]],
    ) -> None:
        self.metadata_log.add_listener(on_records, on_image)

    async def create_snapshot(self, end_offset: int, data: bytes) -> SnapshotId:
        return await self.driver.create_snapshot(end_offset, data)

    async def delete_before_snapshot(self) -> int:
        return await self.driver.delete_before_snapshot()
