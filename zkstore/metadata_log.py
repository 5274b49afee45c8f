"""ZkMetadataLog: the controller's MetadataLog (controller.ports) in ZooKeeper mode.

`append(records)` turns the records into Kafka's znode writes (record_writes.plan_writes) and
applies them as fenced multi-ops (fenced_writer.FencedWriter); a write that succeeded is
committed, so `wait_committed` only waits for an append still in progress. ZooKeeper keeps no
log, so offsets are a count of records committed since this controller loaded the state: the
loaded records are offsets 0..n-1 (`LoadedMetadata.offset_records()`), appends continue from n,
which is what the controller driver's offset bookkeeping needs.

Failures:
- ControllerMovedError (NOT_CONTROLLER): this controller was fenced (another one was elected);
  every later append raises it too. The controller resigns.
- ZkMetadataWriteError: a write failed otherwise. When nothing was applied the log stays
  usable; when part of a split change was applied (`partial`) ZooKeeper no longer matches this
  controller's state and every later append raises NOT_CONTROLLER: the controller must resign
  so that a fresh load (here or on another broker) starts from what ZooKeeper holds.
- KafkaError (UNKNOWN_SERVER_ERROR) for records that do not fit the loaded state; nothing is
  written.

Listeners (`add_listener(async fn(Sequence[OffsetRecord]))`) get each committed append in
offset order before `append` returns, as raft.local_log.LocalMetadataLog's do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import structlog
import trio
from kazoo.exceptions import KazooException

from protocol.errors import ErrorCode, KafkaError
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import MetadataRecord, OffsetRecord
from zkstore.client import ZkClient
from zkstore.errors import ControllerMovedError, ZkMetadataWriteError
from zkstore.fenced_writer import DEFAULT_MAX_IN_FLIGHT, JUTE_MAXBUFFER, FencedWriter
from zkstore.loader import LoadedMetadata
from zkstore.record_writes import ExistingTopicZNodes, ZkMirror, plan_writes, topics_to_read
from zkstore.znodes import (
    ConfigEntityZNode,
    DeleteTopicZNode,
    TopicPartitionsZNode,
    TopicZNode,
)

log = structlog.get_logger("zkstore.metadata_log")

Listener = Callable[[Sequence[OffsetRecord]], Awaitable[None]]


class ZkMetadataLog:
    """The metadata log of the active controller elected with (epoch, epoch_zk_version)."""

    def __init__(
        self,
        zk: ZkClient,
        *,
        epoch: int,
        epoch_zk_version: int,
        mirror: ZkMirror | None = None,
        start_offset: int = 0,
        max_request_bytes: int = JUTE_MAXBUFFER,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        self._zk = zk
        self.epoch = epoch
        self._mirror = mirror if mirror is not None else ZkMirror(MetadataImage.empty())
        self._mirror.controller_epoch = epoch
        self._writer = FencedWriter(
            zk, epoch_zk_version, max_request_bytes=max_request_bytes, max_in_flight=max_in_flight
        )
        self._committed = start_offset - 1
        self._listeners: list[Listener] = []
        self._lock = trio.Lock()
        self._progress = trio.Event()
        self._failure: KafkaError | None = None
        self.last_write_multi_ops = 0

    @classmethod
    def from_loaded(
        cls,
        zk: ZkClient,
        loaded: LoadedMetadata,
        *,
        epoch: int,
        epoch_zk_version: int,
        **kwargs: int,
    ) -> ZkMetadataLog:
        """Continue after the loaded records (offsets 0..n-1)."""
        return cls(
            zk,
            epoch=epoch,
            epoch_zk_version=epoch_zk_version,
            mirror=loaded.mirror(epoch),
            start_offset=len(loaded.records),
            **kwargs,
        )

    # -- state ---------------------------------------------------------------------------------

    @property
    def epoch_zk_version(self) -> int:
        return self._writer.epoch_zk_version

    @property
    def committed_offset(self) -> int:
        return self._committed

    @property
    def end_offset(self) -> int:
        return self._committed + 1

    @property
    def image(self) -> MetadataImage:
        """The metadata as written to ZooKeeper so far."""
        return self._mirror.image

    @property
    def mirror(self) -> ZkMirror:
        return self._mirror

    @property
    def failure(self) -> KafkaError | None:
        """Set once the log refuses appends (fenced, or ZooKeeper left half-written)."""
        return self._failure

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # -- MetadataLog port ----------------------------------------------------------------------

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        """Write `records` to ZooKeeper as fenced multi-ops; returns the last one's offset."""
        if not records:
            raise ValueError("append needs at least one record")
        async with self._lock:
            if self._failure is not None:
                raise self._failure
            try:
                existing = await self._read_existing(topics_to_read(self._mirror, records))
            except KazooException as exc:
                raise ZkMetadataWriteError(
                    f"reading ZooKeeper before the write failed: {exc!r}", partial=False
                ) from None
            plan = plan_writes(self._mirror, records, existing)
            try:
                result = await self._writer.write(plan.ops)
            except ControllerMovedError as exc:
                self._failure = exc
                self._wake()
                raise
            except ZkMetadataWriteError as exc:
                if exc.partial:
                    self._failure = ZkMetadataWriteError(
                        "an earlier metadata write was applied only in part; this controller "
                        f"must resign and reload from ZooKeeper ({exc.message})",
                        partial=True,
                    )
                    self._wake()
                raise
            plan.apply_to(self._mirror)
            first = self._committed + 1
            batch = [OffsetRecord(first + i, r) for i, r in enumerate(records)]
            self._committed = batch[-1].offset
            self.last_write_multi_ops = result.multi_ops
            with trio.CancelScope(shield=True):
                for listener in self._listeners:
                    await listener(batch)
            self._wake()
            return self._committed

    def _wake(self) -> None:
        self._progress.set()
        self._progress = trio.Event()

    async def wait_committed(self, offset: int) -> None:
        """Return once `offset` is committed; raises the log's failure if it can never be."""
        while offset > self._committed:
            if self._failure is not None:
                raise self._failure
            if not self._lock.locked():
                raise KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"offset {offset} was never appended (last committed {self._committed})",
                )
            await self._progress.wait()

    # -- reads before a write ----------------------------------------------------------------------

    async def _read_existing(self, names: Sequence[str]) -> dict[str, ExistingTopicZNodes]:
        existing: dict[str, ExistingTopicZNodes] = {}
        for name in names:
            partitions_path = TopicPartitionsZNode.path(name)
            partitions = await self._zk.get_children_many([partitions_path])
            paths: list[str] = []
            if partitions[0] is not None:
                numbers = sorted(partitions[0], key=lambda p: (len(p), p))
                part_paths = [f"{partitions_path}/{p}" for p in numbers]
                for part_path, children in zip(
                    part_paths, await self._zk.get_children_many(part_paths), strict=True
                ):
                    paths.extend(f"{part_path}/{c}" for c in sorted(children or ()))
                    paths.append(part_path)
                paths.append(partitions_path)
            if await self._zk.exists(TopicZNode.path(name)) is not None:
                paths.append(TopicZNode.path(name))
            config = await self._zk.exists(ConfigEntityZNode.path("topics", name))
            marker = await self._zk.exists(DeleteTopicZNode.path(name))
            existing[name] = ExistingTopicZNodes(
                tuple(paths),
                config_exists=config is not None,
                delete_marker_exists=marker is not None,
            )
        return existing


__all__ = ["ZkMetadataLog"]
