"""RaftMetadataLog: the metadata-log adapter between a RaftDriver and the controller.

It implements controller.ports.MetadataLog structurally (raft does not import controller):
`append(records)` encodes them and hands them to the driver (`RaftDriver.append`), returning
the last offset as soon as the leader accepted them (not committed yet: the controller
pipelines its next write meanwhile); `wait_committed(offset)` returns once the listeners were
given that offset, and raises KafkaError NOT_CONTROLLER when the append ending there will never
commit here (abandoned, leadership lost, or another leader's entry committed at its offset).

Listeners (`add_listener(on_records, on_image=None)`) get what the driver commits, in offset
order, as `(offset, record)` pairs (`OffsetRecord`), and a snapshot the driver loads (at
start-up, or a follower that fell behind the leader's log start) as a MetadataImage
(`image_from_snapshot`) that replaces whatever they held.

Offsets without a record: the driver skips Raft control entries (the leader's first entry of
each epoch), so committed offsets have holes. Every hole is delivered as a `NoOpRecord` at its
offset: a control entry changes no metadata but does take an offset, and this way a consumer's
replay (controller.state.ControllerState.replay) can stay strict about gaps, which catches a
record that really went missing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import trio

from protocol.errors import ErrorCode, KafkaError
from protocol.metadata.image import MetadataImage
from protocol.metadata.records import (
    MetadataRecord,
    NoOpRecord,
    OffsetRecord,
    decode_record,
    encode_record,
)
from protocol.metadata.snapshot import image_from_snapshot
from raft.driver import NotLeaderError, Proposal, RaftDriver
from raft.log_store import Entry, SnapshotId


@dataclass(frozen=True, slots=True)
class CommittedRecords:
    """One run of committed records of one leader epoch."""

    records: Sequence[OffsetRecord]
    """In offset order, without holes (control entries as NoOpRecords)."""
    epoch: int
    """The leader epoch they were appended in."""
    size_bytes: int
    """Their encoded size (what KRaft counts toward the next snapshot)."""


RecordsListener = Callable[[CommittedRecords], Awaitable[None]]
ImageListener = Callable[[MetadataImage], Awaitable[None]]


def not_controller_message(node_id: int, leader_id: int, *, leading: bool = False) -> str:
    """What a controller that is not the active one says: the leader it knows, or that there
    is none. `leading`: this node is the Raft leader (its term is starting)."""
    if leader_id >= 0 and leader_id != node_id:
        return (
            f"controller {node_id} is not the active controller; "
            f"the active controller is {leader_id}"
        )
    if leader_id == node_id and leading:
        return f"controller {node_id} is not the active controller yet (it is taking over)"
    # A leader id naming this node while it does not lead is its own stale hint (resigned,
    # or a pre-vote after losing its quorum).
    return f"controller {node_id} is not the active controller; no active controller"


class RaftMetadataLog:
    """The MetadataLog of a Raft controller. Build it (and add listeners) before `driver.run`."""

    def __init__(self, driver: RaftDriver, *, cluster_id: str = "") -> None:
        self._driver = driver
        self._cluster_id = cluster_id
        self._record_listeners: list[RecordsListener] = []
        self._image_listeners: list[ImageListener] = []
        self._next_offset = 0
        self._progress = trio.Event()
        self._proposals: dict[int, Proposal] = {}
        """Accepted appends by last offset, until `wait_committed` saw them end."""
        driver.add_listener(self._on_committed, self._on_snapshot)

    def add_listener(
        self, on_records: RecordsListener, on_image: ImageListener | None = None
    ) -> None:
        self._record_listeners.append(on_records)
        if on_image is not None:
            self._image_listeners.append(on_image)

    @property
    def applied_end_offset(self) -> int:
        """Where the next record the listeners get will be (every offset below was given)."""
        return self._next_offset

    # -- controller.ports.MetadataLog ---------------------------------------------------------

    async def append(self, records: Sequence[MetadataRecord]) -> int:
        """Propose `records` as one batch; the last offset once the leader accepted them
        (`wait_committed` for the commit). KafkaError NOT_CONTROLLER naming the leader when
        this node does not lead."""
        try:
            proposal = await self._driver.append([encode_record(r) for r in records])
        except NotLeaderError as exc:
            raise self._not_controller(exc) from None
        self._forget_finished()
        self._proposals[proposal.last_offset] = proposal
        return proposal.last_offset

    async def wait_committed(self, offset: int) -> None:
        """Return once every record up to `offset` is committed and delivered. For an offset
        `append` returned: NOT_CONTROLLER when that append will not commit here."""
        proposal = self._proposals.get(offset)
        if proposal is not None:
            try:
                await proposal.wait_committed()
            except NotLeaderError as exc:
                raise self._not_controller(exc) from None
            finally:
                if proposal.done.is_set():
                    self._proposals.pop(offset, None)
        while self._next_offset <= offset:
            await self._progress.wait()

    def _not_controller(self, exc: NotLeaderError) -> KafkaError:
        return KafkaError(
            ErrorCode.NOT_CONTROLLER,
            f"{not_controller_message(self._driver.config.node_id, exc.leader_id)}: {exc.message}",
        )

    def _forget_finished(self) -> None:
        """Drop finished proposals nobody waited for (a caller that gave up)."""
        if len(self._proposals) > 64:
            for offset in [o for o, p in self._proposals.items() if p.done.is_set()]:
                del self._proposals[offset]

    # -- the driver's listeners -------------------------------------------------------------

    async def _on_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        image = image_from_snapshot(
            data, snapshot_id.end_offset, snapshot_id.epoch, self._cluster_id
        )
        for on_image in self._image_listeners:
            await on_image(image)
        self._next_offset = snapshot_id.end_offset
        self._wake()

    async def _on_committed(self, entries: Sequence[Entry]) -> None:
        for run in self._epoch_runs(entries):
            for on_records in self._record_listeners:
                await on_records(run)
            self._next_offset = run.records[-1].offset + 1
        self._wake()

    def _epoch_runs(self, entries: Sequence[Entry]) -> list[CommittedRecords]:
        """Entries as runs of one epoch, holes filled with NoOpRecords (a hole takes the epoch
        of the entry after it: the control entry that made it opened that epoch)."""
        runs: list[CommittedRecords] = []
        records: list[OffsetRecord] = []
        size = 0
        epoch = -1
        expected = self._next_offset
        for entry in entries:
            if entry.offset < expected:
                continue  # delivered already (a snapshot loaded past it)
            if records and entry.epoch != epoch:
                runs.append(CommittedRecords(records, epoch, size))
                records, size = [], 0
            epoch = entry.epoch
            records.extend(OffsetRecord(o, NoOpRecord()) for o in range(expected, entry.offset))
            records.append(OffsetRecord(entry.offset, decode_record(entry.data)))
            size += len(entry.data)
            expected = entry.offset + 1
        if records:
            runs.append(CommittedRecords(records, epoch, size))
        return runs

    def _wake(self) -> None:
        self._progress.set()
        self._progress = trio.Event()
