"""The group coordinator's trio driver: it owns the pure core, runs its timers, loads offsets
partitions when this broker becomes their leader, and appends to them (Kafka's
GroupMetadataManager store paths and scheduler).

Waiting JoinGroup/SyncGroup requests park here on their `WaitKey` (a trio.Event each), never in
a loop; the timer task sleeps until the core's next deadline or until a call changed them.
Appends to `__consumer_offsets` are made as its leader, with acks=all, and complete once the
HW passes them (offsets.commit.timeout.ms, else REQUEST_TIMED_OUT).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog
import trio

from broker.group.coordinator import GroupCoordinatorCore
from broker.group.effects import (
    Effects,
    Outcome,
    Response,
    StoreGroup,
    WaitKey,
    join_error,
    sync_error,
)
from broker.group.hashing import OFFSETS_TOPIC
from broker.group.loader import PartitionLoader
from broker.group.records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    encode_key,
    encode_value,
)
from broker.partitions import Partition, PartitionManager
from broker.ports import Failpoints
from broker.purgatory import FetchPurgatory
from protocol.clock import SYSTEM_CLOCK
from protocol.errors import CorruptRecordBatchError, ErrorCode, KafkaError
from protocol.log_context import detached
from protocol.names import TopicPartition
from protocol.record_batch import Record, build_batch, decode_records, iter_batches

log = structlog.get_logger("broker.group")

Entry = tuple[OffsetKey | GroupKey, OffsetValue | GroupValue | None]

# Kafka's GroupMetadataManager maps append errors for the group's clients.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


@dataclass(frozen=True, slots=True)
class DriverConfig:
    commit_timeout_ms: int = 5000
    load_buffer_bytes: int = 5 * 1024 * 1024
    retention_check_interval_ms: int = 600_000
    load_timeout_ms: int = 30_000
    """How long a load waits for the HW to reach the log end it found at election."""


class _Slot:
    __slots__ = ("event", "response")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.response: Response | None = None


class GroupCoordinatorDriver:
    def __init__(
        self,
        core: GroupCoordinatorCore,
        *,
        partitions: PartitionManager,
        notify: Callable[[TopicPartition], None],
        hw_purgatory: FetchPurgatory,
        config: DriverConfig = DriverConfig(),
        clock_ms: Callable[[], int] = SYSTEM_CLOCK.wall_ms,
        failpoints: Failpoints | None = None,
    ) -> None:
        self.core = core
        self.partitions = partitions
        self.notify = notify
        """After an append (followers' long polls) and a HW move (waiting appends)."""
        self.hw_purgatory = hw_purgatory
        self.config = config
        self.clock_ms = clock_ms
        self.failpoints = failpoints
        self._waiters: dict[WaitKey, _Slot] = {}
        self._nursery: trio.Nursery | None = None
        self._queued: list[tuple[str, int, int | None]] = []
        self._wake = trio.Event()

    # -- leadership of offsets partitions (Kafka's onElection / onResignation) ---------------

    def on_leadership(
        self,
        elected: Sequence[tuple[TopicPartition, int]],
        resigned: Sequence[tuple[TopicPartition, int | None]],
    ) -> None:
        """Called by the partition change applier after each change set (any topic)."""
        for tp, epoch in resigned:
            if tp.topic == OFFSETS_TOPIC:
                self._queued.append(("resign", tp.partition, epoch))
        for tp, epoch in elected:
            if tp.topic == OFFSETS_TOPIC:
                self._queued.append(("elect", tp.partition, epoch))
        if self._nursery is not None:
            self._drain_queue()

    def _drain_queue(self) -> None:
        assert self._nursery is not None
        queued, self._queued = self._queued, []
        for what, partition, epoch in queued:
            if what == "resign":
                log.info("group coordinator resigning", partition=partition, epoch=epoch)
                self.apply(self.core.unload(partition, epoch))
            else:
                assert epoch is not None
                effects = self.core.begin_load(partition, epoch)
                if effects is None:
                    continue  # already leading in this epoch (an ISR change)
                log.info("group coordinator loading", partition=partition, epoch=epoch)
                self.apply(effects)
                self._nursery.start_soon(detached(self._load), partition, epoch)

    # -- running ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._drain_queue()
            nursery.start_soon(self._timer_loop)
            nursery.start_soon(self._expiry_loop)
            task_status.started()

    async def _timer_loop(self) -> None:
        while True:
            self._wake = trio.Event()
            deadline = self.core.next_deadline()
            if deadline is None:
                await self._wake.wait()
            else:
                with trio.move_on_after(max(deadline - self.clock_ms(), 0) / 1000):
                    await self._wake.wait()
            self.apply(self.core.tick(self.clock_ms()))

    async def _expiry_loop(self) -> None:
        interval = self.config.retention_check_interval_ms
        while True:
            await trio.sleep(interval / 1000)
            for partition, tombstones in self.core.expire_offsets(self.clock_ms()).items():
                log.info("expiring offsets", partition=partition, records=len(tombstones))
                assert self._nursery is not None
                self._nursery.start_soon(self.append, partition, tombstones)

    def apply(self, effects: Effects) -> None:
        """Answer parked requests, start group stores, and let the timer see new deadlines."""
        for delivery in effects.deliveries:
            slot = self._waiters.pop(delivery.key, None)
            if slot is not None:
                slot.response = delivery.response
                slot.event.set()
        for store in effects.stores:
            if self._nursery is not None:
                self._nursery.start_soon(self._store_group, store)
        self._wake.set()

    async def answer(self, outcome: Outcome) -> Response:
        """The caller's response: at once, or once a delivery for its key arrives."""
        self.apply(outcome.effects)
        if outcome.response is not None:
            return outcome.response
        assert outcome.key is not None
        slot = _Slot()
        old = self._waiters.get(outcome.key)
        if old is not None:  # a retried SyncGroup: the parked one is told, not left hanging
            _, member, kind = outcome.key
            self._answer(
                old,
                kind,
                member,
                ErrorCode.REBALANCE_IN_PROGRESS,
                "superseded by a newer request of the same member",
            )
        self._waiters[outcome.key] = slot
        try:
            await slot.event.wait()
        finally:
            if self._waiters.get(outcome.key) is slot:
                del self._waiters[outcome.key]
        assert slot.response is not None
        return slot.response

    def shutdown(self) -> None:
        """The broker is stopping: every parked JoinGroup/SyncGroup is answered NOT_COORDINATOR
        at once (their members find the next coordinator), so the drain does not wait for
        rebalance timeouts."""
        message = "the coordinator's broker is shutting down"
        for (_group, member, kind), slot in list(self._waiters.items()):
            self._answer(slot, kind, member, ErrorCode.NOT_COORDINATOR, message)
        self._waiters.clear()

    @staticmethod
    def _answer(slot: _Slot, kind: str, member: str, code: ErrorCode, message: str) -> None:
        slot.response = (
            join_error(code, message, member) if kind == "join" else sync_error(code, message)
        )
        slot.event.set()

    async def _store_group(self, store: StoreGroup) -> None:
        code, message = await self.append(store.partition, [(store.key, store.value)])
        if code != ErrorCode.NONE:
            log.warning(
                "storing group metadata failed",
                group_id=store.group_id,
                generation=store.generation,
                error=code.name,
                message=message,
            )
        self.apply(
            self.core.group_stored(store.group_id, store.generation, code, message, self.clock_ms())
        )

    # -- appends ---------------------------------------------------------------------------

    def _leader_of(self, index: int) -> tuple[Partition | None, str]:
        tp = TopicPartition(OFFSETS_TOPIC, index)
        owned = self.core.owned.get(index)
        partition = self.partitions.get(tp)
        if (
            owned is None
            or partition is None
            or not partition.state.is_leader
            or partition.state.leader_epoch != owned.epoch
        ):
            return None, f"this broker no longer coordinates the groups of {tp}"
        return partition, ""

    async def append(self, index: int, entries: Sequence[Entry]) -> tuple[ErrorCode, str]:
        """Append `entries` to offsets partition `index` as its leader and wait until they are
        replicated (HW past them), at most offsets.commit.timeout.ms."""
        partition, message = self._leader_of(index)
        if partition is None:
            return ErrorCode.NOT_COORDINATOR, message
        now = self.clock_ms()
        batch = build_batch(
            [Record(value=encode_value(v), key=encode_key(k), timestamp=now) for k, v in entries]
        )
        try:
            partition.state.check_append(-1)
            info = partition.log.append_as_leader(batch, partition.state.leader_epoch)
        except KafkaError as exc:
            return _APPEND_ERRORS.get(exc.code, exc.code), exc.message
        except OSError as exc:
            return ErrorCode.NOT_COORDINATOR, f"disk error appending to {partition.tp}: {exc}"
        partition.state.update_local_leo(partition.log.log_end_offset)
        self.notify(partition.tp)
        return await self._await_replicated(partition, info.last_offset + 1)

    async def _await_replicated(self, partition: Partition, required: int) -> tuple[ErrorCode, str]:
        tp = partition.tp
        timeout_ms = self.config.commit_timeout_ms
        with trio.move_on_after(timeout_ms / 1000):
            while True:
                if self.partitions.get(tp) is not partition:
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    break
                done, code = partition.state.check_enough_replicas_reach_offset(required)
                if done:
                    break
                if self.hw_purgatory.closed:
                    return ErrorCode.NOT_COORDINATOR, "the coordinator's broker is shutting down"
                event = self.hw_purgatory.watch([tp])
                try:
                    await event.wait()
                finally:
                    self.hw_purgatory.unwatch([tp], event)
            if code == ErrorCode.NONE:
                return code, ""
            return _APPEND_ERRORS.get(code, code), f"{tp}: {code.name} while replicating"
        return (
            ErrorCode.REQUEST_TIMED_OUT,
            f"{tp}: not replicated within offsets.commit.timeout.ms={timeout_ms}",
        )

    # -- loading ---------------------------------------------------------------------------

    async def _load(self, index: int, epoch: int) -> None:
        """Read the partition up to the log end found at election, as far as the HW allows,
        waiting for the HW to get there; then hand the groups to the core (which discards the
        load if the partition moved on meanwhile)."""
        started = self.partitions.clock.monotonic_ms()
        tp = TopicPartition(OFFSETS_TOPIC, index)
        loader = PartitionLoader(
            lambda problem: log.warning(
                "skipping offsets record", topic_partition=str(tp), problem=problem
            ),
            owns_group=lambda group_id: self.core.partition_of(group_id) == index,
        )
        partition = self.partitions.get(tp)
        if partition is None:
            return
        hold = (
            None if self.failpoints is None else self.failpoints.eval("group.coordinator.hold_load")
        )
        if hold is not None:
            hold_s = float(hold) if isinstance(hold, int | float) and hold is not True else 5.0
            log.warning(
                "failpoint: holding the offsets load", topic_partition=str(tp), hold_s=hold_s
            )
            await trio.sleep(hold_s)
        target = partition.log.log_end_offset
        offset = partition.log.log_start_offset
        with trio.move_on_after(self.config.load_timeout_ms / 1000) as scope:
            while offset < target:
                current, _ = self._leader_of(index)
                if current is None or current.state.leader_epoch != epoch:
                    log.info("offsets load abandoned", topic_partition=str(tp), epoch=epoch)
                    return
                limit = min(current.state.high_watermark, target)
                if offset < limit:
                    try:
                        offset = self._read_chunk(current, offset, limit, loader)
                    except (CorruptRecordBatchError, KafkaError) as exc:
                        await self._retry_load_later(index, epoch, offset, exc)
                        return
                    await trio.lowlevel.checkpoint()
                    continue
                if self.hw_purgatory.closed:
                    return  # shutting down
                event = self.hw_purgatory.watch([tp])
                try:
                    await event.wait()
                finally:
                    self.hw_purgatory.unwatch([tp], event)
        if scope.cancelled_caught:
            log.warning("offsets load timed out; retrying", topic_partition=str(tp), epoch=epoch)
            if self._nursery is not None and self.core.owned.get(index) is not None:
                self._nursery.start_soon(self._load, index, epoch)
            return
        loaded = loader.result()
        if self.core.complete_load(index, epoch, loaded, self.clock_ms()):
            log.info(
                "offsets partition loaded",
                topic_partition=str(tp),
                epoch=epoch,
                groups=len(set(loaded.groups) | set(loaded.offsets)),
                end_offset=target,
                duration_ms=self.partitions.clock.monotonic_ms() - started,
            )
            self._wake.set()
        else:
            log.info(
                "offsets load discarded (partition moved on)", topic_partition=str(tp), epoch=epoch
            )

    async def _retry_load_later(self, index: int, epoch: int, offset: int, exc: Exception) -> None:
        """A batch header the log cannot parse, or a storage error: the partition's groups
        stay COORDINATOR_LOAD_IN_PROGRESS (never served from half a log) and the whole load is
        tried again after request.timeout.ms, while this broker still leads in `epoch`."""
        log.error(
            "offsets load failed; retrying",
            topic_partition=f"{OFFSETS_TOPIC}-{index}",
            epoch=epoch,
            offset=offset,
            error=str(exc),
        )
        await trio.sleep(self.config.load_timeout_ms / 1000)
        owned = self.core.owned.get(index)
        if self._nursery is not None and owned is not None and owned.epoch == epoch:
            self._nursery.start_soon(self._load, index, epoch)

    def _read_chunk(
        self, partition: Partition, offset: int, limit: int, loader: PartitionLoader
    ) -> int:
        """Feed the batches from `offset` below `limit` to the loader; the next offset."""
        result = partition.log.read(
            offset, self.config.load_buffer_bytes, max_offset=limit, min_one_batch=True
        )
        data = bytes(result.data)
        if not data:
            return limit
        for pos, header in iter_batches(data, verify_crc=False):
            try:
                records = decode_records(data, pos, verify_crc=False)
            except CorruptRecordBatchError as exc:
                log.warning(
                    "skipping corrupt offsets batch",
                    topic_partition=str(partition.tp),
                    error=str(exc),
                )
            else:
                loader.feed((r.key, r.value) for r in records)
            offset = header.next_offset
        return offset
