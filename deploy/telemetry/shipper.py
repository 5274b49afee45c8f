"""The shipper's trio driver: buffer -> (cluster | spool), spool -> cluster, metrics every interval.

    shipper = TelemetryShipper(settings, Source("broker", 1, host, pid))
    shipper.capture()                        # the log tee fills the buffer from now on
    ...                                      # the process starts its broker or controller
    shipper.bootstrap = lambda: ["127.0.0.1:9092"]
    await nursery.start(shipper.run)         # ships until cancelled; then spools what is left

Two tasks. The metrics loop queues a MetricsSnapshot of prometheus_client's REGISTRY every
`metrics.interval.ms` (the first at once) and reports what the bounds dropped (counter + one
warning per interval). The ship loop takes the buffer every `linger_s`, serialises it (JSON,
`seq` added: per topic, from 0 in each process run, so a reader can count losses and
duplicates) and either produces it or appends it to the spool (telemetry.policy decides), then
drains the spool while the cluster takes it.

Producing: one client Producer, acks=all with idempotence (the client's default pair): the
telemetry describes failovers, so a record acknowledged by a leader that dies just after must
not be lost (acks=1 would lose it), and a retry must not write it twice. Its latency costs
nothing here: nobody waits on it but this task. Any failure (no broker known, topics not
creatable yet, connection refused, timeout, a produce error) closes the producer, spools the
records not acknowledged and backs off; a new producer is made for the next attempt. A record
that can never be produced (larger than MAX_RECORD_BYTES, or refused as too large) is dropped
and counted instead of blocking the spool forever. The producer lives in a task of its own
(`_producer_session`) so that its nursery nests properly whatever scope the ship loop is in.
When the shipper is cancelled the buffer goes to the spool: the next run of the process drains
it.

Everything this shipper's tasks log is muted for the tee (telemetry.tee.MUTED).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import structlog
import trio
from prometheus_client import REGISTRY
from prometheus_client.registry import Collector, CollectorRegistry

from client import Admin, Producer
from client.admin import NewTopic
from deploy.telemetry import json_text
from deploy.telemetry.buffer import DEFAULT_MAX_RECORDS, Entry, TelemetryBuffer
from deploy.telemetry.metrics import RECORDS_DROPPED, RECORDS_SHIPPED, RECORDS_SPOOLED
from deploy.telemetry.policy import Route, ShipPolicy
from deploy.telemetry.settings import TelemetrySettings
from deploy.telemetry.snapshot import snapshot
from deploy.telemetry.spool import Spool, SpoolRecord
from deploy.telemetry.tee import LOG_TEE, MUTED, LogTee
from deploy.telemetry.topics import (
    SHIPPED_TOPICS,
    TELEMETRY_PARTITIONS,
    TOPIC_CONFIGS,
    creation_replication_factor,
)
from protocol.clock import SYSTEM_CLOCK, Clock
from protocol.errors import ErrorCode, KafkaError, TriokaError
from protocol.telemetry import LOGS_TOPIC, METRICS_TOPIC, Source, log_record

log = structlog.get_logger("deploy.telemetry")

MAX_RECORD_BYTES = 900_000
"""Under the producer's max.request.size and the broker's message.max.bytes (1 MiB)."""
_UNPRODUCIBLE = frozenset(
    {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_RECORD}
)
_FAILURES = (TriokaError, OSError, trio.BrokenResourceError, trio.ClosedResourceError)

Bootstrap = Callable[[], Sequence[str]]


def local_source(role: str, node_id: int | None) -> Source:
    return Source(role, node_id, socket.gethostname(), os.getpid())


class TelemetryShipper:
    def __init__(
        self,
        settings: TelemetrySettings,
        source: Source,
        *,
        bootstrap: Bootstrap | None = None,
        registry: CollectorRegistry | Collector = REGISTRY,
        tee: LogTee = LOG_TEE,
        policy: ShipPolicy | None = None,
        buffer_max_records: int = DEFAULT_MAX_RECORDS,
        attempt_timeout_s: float = 15.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self.source = source
        self.key = source.key
        configured = settings.bootstrap_servers
        self.bootstrap: Bootstrap = bootstrap or (lambda: configured)
        self.registry = registry
        self.tee = tee
        self.clock = clock
        """The process's clock (deploy.node.runtime.NodeRuntime): snapshots' and log events'
        wall time."""
        self.policy = policy or ShipPolicy()
        self.buffer = TelemetryBuffer(buffer_max_records)
        self.spool = Spool(settings.spool_dir, settings.spool_max_bytes)
        self.attempt_timeout_s = attempt_timeout_s
        self._seq = dict.fromkeys(SHIPPED_TOPICS, 0)
        self._producer: Producer | None = None
        self._producer_done: trio.Event | None = None
        self._nursery: trio.Nursery | None = None
        self._topics_ready = False
        self._started_at: float | None = None
        self._drops: dict[str, int] = {}
        """Records dropped, per topic: at the buffer's bound (counted there, added here by the
        metrics loop), at the spool's, unproducible ones."""
        self._buffer_drops_counted: dict[str, int] = {}
        self._reported_drops: dict[str, int] = {}
        self._last_error = ""

    # -- the tee's side (any thread, never blocks) ----------------------------------------------

    def capture(self) -> None:
        """Start queueing this process's log events (before the broker starts, so its start-up
        events are shipped too)."""
        self.tee.attach(self._on_log, self.clock)

    def release(self) -> None:
        self.tee.detach(self._on_log)

    def _on_log(self, event_dict: Any, ts_ms: int) -> None:
        self.buffer.offer(Entry(LOGS_TOPIC, self.key, log_record(event_dict, ts_ms)))

    # -- the tasks ------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        MUTED.set(True)  # this task's context, inherited by every task it starts
        self._started_at = trio.current_time()
        self.spool.open()
        self.capture()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._metrics_loop)
                nursery.start_soon(self._ship_loop)
                log.info(
                    "telemetry shipper started",
                    source=self.key,
                    interval_s=self.settings.interval_s,
                    spool_dir=str(self.settings.spool_dir),
                    spooled_bytes=self.spool.size_bytes,
                )
                task_status.started()
        finally:
            self.release()

    async def _metrics_loop(self) -> None:
        while True:
            snap = snapshot(self.registry, self.source, self.clock.wall_ms())
            self.buffer.offer(Entry(METRICS_TOPIC, self.key, snap.to_json()))
            self._report_drops()
            await trio.sleep(self.settings.interval_s)

    async def _ship_loop(self) -> None:
        try:
            while True:
                await trio.sleep(self.policy.linger_s)
                await self.ship_round()
        finally:
            # On the way out (the producer is being cancelled too): what is left waits in the
            # spool for the next run of this process.
            self._to_spool(self._serialize(self.buffer.take(self.buffer.max_records)))
            self._close_producer()

    async def ship_round(self) -> None:
        """Ship (or spool) what the buffer holds, then drain the spool if it is time to."""
        records = self._serialize(self.buffer.take(self.buffer.max_records))
        now = trio.current_time()
        if records:
            if self.policy.route(now, spool_pending=self.spool.pending) is Route.PRODUCE:
                records = await self._produce(records)
            self._to_spool(records)
        if self.spool.pending and self.policy.may_drain(trio.current_time()):
            await self._drain()

    # -- records --------------------------------------------------------------------------------

    def _serialize(self, entries: Iterable[Entry]) -> list[SpoolRecord]:
        out = []
        for entry in entries:
            seq = self._seq[entry.topic]
            self._seq[entry.topic] = seq + 1
            value = json_text.dumps({**entry.record, "seq": seq})
            if len(value) > MAX_RECORD_BYTES:
                self._drop(entry.topic, f"a record of {len(value)} bytes (> {MAX_RECORD_BYTES})")
                continue
            out.append(SpoolRecord(entry.topic, entry.key, value))
        return out

    def _to_spool(self, records: Sequence[SpoolRecord]) -> None:
        if not records:
            return
        try:
            result = self.spool.append(records)
        except OSError as exc:
            for r in records:
                self._drop(r.topic, f"the spool cannot be written: {exc}")
            return
        for topic, n in result.spooled.items():
            RECORDS_SPOOLED.labels(topic=topic).inc(n)
        for topic, n in result.dropped.items():
            self._drops[topic] = self._drops.get(topic, 0) + n
            RECORDS_DROPPED.labels(topic=topic).inc(n)

    def _drop(self, topic: str, why: str) -> None:
        self._drops[topic] = self._drops.get(topic, 0) + 1
        RECORDS_DROPPED.labels(topic=topic).inc()
        self._last_error = why

    def _report_drops(self) -> None:
        """The buffer's drops into the counter, and one warning per interval if any."""
        for topic, n in list(self.buffer.dropped.items()):
            new = n - self._buffer_drops_counted.get(topic, 0)
            if new > 0:
                RECORDS_DROPPED.labels(topic=topic).inc(new)
                self._buffer_drops_counted[topic] = n
                self._drops[topic] = self._drops.get(topic, 0) + new
                self._last_error = f"the buffer is full ({self.buffer.max_records} records)"
        reported = self._reported_drops
        new = {t: n - reported.get(t, 0) for t, n in self._drops.items() if n > reported.get(t, 0)}
        if new:
            log.warning(
                "telemetry records dropped",
                dropped=new,
                buffer_max_records=self.buffer.max_records,
                spool_max_bytes=self.spool.max_bytes,
                last_error=self._last_error,
            )
            self._reported_drops = dict(self._drops)

    # -- the cluster ----------------------------------------------------------------------------

    async def _produce(self, records: Sequence[SpoolRecord]) -> list[SpoolRecord]:
        """Produce in batches; returns the records not acknowledged (empty: all were)."""
        size = self.policy.batch_max_records
        for start in range(0, len(records), size):
            failed = await self._attempt(records[start : start + size])
            if failed:
                return [*failed, *records[start + size :]]
        return []

    async def _drain(self) -> None:
        """Spooled records to the cluster, oldest first, while it takes them (at most a few
        batches per round, so the buffer is taken meanwhile)."""
        for _ in range(20):
            batch = self.spool.read(self.policy.batch_max_records)
            for problem in batch.skipped:
                log.warning("telemetry spool line skipped", problem=problem)
            if batch.records and await self._attempt(batch.records):
                return
            self.spool.commit(batch.end)
            if not self.spool.pending:
                log.info("telemetry spool drained", source=self.key)
                return

    async def _attempt(self, records: Sequence[SpoolRecord]) -> list[SpoolRecord]:
        """One produce attempt of a batch; the records that were not acknowledged."""
        producer = await self._producer_or_none()
        if producer is None:
            return self._failed(list(records), self._last_error or "no producer")
        futures = []
        error = ""
        with trio.move_on_after(self.attempt_timeout_s) as scope:
            try:
                for r in records:
                    futures.append(await producer.send(r.topic, r.value.encode(), r.key.encode()))
                await producer.flush()
            except _FAILURES as exc:
                error = str(exc) or type(exc).__name__
        if scope.cancelled_caught:
            error = f"no answer within {self.attempt_timeout_s:g} s"
        failed = []
        shipped: dict[str, int] = {}
        for i, r in enumerate(records):
            exc = futures[i].exception() if i < len(futures) and futures[i].done() else None
            if i < len(futures) and futures[i].done() and exc is None:
                shipped[r.topic] = shipped.get(r.topic, 0) + 1
            elif isinstance(exc, KafkaError) and exc.code in _UNPRODUCIBLE:
                self._drop(r.topic, str(exc))
            else:
                failed.append(r)
                error = error or (str(exc) if exc is not None else "not acknowledged")
        for topic, n in shipped.items():
            RECORDS_SHIPPED.labels(topic=topic).inc(n)
        if failed:
            self._close_producer()
            return self._failed(failed, error)
        self.policy.succeeded()
        return []

    def _failed(self, records: list[SpoolRecord], error: str) -> list[SpoolRecord]:
        first = self.policy.healthy
        backoff = self.policy.failed(trio.current_time())
        self._last_error = error
        if first:  # one warning per outage, not one per attempt
            log.warning(
                "telemetry shipping failed; spooling",
                error=error,
                records=len(records),
                retry_backoff_s=backoff,
            )
        return records

    async def _producer_or_none(self) -> Producer | None:
        if self._producer is not None:
            return self._producer
        servers = list(self.bootstrap())
        if not servers:
            self._last_error = "no broker known to ship to"
            return None
        if not self._topics_ready and not await self._ensure_topics(servers):
            return None
        assert self._nursery is not None
        try:
            producer: Producer = await self._nursery.start(self._producer_session, servers)
        except _FAILURES as exc:
            self._last_error = f"cannot reach {','.join(servers)}: {exc}"
            return None
        self._producer = producer
        return producer

    async def _producer_session(
        self, servers: list[str], *, task_status: trio.TaskStatus[Producer]
    ) -> None:
        """One producer's life, in a task of its own (its nursery nests in this task only):
        until `_close_producer`, or the shipper stops."""
        producer = Producer(
            {
                **self.settings.client,
                "bootstrap.servers": servers,
                "client.id": f"trioka-telemetry-{self.key}",
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "max.block.ms": 5000,
                # A cluster that cannot take records is found out within seconds (the client
                # refreshes metadata without pause meanwhile); the spool takes over.
                "request.timeout.ms": 3000,
                "delivery.timeout.ms": 5000,
                "socket.connection.setup.timeout.ms": 3000,
            }
        )
        await producer.start()
        done = self._producer_done = trio.Event()
        try:
            task_status.started(producer)
            await done.wait()
        finally:
            await producer.close(timeout_ms=0)  # what it still holds is in the spool

    def _close_producer(self) -> None:
        self._producer = None
        if self._producer_done is not None:
            self._producer_done.set()
            self._producer_done = None

    async def _ensure_topics(self, servers: list[str]) -> bool:
        """Create the missing telemetry topics (telemetry.topics); False to try again later."""
        waited = trio.current_time() - (self._started_at or trio.current_time())
        config = {
            **self.settings.client,
            "bootstrap.servers": servers,
            "client.id": f"trioka-telemetry-{self.key}",
            "request.timeout.ms": 5000,
            "default.api.timeout.ms": 10000,
            "socket.connection.setup.timeout.ms": 3000,
        }
        with trio.move_on_after(self.attempt_timeout_s):
            try:
                async with Admin(config) as admin:
                    existing = set(await admin.list_topics(include_internal=True))
                    missing = [t for t in SHIPPED_TOPICS if t not in existing]
                    if missing:
                        live = len((await admin.describe_cluster()).brokers)
                        configured = self.settings.replication_factor
                        rf = creation_replication_factor(configured, live, waited)
                        if rf is None:
                            self._last_error = (
                                f"waiting for {configured} live brokers to create the telemetry "
                                f"topics (trioka.telemetry.replication.factor; {live} live)"
                            )
                            return False
                        for topic in missing:
                            await self._create(admin, topic, rf)
                self._topics_ready = True
                return True
            except _FAILURES as exc:
                self._last_error = f"cannot create the telemetry topics: {exc}"
                return False
        self._last_error = "creating the telemetry topics timed out"
        return False

    async def _create(self, admin: Admin, topic: str, rf: int) -> None:
        try:
            await admin.create_topics(
                [NewTopic(topic, TELEMETRY_PARTITIONS, rf, dict(TOPIC_CONFIGS))]
            )
            log.info("telemetry topic created", topic=topic, replication_factor=rf)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
