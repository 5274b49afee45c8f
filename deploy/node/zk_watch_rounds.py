"""What a ZK-mode broker's syncs from ZooKeeper share (ZkConfigSync, ZkAclSync): rounds of
`sync_once`, each started by a watch firing, a failed round retried after a backoff, and
`task_status.started()` once a first round has read everything."""

from __future__ import annotations

import math

import structlog
import trio

log = structlog.get_logger("deploy.node.broker")


class WatchRounds:
    """Subclasses read in `sync_once` and pass `_watch` to the ZooKeeper reads they watch."""

    WHAT = "data"
    """What the rounds read, for the warning a failed round logs."""

    def __init__(self, retry_backoff_s: float) -> None:
        self.retry_backoff_s = retry_backoff_s
        self._wake_send, self._wake_receive = trio.open_memory_channel[object](math.inf)

    def _watch(self, event: object) -> None:
        self._wake_send.send_nowait(event)

    async def sync_once(self) -> None:
        raise NotImplementedError

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        started = False
        while True:
            try:
                await self.sync_once()
            except Exception as exc:  # disconnected: kazoo errors; the next round reads again
                log.warning(f"reading {self.WHAT} from zookeeper failed", error=repr(exc))
                await trio.sleep(self.retry_backoff_s)
                continue
            if not started:
                task_status.started()
                started = True
            await self._wake_receive.receive()
            # Several watches may fire for one change: one round reads them all.
            while True:
                try:
                    self._wake_receive.receive_nowait()
                except trio.WouldBlock:
                    break
