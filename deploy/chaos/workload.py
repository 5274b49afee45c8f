"""The chaos run's clients (`trioka chaos run`): producers writing unique values with acks=all,
a consumer by assignment and consumers in a group, every call recorded in a History
(deploy.chaos.check.history's value contract), at a bounded rate.

    workload = Workload(bootstrap, history, WorkloadConfig(topic="chaos", partitions=6))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(workload.run)   # until cancelled
    await final_reads(bootstrap, history, "chaos", 6, within=60)

Processes (Jepsen's: one operation at a time each): `producer-<i>-<w>` (worker w of Producer
client i; several workers share one client so acks=all round trips overlap), `reader-0` (all
partitions assigned from the beginning), `group-<j>` (subscribed in the group), `final-0`.
Values are b"p<i>-<n>" with n counting per client: unique in the run. Partitions are chosen
round-robin per client, so every partition gets writes.

A send is `ok` with its partition and offset (None when the broker acknowledged a retried
batch as a duplicate without saying where: offset -1 from the client); `fail` only when send() itself refused it (no
request left: the record never reached a broker); anything after that (delivery timeout,
broken connection, a refused batch that may have been retried) is `info`: it may be written.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog
import trio

from client import Consumer, Producer, TopicPartition
from client.consumer_coordinator import ConsumerRebalanceListener
from client.errors import CommitFailedError, LogTruncationError, RebalanceInProgressError
from client.fetched_records import ConsumerRecord
from deploy.chaos.check.history import (
    FINAL_PREFIX,
    CommitValue,
    History,
    OpKind,
    OpType,
    PolledRecord,
    SendValue,
)
from protocol.errors import ErrorCode, KafkaError, TriokaError

log = structlog.get_logger("trioka.chaos")

__all__ = ["Workload", "WorkloadConfig", "final_reads"]

ERROR_BACKOFF_S = 0.2


@dataclass(frozen=True)
class WorkloadConfig:
    topic: str = "chaos"
    partitions: int = 6
    producers: int = 2
    """Producer clients."""
    workers: int = 4
    """Processes per producer client (each one send at a time)."""
    rate: float = 150.0
    """Sends per second, all producers together."""
    idempotence: bool = True
    group: str = "chaos-group"
    group_consumers: int = 2
    assigned_consumers: int = 1
    commit_every: int = 5
    """A group consumer commits (commitSync) every this many polls."""
    request_timeout_ms: int = 5000
    delivery_timeout_ms: int = 20000
    session_timeout_ms: int = 6000
    """The group members' session.timeout.ms."""
    producer_overrides: Mapping[str, Any] = field(default_factory=dict)
    client: Mapping[str, str] = field(default_factory=dict)
    """Every client's security settings (a `cluster up --secure` cluster's admin login)."""


def _polled(records: Iterable[ConsumerRecord]) -> tuple[PolledRecord, ...]:
    return tuple(PolledRecord(r.topic, r.partition, r.offset, r.value, r.key) for r in records)


def _raise_config_errors(exc: BaseException) -> None:
    """A client refusing its configs is the harness's bug: no point in starting it again."""
    if isinstance(exc, KafkaError) and exc.code is ErrorCode.INVALID_CONFIG:
        raise exc


class _RateLimiter:
    """Slots 1/rate apart shared by every worker: a steady total rate on a busy machine."""

    def __init__(self, rate: float) -> None:
        self._interval = 1.0 / rate
        self._next = 0.0

    async def wait(self) -> None:
        slot = max(trio.current_time(), self._next)
        self._next = slot + self._interval
        await trio.sleep_until(slot)


class _Recorder(ConsumerRebalanceListener):
    """Records a group member's every new assignment as an assign op (Jepsen resets the
    member's poll state there)."""

    def __init__(self, history: History, process: str) -> None:
        self.history, self.process = history, process

    def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        op = self.history.invoke(self.process, OpKind.ASSIGN, ())
        self.history.complete(op, OpType.OK, tuple(sorted(partitions)))


class Workload:
    def __init__(self, bootstrap: str, history: History, config: WorkloadConfig) -> None:
        self.bootstrap = bootstrap
        self.history = history
        self.config = config
        self.acked: Counter[int] = Counter()
        """Acknowledged sends per partition (nemeses wait on it)."""
        self.counts: Counter[str] = Counter()
        """ok/fail/info sends, polls, commits: progress for the run's report."""
        self._limiter = _RateLimiter(config.rate)
        self._acked_event = trio.Event()

    async def wait_acked(self, partition: int, count: int) -> None:
        """Until `partition` has `count` acknowledged sends in all."""
        while self.acked[partition] < count:
            await self._acked_event.wait()

    async def run(self) -> None:
        """Every client until cancelled."""
        async with trio.open_nursery() as nursery:
            for i in range(self.config.producers):
                nursery.start_soon(self._producer, i)
            for j in range(self.config.assigned_consumers):
                nursery.start_soon(self._reader, f"reader-{j}")
            for j in range(self.config.group_consumers):
                nursery.start_soon(self._group_member, f"group-{j}")

    # -- producers ------------------------------------------------------------------------------

    def _producer_config(self) -> dict[str, Any]:
        c = self.config
        return {
            **c.client,
            "bootstrap.servers": self.bootstrap,
            "acks": "all",
            "enable.idempotence": c.idempotence,
            "linger.ms": 0,
            "request.timeout.ms": c.request_timeout_ms,
            "delivery.timeout.ms": c.delivery_timeout_ms,
            "retry.backoff.ms": 100,
            "max.block.ms": c.request_timeout_ms,
            **c.producer_overrides,
        }

    async def _producer(self, index: int) -> None:
        counter = itertools.count()
        while True:
            try:
                async with (
                    Producer(self._producer_config()) as producer,
                    trio.open_nursery() as nursery,
                ):
                    for w in range(self.config.workers):
                        nursery.start_soon(self._send_loop, producer, index, w, counter)
            except (TriokaError, OSError) as exc:
                _raise_config_errors(exc)
                # The client died as a whole (e.g. no broker reachable at start): a new one.
                log.warning("chaos producer restarting", producer=index, error=str(exc))
                await trio.sleep(ERROR_BACKOFF_S)

    async def _send_loop(self, producer: Producer, index: int, worker: int,
                         counter: itertools.count[int]) -> None:  # fmt: skip
        process = f"producer-{index}-{worker}"
        topic, partitions = self.config.topic, self.config.partitions
        while True:
            await self._limiter.wait()
            n = next(counter)
            partition = (n + index) % partitions
            value = b"p%d-%06d" % (index, n)
            op = self.history.invoke(process, OpKind.SEND, SendValue(topic, value, None, partition))
            try:
                future = await producer.send(topic, value, partition=partition)
            except (TriokaError, OSError) as exc:
                self._done(op, OpType.FAIL, str(exc))  # refused before any request left
                await trio.sleep(ERROR_BACKOFF_S)
                continue
            try:
                md = await future
            except (TriokaError, OSError) as exc:
                self._done(op, OpType.INFO, str(exc))
                continue
            self.acked[md.partition] += 1
            self._acked_event.set()
            self._acked_event = trio.Event()
            self.counts["send-ok"] += 1
            # A retried batch the broker knew as a duplicate but no longer as where it landed
            # is acknowledged with offset -1 (as Kafka's DUPLICATE_SEQUENCE_NUMBER): written
            # once, position unknown to the history.
            offset = md.offset if md.offset >= 0 else None
            if offset is None:
                self.counts["send-ok-without-offset"] += 1
            self.history.complete(
                op, OpType.OK, SendValue(topic, value, None, md.partition, offset)
            )

    def _done(self, op: Any, type: OpType, error: str) -> None:
        self.counts[f"send-{type.value}"] += 1
        self.history.complete(op, type, error=error)

    # -- consumers ------------------------------------------------------------------------------

    def _consumer_config(self, **extra: Any) -> dict[str, Any]:
        return {
            **self.config.client,
            "bootstrap.servers": self.bootstrap,
            "auto.offset.reset": "earliest",
            "request.timeout.ms": self.config.request_timeout_ms,
            "default.api.timeout.ms": self.config.request_timeout_ms * 2,
            **extra,
        }

    def _all_partitions(self) -> list[TopicPartition]:
        return [TopicPartition(self.config.topic, p) for p in range(self.config.partitions)]

    async def _reader(self, process: str) -> None:
        while True:
            try:
                async with Consumer(self._consumer_config()) as consumer:
                    tps = self._all_partitions()
                    consumer.assign(tps)
                    consumer.seek_to_beginning(*tps)
                    op = self.history.invoke(process, OpKind.ASSIGN, ())
                    self.history.complete(op, OpType.OK, tuple(tps))
                    while True:
                        await self._poll_once(consumer, process)
            except (TriokaError, OSError) as exc:
                _raise_config_errors(exc)
                log.warning("chaos reader restarting", process=process, error=str(exc))
                await trio.sleep(ERROR_BACKOFF_S)

    async def _poll_once(self, consumer: Consumer, process: str) -> list[ConsumerRecord]:
        op = self.history.invoke(process, OpKind.POLL, ())
        try:
            records = await consumer.poll(500)
        except LogTruncationError as exc:
            # An unclean election cut the log under the consumer: go on where the new leader's
            # log parts from ours, recorded as a seek.
            self.history.complete(op, OpType.INFO, error=str(exc))
            self._seek_after_truncation(consumer, process, exc)
            return []
        except (TriokaError, OSError) as exc:
            self.counts["poll-info"] += 1
            self.history.complete(op, OpType.INFO, error=str(exc))
            await trio.sleep(ERROR_BACKOFF_S)
            return []
        self.counts["poll-ok"] += 1
        self.history.complete(op, OpType.OK, _polled(records))
        return records

    def _seek_after_truncation(self, consumer: Consumer, process: str,
                               exc: LogTruncationError) -> None:  # fmt: skip
        positions = {
            tp: exc.divergent_offsets[tp].offset if tp in exc.divergent_offsets else 0
            for tp in exc.fetch_offsets
        }
        op = self.history.invoke(process, OpKind.SEEK, {})
        for tp, offset in positions.items():
            consumer.seek(tp, offset)
        self.history.complete(op, OpType.OK, positions)

    async def _group_member(self, process: str) -> None:
        group = self.config.group
        while True:
            try:
                async with Consumer(self._consumer_config(**{
                    "group.id": group, "enable.auto.commit": False,
                    "session.timeout.ms": self.config.session_timeout_ms,
                    "heartbeat.interval.ms": self.config.session_timeout_ms // 3,
                })) as consumer:  # fmt: skip
                    consumer.subscribe([self.config.topic], _Recorder(self.history, process))
                    polls = 0
                    while True:
                        await self._poll_once(consumer, process)
                        polls += 1
                        if polls % self.config.commit_every == 0:
                            await self._commit(consumer, process, group)
            except (TriokaError, OSError) as exc:
                _raise_config_errors(exc)
                log.warning("chaos group member restarting", process=process, error=str(exc))
                await trio.sleep(ERROR_BACKOFF_S)

    async def _commit(self, consumer: Consumer, process: str, group: str) -> None:
        offsets = consumer.consumed_offsets()
        if not offsets:
            return
        value = CommitValue(group, {tp: om.offset for tp, om in offsets.items()})
        op = self.history.invoke(process, OpKind.COMMIT, value)
        try:
            await consumer.commit(offsets)
        except (CommitFailedError, RebalanceInProgressError) as exc:
            # The coordinator refused it: not written (Kafka's CommitFailedException).
            self.counts["commit-fail"] += 1
            self.history.complete(op, OpType.FAIL, error=str(exc))
            return
        except (KafkaError, OSError) as exc:
            self.counts["commit-info"] += 1
            self.history.complete(op, OpType.INFO, error=str(exc))
            return
        self.counts["commit-ok"] += 1
        self.history.complete(op, OpType.OK)


async def final_reads(
    bootstrap: str,
    history: History,
    topic: str,
    partitions: int,
    *,
    within: float = 60.0,
    request_timeout_ms: int = 5000,
    client: Mapping[str, str] | None = None,
) -> dict[TopicPartition, int]:
    """A fresh consumer (process "final-0") reads every partition from the beginning to the
    end offset it finds first; every poll is recorded. Returns the end offsets; trio.TooSlowError
    when the end is not reached within `within` s."""
    process = FINAL_PREFIX + "0"
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    config = {
        **(client or {}),
        "bootstrap.servers": bootstrap,
        "auto.offset.reset": "earliest",
        "request.timeout.ms": request_timeout_ms,
        "default.api.timeout.ms": request_timeout_ms * 2,
    }
    with trio.fail_after(within):
        async with Consumer(config) as consumer:
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            op = history.invoke(process, OpKind.ASSIGN, ())
            history.complete(op, OpType.OK, tuple(tps))
            ends = await consumer.end_offsets(tps)
            positions = dict.fromkeys(tps, 0)
            polled_once = False
            while not polled_once or any(positions[tp] < ends[tp] for tp in tps):
                op = history.invoke(process, OpKind.POLL, ())
                try:
                    records = await consumer.poll(1000)
                except (TriokaError, OSError) as exc:
                    history.complete(op, OpType.INFO, error=str(exc))
                    await trio.sleep(ERROR_BACKOFF_S)
                    continue
                history.complete(op, OpType.OK, _polled(records))
                polled_once = True
                for r in records:
                    tp = TopicPartition(r.topic, r.partition)
                    positions[tp] = max(positions[tp], r.offset + 1)
                # Offsets without a record (never here: no compaction) would stall the loop;
                # the consumer's position says where it is.
                for tp in tps:
                    positions[tp] = max(positions[tp], await consumer.position(tp))
    return ends
